"""`doctor --slurm-health` as the HealthCheckProgram of a real slurmd (tests/slurmcluster.py):
slurmd runs it on each node, in the node's namespaces, with no PATH."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from slurmcluster import NodeSpec

from computefence.demo.fakes import write_fake_nvidia_smi

pytestmark = pytest.mark.slurm

# As a site's HealthCheckProgram line runs it; python3 on the node's PATH is the node's own.
HEALTH = [sys.executable, "-m", "computefence", "doctor", "--slurm-health", "-q"]


@pytest.fixture(scope="module")
def action_log(tmp_path_factory):
    return tmp_path_factory.mktemp("health-actions") / "actions.jsonl"


@pytest.fixture(scope="module")
def cluster(start_slurm, action_log):
    nodes = [
        NodeSpec("h1", nvidia_smi="h100x1", gres_gpus=1),
        NodeSpec("h2", nvidia_smi="h100x1", gres_gpus=2),  # a GPU of its GRES is gone
        NodeSpec("h3", nvidia_smi="h100x1", gres_gpus=2),  # the same, then an administrator takes over
    ]
    return start_slurm(nodes, health_check=[*HEALTH, "--log", str(action_log)], health_interval=5)


def health_log(cluster, node: str) -> str:
    path = cluster.base / "log" / f"health-{node}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def logged_calls(action_log, node: str) -> list[tuple[str, object]]:
    """(event, the call sent or whether it succeeded) of `node`'s lines in the action log."""
    entries = [json.loads(line) for line in action_log.read_text().splitlines()] if action_log.exists() else []
    return [
        (e["event"], e["call"] if e["event"] == "send" else e["ok"])
        for e in entries
        if e["node"] == node and e["command"] == "doctor --slurm-health"
    ]


def test_health_check_drains_its_own_node_and_resumes_only_its_own_drain(cluster, action_log):
    for node in ("h2", "h3"):
        cluster.wait_until(
            lambda n=node: cluster.reason(n) == "computefence: gpu.missing", what=f"{node} drained", timeout=90
        )
        assert cluster.state(node) == "drained"
    cluster.wait_until(lambda: "h1: nothing: passed" in health_log(cluster, "h1"), what="h1 passed", timeout=60)
    assert cluster.state("h1") == "idle"

    # An administrator takes h3 over with a drain of their own.
    cluster.run("scontrol", "update", "NodeName=h3", "State=DRAIN", "Reason=admin: RMA 1234")
    cluster.set_nvidia_smi("h2", "a100x2")
    cluster.set_nvidia_smi("h3", "a100x2")
    cluster.wait_until(lambda: cluster.state("h2") == "idle", what="h2 resumed", timeout=90)
    assert "h2: resumed: passed: resumed (the drain was ours: computefence: gpu.missing)" in health_log(cluster, "h2")
    cluster.wait_until(
        lambda: "the drain by someone else stays: admin: RMA 1234" in health_log(cluster, "h3"),
        what="h3 passed under the administrator's drain",
        timeout=90,
    )
    assert cluster.state("h3") == "drained" and cluster.reason("h3") == "admin: RMA 1234"

    # Every scontrol call is in the action log, before it was made and with its answer: one
    # drain each (later runs find the drain already theirs), one resume, none for h1 or for
    # the administrator's drain.
    drain = "scontrol update NodeName={} State=DRAIN 'Reason=computefence: gpu.missing'"
    assert logged_calls(action_log, "h2") == [
        ("send", drain.format("h2")),
        ("answer", True),
        ("send", "scontrol update NodeName=h2 State=RESUME"),
        ("answer", True),
    ]
    assert logged_calls(action_log, "h3") == [("send", drain.format("h3")), ("answer", True)]
    assert logged_calls(action_log, "h1") == []


