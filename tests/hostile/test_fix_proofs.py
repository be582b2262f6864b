"""A fix is proven only by a re-probe of the machine it was applied to. A pod that answers the
re-probe as another machine (its address reused by another pod, or a pod that lies) proves
nothing: `fleet fix` says how the machine differs and exits 1. On real sshd pods, whose own
`mkdir` turns them into another machine while the fix's step runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
from fleet_helpers import HEALTHY, host_entry, write_inventory
from sshfleet import PodSpec

from computefence.evaluate.machine import machine_changes
from computefence.models import Facts, GpuDevice, GpuFacts, HostReport, HostStatus, IdentityFacts

# storage.output-dir's fix is `mkdir -p /workspace/runs/7/ckpt`.
CHECKS = {"output_dir": "/workspace/runs/7/ckpt"}
MACHINE_ID = "0123456789abcdef0123456789abcdef"
# What the pod's mkdir does to it, besides making the folder.
BECOMES_ANOTHER = {
    "machine id": "echo fedcba9876543210fedcba9876543210 > /etc/machine-id",
    "hostname": "hostname impostor",
}


def _mkdir_that(change: str) -> str:
    return f'#!/bin/sh\ncase "$*" in *ckpt*) {change};; esac\nexec /bin/mkdir "$@"\n'


@pytest.mark.sshd
@pytest.mark.parametrize("what", sorted(BECOMES_ANOTHER))
def test_a_re_probe_answered_by_another_machine_proves_no_fix_and_exits_1(what, ssh_fleet, start_pods, cli, tmp_path):
    files = {"/etc/machine-id": MACHINE_ID + "\n", "/usr/local/bin/mkdir": _mkdir_that(BECOMES_ANOTHER[what])}
    (pod,) = start_pods(PodSpec(f"swap-{what.split()[-1]}", **dict(HEALTHY, shm_size="16g"), files=files))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=CHECKS)

    code, out, _ = cli(
        "fleet",
        "fix",
        "-i",
        str(inventory),
        "--no-policy",
        "--only",
        "storage.output-dir",
        "--apply",
        "--yes",
        "-f",
        "json",
    )

    host = json.loads(out)["hosts"][0]
    assert [s["status"] for s in host["steps"]] == ["ran"], json.dumps(host, indent=1)
    (result,) = host["results"]
    assert result["outcome"] == "failed" and code == 1
    assert "another machine" in result["reason"] and what in result["reason"]
    _, text, _ = cli("fleet", "fix", "-i", str(inventory), "--no-policy", "--only", "storage.output-dir")
    assert "another machine" not in text  # the pod is now judged as it is: nothing carried over


def _probed(hostname: str, uuids: list[str]) -> HostReport:
    gpus = [GpuDevice(index=i, name="H100", uuid=u) for i, u in enumerate(uuids)]
    facts = Facts(identity=IdentityFacts(hostname=hostname), gpu=GpuFacts(gpus=gpus))
    return HostReport(name="pod", status=HostStatus.OK, facts=facts)


def test_new_gpu_uuids_are_another_machine_but_a_gpu_that_fell_off_is_not():
    before = _probed("gpu-7", ["GPU-aaaa", "GPU-bbbb"])
    assert machine_changes(before, _probed("gpu-7", ["GPU-aaaa", "GPU-cccc"])) == ["GPU GPU-cccc was not on it"]
    assert machine_changes(before, _probed("gpu-7", ["GPU-aaaa"])) == []
