"""RunPod discovery through the real runpod SDK against the local fake API."""

from __future__ import annotations

import os
import re
import sys

import pytest
from fake_api import runpod_pod

from computefence.errors import ConfigError, SourceError
from computefence.sources.runpod import INSTALL_HINT, RunPodSource


def by_name(targets):
    return {t.name: t for t in targets}


def test_running_pod_with_public_tcp22_is_reached_directly(api, fast):
    api.runpod_pods = [runpod_pod("pod1", "trainer", ssh=("203.0.113.10", 22101), cost=2.99, gpu_count=2)]
    [target] = RunPodSource(api.base_url("runpod"), policy=fast).targets()

    assert (target.name, target.host, target.port, target.user) == ("trainer", "203.0.113.10", 22101, "root")
    assert target.unreachable_reason is None
    assert target.source == "runpod" and "runpod" in target.tags
    info = target.provider
    assert (info.provider, info.pod_id, info.state) == ("runpod", "pod1", "running")
    assert (info.gpu_type, info.gpu_count, info.cost_per_hour) == ("NVIDIA H100 80GB HBM3", 2, 2.99)
    assert (info.volume_gb, info.volume_mount_path, info.persistent_paths) == (50, "/workspace", ["/workspace"])
    assert info.container_disk_gb == 20
    assert info.image.startswith("runpod/pytorch:")

    # The request is the SDK's own: its GraphQL query, its user agent, our key as a bearer token.
    [seen] = api.seen("runpod")
    assert (seen.method, seen.path) == ("POST", "/graphql")
    assert "myself" in seen.body and "runtime" in seen.body and "gpuDisplayName" in seen.body
    assert "RunPod-Python-SDK" in (seen.user_agent or "")
    assert seen.authorization == f"Bearer {api.keys['runpod']}"


def test_pods_that_cannot_be_checked_say_why_and_what_to_do(api, fast):
    api.runpod_pods = [
        runpod_pod("p-proxy", "proxy-only", ssh=None),
        runpod_pod("p-private", "private-ip", public_ip=False),
        runpod_pod("p-exited", "stopped", status="EXITED"),
        runpod_pod("p-start", "booting", started=False),
        runpod_pod("p-term", "gone", status="TERMINATED"),
    ]
    targets = by_name(RunPodSource(api.base_url("runpod"), policy=fast).targets())

    proxy = targets["proxy-only"]
    assert "proxy SSH" in proxy.unreachable_reason and "TCP port 22" in proxy.unreachable_reason
    assert proxy.unreachable_fix.commands == [] and proxy.unreachable_fix.advice.startswith("expose TCP port 22")
    assert proxy.host == ""
    assert "private IP" in targets["private-ip"].unreachable_reason
    assert targets["stopped"].provider.state == "exited"
    assert targets["stopped"].unreachable_fix.commands == ["runpodctl start pod p-exited"]
    assert targets["booting"].provider.state == "starting"
    assert "starting" in targets["booting"].unreachable_reason
    assert targets["gone"].provider.state == "terminated"
    assert all(t.unreachable_fix for t in targets.values())


def test_pod_without_volume_has_no_persistent_path(api, fast):
    api.runpod_pods = [runpod_pod("p0", "novol", volume_gb=0)]
    [target] = RunPodSource(api.base_url("runpod"), policy=fast).targets()
    assert target.provider.volume_gb == 0
    assert target.provider.persistent_paths == []


def test_colliding_and_missing_names_stay_unique(api, fast):
    api.runpod_pods = [
        runpod_pod("a1", "worker"),
        runpod_pod("b2", "worker"),
        runpod_pod("c3", ""),
        runpod_pod("d4", "my pod"),
    ]
    names = [t.name for t in RunPodSource(api.base_url("runpod"), policy=fast).targets()]
    assert names == ["worker-a1", "worker-b2", "runpod-c3", "my-pod"]


def test_base_url_from_the_sdk_variable_and_restored_after(api, fast, monkeypatch):
    api.runpod_pods = [runpod_pod("p1", "one")]
    monkeypatch.setenv("RUNPOD_API_BASE_URL", api.base_url("runpod"))
    assert [t.name for t in RunPodSource(policy=fast).targets()] == ["one"]
    assert os.environ["RUNPOD_API_BASE_URL"] == api.base_url("runpod")

    monkeypatch.delenv("RUNPOD_API_BASE_URL")
    RunPodSource(api.base_url("runpod") + "/graphql/", policy=fast).targets()
    assert "RUNPOD_API_BASE_URL" not in os.environ
    assert [s.path for s in api.seen("runpod")] == ["/graphql", "/graphql"]


def test_key_from_the_sdk_config_file(api, fast, home, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY")
    (home / ".runpod").mkdir()
    (home / ".runpod" / "config.toml").write_text(f'[default]\napi_key = "{api.keys["runpod"]}"\n')
    api.runpod_pods = [runpod_pod("p1", "one")]
    assert len(RunPodSource(api.base_url("runpod"), policy=fast).targets()) == 1


def test_no_key_anywhere(api, fast, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY")
    with pytest.raises(ConfigError, match=r"RunPod: no API key found .*RUNPOD_API_KEY.*config\.toml"):
        RunPodSource(api.base_url("runpod"), policy=fast).targets()
    assert api.seen("runpod") == []


def test_missing_sdk_names_the_extra(api, fast, monkeypatch):
    monkeypatch.setitem(sys.modules, "runpod", None)  # `import runpod` now raises ImportError
    with pytest.raises(ConfigError) as err:
        RunPodSource(api.base_url("runpod"), policy=fast).targets()
    assert str(err.value) == INSTALL_HINT
    # Into this interpreter, and never by the name of the unrelated `computefence` on PyPI.
    assert f"{sys.executable} -m pip install 'runpod>=1.8.1,<2'" in INSTALL_HINT
    assert "computefence" not in INSTALL_HINT


def test_graphql_error_is_one_line(api, fast):
    from fake_api import Fault

    api.fail("runpod", Fault(200, b'{"errors": [{"message": "Something went\\nwrong"}]}'))
    with pytest.raises(SourceError, match=r"^RunPod API error: Something went wrong$"):
        RunPodSource(api.base_url("runpod"), policy=fast).targets()


def test_importing_the_sdk_leaves_logging_alone():
    """runpod's import calls logging.basicConfig(INFO); without the undo every httpx request is printed."""
    import subprocess

    code = (
        "import logging\n"
        "from computefence.sources.runpod import load_sdk\n"
        "load_sdk()\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0", str(30)]


@pytest.mark.parametrize("version", ["1.7.13", "2.0.0rc2"])
def test_sdk_outside_the_supported_range(api, fast, monkeypatch, version):
    import runpod

    monkeypatch.setattr(runpod, "__version__", version)
    with pytest.raises(ConfigError, match=rf"needs runpod>=1\.8\.1,<2 \(installed: {re.escape(version)}\)"):
        RunPodSource(api.base_url("runpod"), policy=fast).targets()
    assert api.seen("runpod") == []
