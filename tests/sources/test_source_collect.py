"""collect_targets: combining sources, the default inventory, failing providers, duplicate names."""

from __future__ import annotations

from pathlib import Path

import pytest

import computefence.sources.registry as registry
from computefence.errors import ConfigError, SourceError
from computefence.models import ProviderInfo, Target
from computefence.sources import TargetSelection, collect_targets


class FakeProvider:
    def __init__(self, name: str, api_url: str | None, pods: list[Target] | None, error: str | None = None):
        self.name, self.api_url, self.pods, self.error = name, api_url, pods, error
        self.asked = False

    def targets(self) -> list[Target]:
        self.asked = True
        if self.error:
            raise SourceError(self.error)
        return list(self.pods or [])


@pytest.fixture
def fake_providers(monkeypatch):
    made: list[FakeProvider] = []
    pods = {
        "runpod": [
            Target(
                name="rp-1",
                host="198.51.100.5",
                port=40022,
                user="root",
                source="runpod",
                provider=ProviderInfo(provider="runpod", pod_id="abc", cost_per_hour=2.49),
            ),
        ],
        "lambda": [Target(name="lam-1", host="198.51.100.9", user="ubuntu", source="lambda")],
    }

    def provider_source(name: str, api_url: str | None = None):
        if name not in ("runpod", "vast", "lambda"):
            raise ConfigError(f"unknown provider {name!r}")
        error = "vast: API key rejected (401); set VAST_API_KEY" if name == "vast" else None
        source = FakeProvider(name, api_url, pods.get(name), error)
        made.append(source)
        return source

    monkeypatch.setattr(registry, "provider_source", provider_source)
    return made


def inventory(path: Path, *hosts: str) -> str:
    path.write_text("hosts:\n" + "".join(f"  - {{name: {h}, host: 10.0.0.1, tags: [t-{h}]}}\n" for h in hosts))
    return str(path)


def test_sources_combine_and_a_failing_provider_does_not_stop_the_rest(tmp_path, fake_providers):
    inv = inventory(tmp_path / "a.yaml", "inv-1", "inv-2")
    ssh = tmp_path / "ssh_config"
    ssh.write_text("Host box\n  HostName 10.2.2.2\n")
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nans-1 ansible_host=10.3.3.3\n")
    targets, statuses = collect_targets(
        TargetSelection(
            inventories=[inv],
            ssh_config=str(ssh),
            ansible_inventories=[str(ini)],
            providers=["runpod,vast", "lambda"],
            api_url="http://127.0.0.1:9",
        )
    )
    assert [t.name for t in targets] == ["inv-1", "inv-2", "box", "ans-1", "rp-1", "lam-1"]
    assert [(s.name, s.ok, s.targets) for s in statuses] == [
        (inv, True, 2),
        (f"ssh_config {ssh}", True, 1),
        (f"ansible {ini}", True, 1),
        ("runpod", True, 1),
        ("vast", False, 0),
        ("lambda", True, 1),
    ]
    assert statuses[4].error == "vast: API key rejected (401); set VAST_API_KEY"
    assert all(p.api_url == "http://127.0.0.1:9" for p in fake_providers)


def test_selection_applies_across_sources(tmp_path, fake_providers):
    inv = inventory(tmp_path / "a.yaml", "inv-1", "inv-2")
    targets, _ = collect_targets(TargetSelection(inventories=[inv], providers=["runpod"], limit="*-1"))
    assert [t.name for t in targets] == ["inv-1", "rp-1"]
    targets, _ = collect_targets(TargetSelection(inventories=[inv], providers=["runpod"], tags=["t-inv-2"]))
    assert [t.name for t in targets] == ["inv-2"]


def test_unknown_provider_is_a_config_error_with_the_real_registry(tmp_path):
    with pytest.raises(ConfigError, match="unknown provider 'aws'"):
        collect_targets(TargetSelection(providers=["aws"]))


def test_config_errors_stop_before_any_provider_is_asked(tmp_path, fake_providers):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  - host: x\n    port: nope\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:3: "):
        collect_targets(TargetSelection(inventories=[str(bad)], providers=["runpod"]))
    assert [p.asked for p in fake_providers] == [False]


def test_duplicate_names_across_sources(tmp_path, fake_providers):
    inv = inventory(tmp_path / "a.yaml", "rp-1")
    with pytest.raises(ConfigError) as info:
        collect_targets(TargetSelection(inventories=[inv], providers=["runpod"]))
    assert str(info.value) == (
        f"target 'rp-1' comes from both {inv}:2 and runpod; names must be unique, rename one or drop one source"
    )


def test_default_inventory_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inventory").mkdir()
    inventory(tmp_path / "inventory/b.yaml", "b")
    inventory(tmp_path / "inventory/a.yml", "a")
    (tmp_path / "inventory/README").write_text("not yaml")
    targets, statuses = collect_targets(TargetSelection())
    assert [t.name for t in targets] == ["a", "b"]
    assert [s.name for s in statuses] == ["inventory/a.yml", "inventory/b.yaml"]
    assert targets[0].source == "inventory/a.yml:2"


def test_no_source_at_all_says_how_to_give_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        collect_targets(TargetSelection())
    message = str(info.value)
    for hint in ("inventory/*.yaml", "-i FILE", "-H SSH_ALIAS", "--ansible-inventory", "--provider", "--demo"):
        assert hint in message


def test_api_url_needs_a_provider(tmp_path):
    with pytest.raises(ConfigError, match="--api-url needs --provider"):
        collect_targets(
            TargetSelection(inventories=[inventory(tmp_path / "a.yaml", "x")], api_url="http://127.0.0.1:1")
        )
