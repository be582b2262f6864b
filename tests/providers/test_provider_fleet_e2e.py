"""`fleet check --provider` end to end: the fake APIs list pods that are real sshd pods of the test fleet."""

from __future__ import annotations

import json
import shutil

import pytest
from fake_api import Fault, lambda_instance, runpod_pod, vast_instance
from sshfleet import PodSpec, closed_port

from computefence.cli import main
from computefence.models import HostStatus, Report

pytestmark = pytest.mark.sshd


def test_pods_discovered_through_provider_apis_are_checked(
    api, start_pods, ssh_fleet, home, tmp_path, capsys, monkeypatch
):
    rp_pod, vast_pod = start_pods(
        PodSpec(
            "rp-trainer",
            nvidia_smi="h100x1",
            torch="cu124",
            workspace_size="50G",
            env={"RUNPOD_POD_ID": "rp1", "HF_HOME": "/workspace/hf"},
        ),
        PodSpec("vast-box", nvidia_smi="rtx4090x1", torch="cu124"),
    )
    # The user's own key and the pods' host keys, as they would be after a first `ssh` to each.
    (home / ".ssh").mkdir()
    shutil.copy(ssh_fleet.identity_file, home / ".ssh" / "id_ed25519")
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    known = tmp_path / "known_hosts"
    known.write_text(rp_pod.known_hosts_line() + vast_pod.known_hosts_line())
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))

    api.runpod_pods = [
        runpod_pod("rp1", "rp-trainer", ssh=(rp_pod.host, rp_pod.port), cost=2.99, volume_gb=50),
        runpod_pod("rp2", "rp-proxy-only", ssh=None, cost=0.69),
        runpod_pod("rp3", "rp-stopped", status="EXITED", cost=0.44),
    ]
    api.vast_instances = [vast_instance(42, "vast-box", direct=(vast_pod.host, vast_pod.port), dph=0.35)]
    api.lambda_instances = [lambda_instance("f" * 32, "lambda-pod")]
    api.keys["lambda"] = "another-key"  # this user's Lambda key was revoked: that source fails alone
    for provider, var in (("runpod", "RUNPOD_API_BASE_URL"), ("vast", "VAST_API_URL"), ("lambda", "LAMBDA_API_URL")):
        monkeypatch.setenv(var, api.base_url(provider))

    code = main(
        [
            "fleet",
            "check",
            "--provider",
            "runpod,vast,lambda",
            "--known-hosts",
            str(known),
            "--format",
            "json",
            "--timeout",
            "30",
        ]
    )
    out, err = capsys.readouterr()
    report = Report.model_validate_json(out)
    hosts = {h.name: h for h in report.hosts}

    assert code == 1, err  # two pods cannot be checked and a source failed
    assert set(hosts) == {"rp-trainer", "rp-proxy-only", "rp-stopped", "vast-box"}

    trainer = hosts["rp-trainer"]
    assert trainer.status is HostStatus.OK, trainer.reason
    assert trainer.facts.identity.hostname == "rp-trainer"
    assert (trainer.host, trainer.port) == (rp_pod.host, rp_pod.port)
    assert (trainer.provider.provider, trainer.provider.pod_id, trainer.provider.cost_per_hour) == (
        "runpod",
        "rp1",
        2.99,
    )
    assert trainer.provider.volume_mount_path == "/workspace"

    box = hosts["vast-box"]
    assert box.status is HostStatus.OK, box.reason
    assert box.facts.identity.hostname == "vast-box"
    assert (box.provider.provider, box.provider.pod_id, box.provider.gpu_type) == ("vast", "42", "RTX 4090")

    proxy = hosts["rp-proxy-only"]
    assert proxy.status is HostStatus.NOT_CHECKABLE and "proxy SSH" in proxy.reason
    assert hosts["rp-stopped"].status is HostStatus.NOT_CHECKABLE

    sources = {s.name: s for s in report.sources}
    assert (sources["runpod"].ok, sources["runpod"].targets) == (True, 3)
    assert (sources["vast"].ok, sources["vast"].targets) == (True, 1)
    assert (
        not sources["lambda"].ok
        and "HTTP 401" in sources["lambda"].error
        and "LAMBDA_API_KEY" in sources["lambda"].error
    )
    assert report.summary.cost_per_hour_total is not None
    assert api.keys["runpod"] not in out + err and api.keys["vast"] not in out + err


def test_a_pod_destroyed_after_discovery_is_reported_as_vanished(api, home, capsys, monkeypatch):
    gone = vast_instance(77, "short-lived", direct=("127.0.0.1", closed_port()))
    # The first listing (discovery) still shows the instance; by the re-check it is destroyed.
    api.fail(
        "vast", Fault(status=200, body=json.dumps({"success": True, "instances": [gone], "next_token": None}).encode())
    )
    monkeypatch.setenv("VAST_API_URL", api.base_url("vast"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))

    code = main(["fleet", "check", "--provider", "vast", "--format", "json", "--connect-timeout", "3"])
    out, err = capsys.readouterr()
    host = Report.model_validate_json(out).hosts[0]

    assert code == 1, err
    assert host.status is HostStatus.VANISHED, host.reason
    assert "vast" in host.reason and "77" in host.reason
    assert host.fix.commands == ["computefence inventory list --provider vast"]
    assert len(api.seen("vast")) == 2
