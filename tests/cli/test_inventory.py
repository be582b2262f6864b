"""`computefence inventory list|export` through the real CLI entry point."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

import computefence.sources.registry as registry
from computefence.cli import main
from computefence.errors import SourceError
from computefence.models import Fix, ProviderInfo, Target

INVENTORY = """\
known_hosts: /kh/pods
defaults:
  user: root
  identity_file: /keys/id_ed25519
  checks: {output_dir: /workspace/checkpoints}
hosts:
  - name: pod-a
    host: 127.0.0.1
    port: PORT
    tags: [sweep-7]
    checks: {output_dir: ./out, dataset: /workspace/data/train.jsonl, input_column: text, label_column: label}
  - name: pod-b
    host: 203.0.113.11
    tags: [sweep-8]
    python: /opt/conda/bin/python
    proxy_jump: jump@bastion
"""


@pytest.fixture
def inv(tmp_path) -> Path:
    path = tmp_path / "pods.yaml"
    path.write_text(INVENTORY.replace("PORT", "22022"))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json(capsys, inv):
    code, out, err = run(capsys, "inventory", "list", "-i", str(inv), "--format", "json")
    assert code == 0 and err == ""
    document = json.loads(out)
    assert [t["name"] for t in document["targets"]] == ["pod-a", "pod-b"]
    a = document["targets"][0]
    assert (a["host"], a["port"], a["user"], a["identity_files"]) == ("127.0.0.1", 22022, "root", ["/keys/id_ed25519"])
    assert a["checks"]["dataset"] == "/workspace/data/train.jsonl" and a["source"] == f"{inv}:7"
    assert document["sources"] == [
        {"name": str(inv), "ok": True, "targets": 2, "error": None, "resolver": None, "warnings": []}
    ]


def test_list_json_is_indented_ascii_whatever_the_names(capsys, tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text("hosts:\n  - {name: pod-é, host: 10.0.0.1}\n")
    code, out, _ = run(capsys, "inventory", "list", "-i", str(path), "--format", "json")
    assert code == 0 and out.isascii()
    assert '\n      "name": "pod-\\u00e9",\n' in out
    assert json.loads(out)["targets"][0]["name"] == "pod-é"


def test_list_rich_shows_how_each_is_reached_without_connecting(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    path = tmp_path / "pods.yaml"
    path.write_text(INVENTORY.replace("PORT", str(port)))
    try:
        code, out, _ = run(capsys, "inventory", "list", "-i", str(path))
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    finally:
        listener.close()
    assert code == 0
    assert f"root@127.0.0.1:{port}" in out
    assert re.search(r"root@203\.0\.113\.11:22 +-J jump@bastion", out)
    assert "/opt/conda/bin/python" in out and "sweep-8" in out
    assert "2 targets to check, from 1 source; nothing was connected to." in out


@pytest.mark.parametrize(
    "content,line,words",
    [
        ("hosts:\n  - name: a\n    host: x\n    prot: 22\n", 4, "unknown key 'prot'"),
        ("hosts:\n  - name: a\n    host: x\n    port: 99999\n", 4, "between 1 and 65535"),
        ("hosts:\n  - {name: a, host: x}\n  - {name: a, host: y}\n", 3, "duplicate host name 'a'"),
        ("hosts:\n  - name: a\n", 2, "missing required key 'host'"),
        ("", 1, "empty"),
        ("hosts:\n  - {host: x\n", 3, "YAML syntax error"),
    ],
)
@pytest.mark.parametrize("command", ["list", "export"])
def test_inventory_errors_exit_2_naming_file_and_line(capsys, tmp_path, command, content, line, words):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, out, err = run(capsys, "inventory", command, "-i", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"computefence: error: {path}:{line}: ") and err.count("\n") == 1
    assert words in err


def test_other_sources_errors_exit_2_naming_file_and_line(capsys, tmp_path):
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nbox ansible_port=0\n")
    code, _, err = run(capsys, "inventory", "list", "--ansible-inventory", str(ini))
    # The built-in reader names the line; ansible-inventory's answer names the host
    assert code == 2 and err.startswith(f"computefence: error: {ini}") and "ansible_port must be a port" in err
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host box\n  Port x\n")
    code, _, err = run(capsys, "inventory", "list", "--ssh-config", str(cfg))
    # ssh -G words it its own way ("Badly formatted port number"); the place is the same
    assert code == 2 and err.startswith(f"computefence: error: {cfg}:2: ") and "port" in err.lower()
    code, _, err = run(capsys, "inventory", "list", "-i", str(tmp_path / "missing.yaml"))
    assert code == 2 and err == f"computefence: error: {tmp_path / 'missing.yaml'}: no such inventory file\n"


def test_selection_options(capsys, inv):
    code, out, _ = run(capsys, "inventory", "list", "-i", str(inv), "-f", "json", "--tag", "sweep-8")
    assert code == 0 and [t["name"] for t in json.loads(out)["targets"]] == ["pod-b"]
    code, out, _ = run(capsys, "inventory", "list", "-i", str(inv), "-f", "json", "--limit", "pod-*,!pod-b")
    assert code == 0 and [t["name"] for t in json.loads(out)["targets"]] == ["pod-a"]
    code, out, err = run(capsys, "inventory", "list", "-i", str(inv), "--limit", "web-*")
    assert code == 2 and out == ""
    assert "matched none of the 2 targets (names: pod-a, pod-b; tags: sweep-7, sweep-8)" in err


def test_default_inventory_and_no_inventory(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "inventory", "list")
    assert code == 2 and "pass -i FILE" in err
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory/pods.yaml").write_text(INVENTORY.replace("PORT", "2222"))
    code, out, _ = run(capsys, "inventory", "list", "-f", "json")
    assert code == 0 and json.loads(out)["targets"][0]["source"] == "inventory/pods.yaml:7"


def test_export_yaml_round_trips_through_the_cli(capsys, inv, tmp_path):
    out_file = tmp_path / "exported.yaml"
    code, out, err = run(capsys, "inventory", "export", "-i", str(inv), "--format", "yaml", "--output", str(out_file))
    assert code == 0 and out == "" and f"wrote 2 targets to {out_file}" in err
    _, before, _ = run(capsys, "inventory", "list", "-i", str(inv), "-f", "json")
    _, after, _ = run(capsys, "inventory", "list", "-i", str(out_file), "-f", "json")
    strip = lambda doc: [{k: v for k, v in t.items() if k != "source"} for t in json.loads(doc)["targets"]]  # noqa: E731
    assert strip(after) == strip(before)


def test_export_ssh_config_to_stdout_loads_back(capsys, inv, tmp_path):
    code, out, _ = run(capsys, "inventory", "export", "-i", str(inv), "-f", "ssh-config")
    assert code == 0
    assert "Host pod-b\n    HostName 203.0.113.11\n    Port 22\n    User root\n" in out
    assert "    ProxyJump jump@bastion\n" in out
    cfg = tmp_path / "exported_ssh_config"
    cfg.write_text(out)
    code, listed, _ = run(capsys, "inventory", "list", "--ssh-config", str(cfg), "-f", "json")
    targets = json.loads(listed)["targets"]
    assert [(t["name"], t["host"], t["port"], t["proxy_jump"]) for t in targets] == [
        ("pod-a", "127.0.0.1", 22022, None),
        ("pod-b", "203.0.113.11", 22, "jump@bastion"),
    ]


def test_unknown_format_is_a_usage_error(capsys, inv):
    code, _, err = run(capsys, "inventory", "export", "-i", str(inv), "--format", "toml")
    assert code == 2 and "toml" in err


class _Source:
    def __init__(self, name, pods=None, error=None):
        self.name, self.pods, self.error = name, pods or [], error

    def targets(self):
        if self.error:
            raise SourceError(self.error)
        return self.pods


@pytest.fixture
def fake_providers(monkeypatch):
    pods = [
        Target(
            name="rp-live",
            host="198.51.100.5",
            port=40022,
            user="root",
            source="runpod",
            provider=ProviderInfo(
                provider="runpod", pod_id="abc123", gpu_type="H100 80GB", gpu_count=1, cost_per_hour=2.49
            ),
        ),
        Target(
            name="rp-proxy-only",
            host="",
            source="runpod",
            unreachable_reason="no public TCP port 22 (only RunPod's SSH proxy)",
            unreachable_fix=Fix(advice="expose TCP port 22 in the pod's template"),
            provider=ProviderInfo(provider="runpod", pod_id="def456", state="RUNNING"),
        ),
    ]

    def provider_source(name, api_url=None):
        if name == "vast":
            return _Source("vast", error="vast: 401 Unauthorized: check VAST_API_KEY")
        return _Source(name, pods if name == "runpod" else [])

    monkeypatch.setattr(registry, "provider_source", provider_source)


def test_list_providers_shows_price_gpu_and_not_checkable(capsys, monkeypatch, fake_providers):
    monkeypatch.setenv("COLUMNS", "220")
    code, out, _ = run(capsys, "inventory", "list", "--provider", "runpod")
    assert code == 0
    assert "root@198.51.100.5:40022" in out and "runpod abc123, 1x H100 80GB, $2.49/h" in out
    assert (
        "rp-proxy-only: not checkable: no public TCP port 22 (only RunPod's SSH proxy).\n"
        "  note: expose TCP port 22 in the pod's template\n" in out
    )
    assert "1 target to check, 1 not checkable, from 1 source" in out


def test_failed_source_list_exits_1_and_export_refuses(capsys, tmp_path, inv, fake_providers):
    code, out, _ = run(capsys, "inventory", "list", "-i", str(inv), "--provider", "runpod,vast", "-f", "json")
    assert code == 1
    document = json.loads(out)
    assert [t["name"] for t in document["targets"]] == ["pod-a", "pod-b", "rp-live", "rp-proxy-only"]
    # The only source failing is no list at all: exit 2 naming why.
    code, text, err = run(capsys, "inventory", "list", "--provider", "vast")
    assert code == 2 and text == ""
    assert err == (
        "computefence: error: every target source failed, nothing to check: "
        "vast: 401 Unauthorized: check VAST_API_KEY\n"
    )
    assert document["sources"][-1] == {
        "name": "vast",
        "ok": False,
        "targets": 0,
        "error": "vast: 401 Unauthorized: check VAST_API_KEY",
        "resolver": None,
        "warnings": [],
    }

    out_file = tmp_path / "out.yaml"
    code, out, err = run(capsys, "inventory", "export", "-i", str(inv), "--provider", "vast", "-o", str(out_file))
    assert code == 2 and not out_file.exists()
    assert err == "computefence: error: vast: 401 Unauthorized: check VAST_API_KEY; nothing exported\n"


def test_export_leaves_out_what_cannot_be_checked(capsys, fake_providers):
    code, out, err = run(capsys, "inventory", "export", "--provider", "runpod")
    assert code == 0
    assert "- name: rp-live" in out and "name: rp-proxy-only" not in out
    assert "# Left out, not checkable: rp-proxy-only: no public TCP port 22" in out
    assert "left out 1 target that" in err
    code, _, err = run(capsys, "inventory", "export", "--provider", "lambda")
    assert code == 2 and "nothing to export: no targets" in err


@pytest.mark.parametrize("columns", ["80", "60"])
def test_list_at_a_narrow_terminal_never_splits_a_key_path(capsys, monkeypatch, tmp_path, columns):
    monkeypatch.setenv("COLUMNS", columns)
    inventory = tmp_path / "pods.yaml"
    inventory.write_text(
        "defaults: {user: root, identity_file: ~/.ssh/id_ed25519}\nhosts:\n"
        "  - {name: pod-a, host: 203.0.113.10, port: 22022, tags: [sweep-7]}\n"
        "  - {name: pod-with-a-longer-name, host: 203.0.113.11, tags: [sweep-7, h100]}\n"
    )
    code, out, _ = run(capsys, "inventory", "list", "-i", str(inventory))
    assert code == 0
    lines = out.splitlines()
    # Only the source, a path longer than the line here, goes past it: whole, not dropped.
    assert all(len(line.rstrip()) <= int(columns) or line.split()[-1].startswith(str(inventory)) for line in lines)
    assert sum("~/.ssh/id_ed25519" in line for line in lines) == 2
