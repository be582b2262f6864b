"""Class 8: an inventory author writes what Ansible or OpenSSH reads one way, hoping ComputeFence
reads it another (`IdentityFile none`, comments Ansible does not take, ranges, Jinja). Each case
asserts on what the CLI prints; where the real tool is here, it is asked too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from computefence.cli import main
from computefence.sources.ansible import ansible_inventory_command
from computefence.sources.ssh_config import ssh_available

needs_ansible = pytest.mark.skipif(ansible_inventory_command() is None, reason="the reference is ansible-inventory")
needs_ssh = pytest.mark.skipif(not ssh_available(), reason="the reference is ssh -G")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys, *argv: str) -> tuple[list[dict], str]:
    code, out, err = run(capsys, "inventory", "list", *argv, "--format", "json")
    assert code == 0, err
    assert "Traceback" not in err
    return json.loads(out)["targets"], err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("computefence: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def hide_ansible(tmp_path, monkeypatch) -> None:
    """The built-in reader decides: no ansible-inventory on PATH, no importable Ansible."""
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "ansible.cli.inventory", None)


def ansible_list(path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ansible-inventory", "-i", str(path), "--list"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


# ---------------------------------------------------------------- IdentityFile none


@needs_ssh
def test_identity_file_none_is_no_key_and_stays_none_in_the_export(tmp_path, capsys):
    config = tmp_path / "ssh_config"
    config.write_text("Host pod\n  HostName 10.0.0.1\n  IdentityFile none\n")
    (target,) = listed(capsys, "--ssh-config", str(config), "-H", "pod")[0]
    assert target["identity_files"] == [] and target["default_identities"] is False
    code, out, err = run(capsys, "inventory", "export", "--ssh-config", str(config), "-H", "pod", "-f", "ssh-config")
    assert code == 0, err
    exported = tmp_path / "exported"
    exported.write_text(out)
    g = subprocess.run(["ssh", "-G", "-F", str(exported), "pod"], capture_output=True, text=True, check=True).stdout
    # ssh reading what we wrote tries no key file, as it did reading the original
    assert [line for line in g.splitlines() if line.startswith("identityfile ")] == ["identityfile none"]


# ---------------------------------------------------------------- INI comments


@needs_ansible
def test_a_semicolon_comment_after_a_header_is_no_header(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngood ansible_host=10.0.0.1\n[pods] ; every pod\nsneaky ansible_host=10.0.0.2\n")
    # Ansible refuses the file; the old reader took `[pods]` as a header and sneaky as a pod
    assert "Failed to parse" in ansible_list(path).stderr
    targets, err = listed(capsys, "--ansible-inventory", str(path))
    assert [(t["name"], t["tags"]) for t in targets] == [("good", ["gpu"])]
    assert f"{path}:3: bad section header '[pods] ; every pod'; skipped up to the next section" in err


@needs_ansible
def test_a_semicolon_comment_after_a_child_group_is_refused(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu:children]\nkid ; the one\n[kid]\nk1\n[gpu]\ng1\n")
    assert "Failed to parse" in ansible_list(path).stderr
    targets, err = listed(capsys, "--ansible-inventory", str(path))
    # kid is no child of gpu: its host carries no gpu tag (the old reader gave it one)
    assert {t["name"]: t["tags"] for t in targets} == {"k1": ["kid"], "g1": ["gpu"]}
    assert f"{path}:2: expected one group name in [gpu:children], got 'kid ; the one'" in err


@needs_ansible
def test_a_hash_inside_quotes_is_the_value_not_a_comment(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hosts.ini"
    path.write_text("[pods]\np1 ansible_host=10.0.0.1 ansible_user='ops # not a comment'\n[pods:hosts]\np2\n")
    hostvars = json.loads(ansible_list(path).stdout)["_meta"]["hostvars"]
    assert hostvars["p1"]["ansible_user"] == "ops # not a comment"
    hide_ansible(tmp_path, monkeypatch)
    targets, _ = listed(capsys, "--ansible-inventory", str(path))
    # `[pods:hosts]` is Ansible's spelling of `[pods]`: the old reader dropped p2 as a bad header
    assert [(t["name"], t["user"], t["tags"]) for t in targets] == [
        ("p1", "ops # not a comment", ["pods"]),
        ("p2", None, ["pods"]),
    ]
