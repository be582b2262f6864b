"""Exported inventories and ssh_config blocks load back to the same targets."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from computefence.models import CheckOptions, ProviderInfo, Target
from computefence.sources.export import export_ssh_config, export_yaml
from computefence.sources.inventory import load_inventory
from computefence.sources.ssh_config import SshConfigSource, ssh_available

CONNECTION = ("host", "port", "user", "identity_files", "proxy_jump")


def reloaded_yaml(tmp_path: Path, targets: list[Target]) -> list[Target]:
    path = tmp_path / "exported.yaml"
    path.write_text(export_yaml(targets))
    return load_inventory(path)


def essentials(target: Target) -> dict:
    return target.model_dump(include={"name", *CONNECTION, "python", "tags", "checks"})


MIXED = [
    Target(
        name="pod-a",
        host="203.0.113.10",
        port=22022,
        user="root",
        identity_files=["/k/a", "/k/b"],
        known_hosts=["/kh/one"],
        tags=["sweep-7"],
        python="/opt/conda/bin/python",
        checks=CheckOptions(
            output_dir="./out",
            dataset="/d.jsonl",
            input_column="text",
            label_column="label",
            expect_gpu=True,
            extra_paths=["/workspace/x"],
        ),
        source="inventory/pods.yaml:9",
    ),
    Target(
        name="My Pod #2",
        host="198.51.100.5",
        port=40022,
        user="root",
        source="runpod",
        provider=ProviderInfo(
            provider="runpod", pod_id="abc123", gpu_type="H100 80GB HBM3", gpu_count=2, cost_per_hour=4.98
        ),
    ),
    Target(name="My-Pod-2", host="198.51.100.6", proxy_jump="jump@bastion:2222", known_hosts=["/kh/two"]),
    Target(
        name="stopped-pod",
        host="",
        source="vast",
        unreachable_reason="instance is stopped",
        provider=ProviderInfo(provider="vast", pod_id="77", state="stopped"),
    ),
]


def test_yaml_round_trip(tmp_path):
    text = export_yaml(MIXED)
    assert "# Left out, not checkable: stopped-pod: instance is stopped" in text
    assert "# was 'My Pod #2', runpod pod abc123, 2x H100 80GB HBM3, $4.98/h" in text
    back = reloaded_yaml(tmp_path, MIXED)
    assert [t.name for t in back] == ["pod-a", "My-Pod-2", "My-Pod-2-2"]
    for original, loaded in zip(MIXED[:3], back):
        expected = essentials(original)
        expected["name"] = loaded.name
        assert essentials(loaded) == expected
    # known_hosts files become the inventory's, for every host
    assert back[0].known_hosts == back[2].known_hosts == ["/kh/one", "/kh/two"]


@pytest.mark.parametrize(
    "use_ssh",
    [pytest.param(True, marks=pytest.mark.skipif(not ssh_available(), reason="needs the OpenSSH client")), False],
)
def test_ssh_config_round_trip(tmp_path, use_ssh):
    path = tmp_path / "ssh_config"
    text = export_ssh_config(MIXED)
    assert "Host My-Pod-2\n    HostName 198.51.100.5\n    Port 40022\n    User root\n" in text
    assert "stopped-pod: instance is stopped" in text and "Host stopped-pod" not in text
    path.write_text(text)
    back = SshConfigSource(config=str(path), use_ssh=use_ssh).targets()
    assert [t.name for t in back] == ["pod-a", "My-Pod-2", "My-Pod-2-2"]
    for original, loaded in zip(MIXED[:3], back):
        # ssh -G names the user ssh would log in as even where the config names none
        expected = original.model_dump(include=set(CONNECTION))
        if use_ssh and expected["user"] is None:
            expected["user"] = getpass.getuser()
        assert loaded.model_dump(include=set(CONNECTION)) == expected
    assert back[0].known_hosts == [str(Path("~/.ssh/known_hosts").expanduser()), "/kh/one"]


def test_percent_in_identity_file_survives_ssh_token_expansion(tmp_path):
    target = Target(name="p", host="h", identity_files=["/keys/100%/id"])
    path = tmp_path / "cfg"
    path.write_text(export_ssh_config([target]))
    assert "IdentityFile /keys/100%%/id" in path.read_text()
    assert SshConfigSource(config=str(path)).targets()[0].identity_files == ["/keys/100%/id"]


def test_relative_identity_files_are_exported_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (back,) = reloaded_yaml(tmp_path, [Target(name="p", host="h", identity_files=["keys/id"])])
    assert back.identity_files == [str(tmp_path / "keys/id")]


names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}", fullmatch=True)
words = st.from_regex(r"[a-z][a-z0-9._-]{0,10}", fullmatch=True)
paths = st.lists(words, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
checks = st.builds(
    CheckOptions,
    output_dir=st.none() | paths,
    dataset=st.none() | paths,
    input_column=st.none() | words,
    label_column=st.none() | words,
    accelerate_config=st.none() | paths,
    expect_gpu=st.booleans(),
    extra_paths=st.lists(paths, max_size=2),
)
targets = st.builds(
    Target,
    name=names,
    host=st.one_of(words, st.ip_addresses(v=4).map(str)),
    port=st.integers(1, 65535),
    user=st.none() | words,
    identity_files=st.lists(paths, max_size=2, unique=True),
    proxy_jump=st.none() | words,
    python=st.sampled_from(["python3", "python", "/opt/conda/bin/python"]),
    tags=st.lists(words, max_size=3),
    checks=checks,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(targets, min_size=1, max_size=4, unique_by=lambda t: t.name))
def test_yaml_round_trip_property(tmp_path, generated):
    back = reloaded_yaml(tmp_path, generated)
    assert [essentials(t) for t in back] == [essentials(t) for t in generated]