@pytest.fixture(scope="module")
def faulty_cluster(start_slurm):
    nodes = [
        NodeSpec("w1", nvidia_smi="hang", gres_gpus=1),  # nvidia-smi never answers: a wedged driver
        NodeSpec("w2", nvidia_smi="a100x1-remap-pending", gres_gpus=1),  # an uncorrectable ECC error
    ]
    # slurmd runs the program once as it starts, before it registers; no second run is needed.
    return start_slurm(nodes, health_check=HEALTH, health_interval=3600)


def test_health_check_drains_a_wedged_driver_and_an_ecc_error_within_slurmds_limit(faulty_cluster):
    """slurmd kills a HealthCheckProgram after 60 s: a drain at all proves the check, hung
    nvidia-smi included, finished inside that limit."""
    cluster = faulty_cluster
    for node, check in (("w1", "gpu.driver"), ("w2", "gpu.ecc")):
        cluster.wait_until(
            lambda n=node, c=check: cluster.reason(n) == f"computefence: {c}", what=f"{node} drained", timeout=90
        )
    assert "nvidia-smi did not answer within" in health_log(cluster, "w1")


def test_prolog_form_judges_without_draining(cluster, tmp_path):
    """--no-drain, as a Prolog runs it: the exit status is the verdict, Slurm does the draining.
    The wedged driver is seen only by this run (a mount namespace of its own inside h1's), so
    slurmd's own health checks of h1 go on seeing a good one."""
    write_fake_nvidia_smi(tmp_path / "bin", "driver-unreachable")
    pid = cluster.nodes["h1"].process.pid
    env = [f"{k}={v}" for k, v in cluster.env.items() if k in ("SLURM_CONF", "PYTHONPATH")]
    script = 'mount --bind "$1" /usr/local/sbin && shift && exec env -i "$@"'
    argv = ["nsenter", "-t", str(pid), "-m", "-u", "--", "unshare", "-m", "--propagation", "private"]
    argv += ["sh", "-c", script, "prolog", str(tmp_path / "bin"), *env, "SLURMD_NODENAME=h1", *HEALTH, "--no-drain"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert done.returncode == 1, done.stderr
    assert "gpu.driver" in done.stdout
    assert "drained" not in done.stderr
    assert cluster.state("h1") == "idle"


@pytest.fixture(scope="module")
def prolog_cluster(start_slurm, tmp_path_factory):
    log = tmp_path_factory.mktemp("prolog-actions") / "actions.jsonl"
    nodes = [
        NodeSpec("q1", nvidia_smi="h100x1", gres_gpus=1),
        NodeSpec("q2", nvidia_smi="h100x1", gres_gpus=2),  # a GPU of its GRES is gone
    ]
    return start_slurm(nodes, prolog=[*HEALTH, "--log", str(log)])


def job_state(cluster, job: str) -> str:
    fields = dict(f.split("=", 1) for f in cluster.run("scontrol", "show", "job", "-o", job).stdout.split() if "=" in f)
    return f"{fields['JobState']} {fields['Reason']}"


def test_prolog_drains_with_its_own_reason_and_slurm_holds_the_job(prolog_cluster):
    """The same --slurm-health as the Prolog: on a machine fault it drains the node with its
    own reason and exits 1. Slurm keeps that reason (a node already drained is not drained
    again as "Prolog error") and requeues the job held; a sound node runs its job."""
    cluster = prolog_cluster
    out = str(cluster.base / "log" / "job-%j.out")
    jobs = {
        node: cluster.run("sbatch", "--parsable", "-w", node, "-o", out, "--wrap", "true").stdout.strip()
        for node in ("q1", "q2")
    }
    cluster.wait_until(
        lambda: job_state(cluster, jobs["q2"]).startswith("PENDING launch_failed_requeued_held"),
        what="q2's job requeued held",
        timeout=90,
    )
    assert cluster.state("q2") == "drained" and cluster.reason("q2") == "computefence: gpu.missing"
    cluster.wait_until(lambda: job_state(cluster, jobs["q1"]) == "COMPLETED None", what="q1's job done", timeout=90)
    assert "drain" not in cluster.state("q1") and cluster.reason("q1") == "none"
