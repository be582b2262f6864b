"""`fleet check --slurm`, `fleet drain` and `fleet resume` end to end against a real Slurm
(tests/slurmcluster.py): 22.05's slurmctld and one slurmd per node on loopback."""

from __future__ import annotations

import json
import time

import pytest
from slurmcluster import NodeSpec

pytestmark = pytest.mark.slurm

HANG = "#!/bin/sh\nexec sleep 3600\n"
NODES = [
    NodeSpec("n1", nvidia_smi="h100x1", gres_gpus=1),
    NodeSpec("n2", nvidia_smi="a100x2", gres_gpus=2),
    NodeSpec("n3", nvidia_smi="h100x1", gres_gpus=1),  # drained by an administrator
    NodeSpec("n4", nvidia_smi="h100x1", gres_gpus=1),  # busy: a job holds it
    NodeSpec("n5", nvidia_smi="h100x1", gres_gpus=1),  # its slurmd died
    NodeSpec("n6", nvidia_smi="h100x1", gres_gpus=1, bin={"python3": HANG}),  # the probe hangs
    NodeSpec("n7", nvidia_smi="h100x1", gres_gpus=2),  # a GPU of its GRES is gone
    NodeSpec("n8", nvidia_smi="driver-unreachable", gres_gpus=1),  # wedged driver
]


@pytest.fixture(scope="module")
def cluster(start_slurm):
    cluster = start_slurm(NODES)
    cluster.run("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=admin: bad fan")
    cluster.run("sbatch", "--nodelist=n4", "--exclusive", "--output=/dev/null", "--job-name=holder", "--wrap", "sleep 600")
    cluster.wait_until(lambda: cluster.state("n4") == "allocated", what="n4 allocated")
    cluster.kill_node("n5")
    return cluster


@pytest.fixture
def slurm_env(cluster, monkeypatch):
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    return cluster


def by_name(report: dict) -> dict[str, dict]:
    return {h["name"]: h for h in report["hosts"]}


def test_check_reports_each_node_on_its_own(cli, slurm_env, tmp_path):
    out = tmp_path / "report.json"
    started = time.monotonic()
    code, _, err = cli(
        "fleet", "check", "--slurm", "--no-policy", "--timeout", "25", "--immediate", "3", "-f", "json", "-o", str(out)
    )
    took = time.monotonic() - started
    assert code == 1, err
    hosts = by_name(json.loads(out.read_text()))
    assert sorted(hosts) == [f"n{i}" for i in range(1, 9)]
    assert hosts["n1"]["status"] == "ok" and hosts["n1"]["port"] is None
    assert hosts["n2"]["status"] == "ok" and len(hosts["n2"]["facts"]["gpu"]["gpus"]) == 2
    # The node's own namespace: its hostname is its node name.
    assert hosts["n2"]["facts"]["identity"]["hostname"] == "n2"
    assert hosts["n3"]["status"] == "not_checkable"
    assert hosts["n3"]["reason"] == "Slurm has it idle+drain (admin: bad fan)"
    assert hosts["n4"]["status"] == "not_checkable" and hosts["n4"]["reason"].startswith("busy: ")
    assert "squeue --nodelist=n4" in hosts["n4"]["fix_commands"]
    assert hosts["n5"]["status"] == "unreachable" and "Communication connection failure" in hosts["n5"]["reason"]
    assert hosts["n6"]["status"] == "timeout" and "25 s deadline" in hosts["n6"]["reason"]
    missing = [f for f in hosts["n7"]["findings"] if f["check"] == "gpu.missing"]
    assert missing[0]["severity"] == "block" and "1 missing" in missing[0]["message"]
    assert any(f["check"] == "gpu.driver" and f["severity"] == "block" for f in hosts["n8"]["findings"])
    # One hung node and one dead one cost no other node its result, and the run stays bounded.
    assert took < 60
    # The hung step was cancelled with its job (n5's lingers as completing until its slurmd is back).
    slurm_env.wait_until(
        lambda: not slurm_env.run("squeue", "-h", "--nodelist=n6").stdout.strip(), what="n6's step gone"
    )


def test_partition_and_nodelist_narrow_the_nodes(cli, slurm_env):
    code, out, err = cli(
        "fleet", "check", "--slurm", "--no-policy", "--nodelist", "n[1-2]", "-p", "gpu", "--only", "gpu.*", "-f", "json"
    )
    assert code == 0, err
    assert sorted(by_name(json.loads(out))) == ["n1", "n2"]
    code, _, err = cli("fleet", "check", "--slurm", "--nodelist", "n[1,99]")
    assert code == 2 and "no node n99" in err
    code, _, err = cli("fleet", "check", "--slurm", "-p", "nosuch")
    assert code == 2 and "--partition nosuch: no such partition" in err
    code, _, err = cli("fleet", "check", "--nodelist", "n1")
    assert code == 2 and "need --slurm" in err
