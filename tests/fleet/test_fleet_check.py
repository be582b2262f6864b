"""`computefence fleet check` end to end against real sshd pods."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time

import pytest
from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, json_hosts, write_inventory
from sshfleet import PodSpec

from computefence.models import Report

pytestmark = pytest.mark.sshd


def test_healthy_pods_report_ok_with_facts_in_valid_json(ssh_fleet, healthy_pods, run_cli, tmp_path):
    a, b = healthy_pods
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(a, tags=["sweep-7"]), host_entry(b)], trusted=[a, b]
    )
    out = tmp_path / "report.json"

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--output", str(out))

    assert result.stdout == ""
    document = json.loads(out.read_text())
    report = Report.model_validate(document)
    assert document["schema_version"] == report.schema_version and document["kind"] == "fleet"
    assert report.summary.hosts == 2 and report.summary.ok == 2
    for raw in document["hosts"]:
        assert {"name", "status", "reason", "facts", "findings"} <= raw.keys()
        for finding in raw["findings"]:
            assert {"check", "severity", "message", "fix"} <= finding.keys()
    host = next(h for h in report.hosts if h.name == a.name)
    assert host.status.value == "ok" and host.tags == ["sweep-7"]
    facts = host.facts
    assert facts.identity.hostname == a.name
    assert [g.name for g in facts.gpu.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert facts.torch.importable and facts.torch.cuda_build == "12.4"
    hf_home = facts.environment.variables["HF_HOME"]
    assert any(v.source == "process" and v.value == "/workspace/hf" for v in hf_home)
    workspace = [p for p in facts.storage.paths if p.role == "output_dir"]
    assert workspace and workspace[0].fs_type == "ext4"
    other = next(h for h in report.hosts if h.name == b.name)
    assert other.facts.torch.cuda_build == "12.1"
    # The two pods run different torch CUDA builds: the drift matrix says so.
    assert report.drift
    assert result.code == (1 if report.summary.blockers else 0)


def test_other_formats_render_the_same_run(ssh_fleet, healthy_pods, run_cli, tmp_path):
    a = healthy_pods[0]
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(a)], trusted=[a])
    for fmt, marker in (("junit", "<testsuite"), ("markdown", a.name), ("prometheus", "# TYPE"), ("rich", a.name)):
        result = run_cli("fleet", "check", "-i", str(inventory), "--format", fmt)
        assert marker in result.stdout, fmt
        assert result.code in (0, 1)


def test_clean_pod_exits_0_and_bad_inventory_exits_2(ssh_fleet, healthy_pods, run_cli, tmp_path):
    a = healthy_pods[0]
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [host_entry(a)],
        trusted=[a],
        checks={"output_dir": "/workspace/checkpoints", "expect_gpu": True},
    )
    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")
    report = result.report
    assert report.summary.blockers == 0, [f for h in report.hosts for f in h.blockers]
    assert result.code == 0

    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts:\n  - {name: x, host: 127.0.0.1, port: 99999}\n")
    bad = run_cli("fleet", "check", "-i", str(broken))
    assert bad.code == 2
    assert bad.stderr.startswith("computefence: error:") and "broken.yaml" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_hanging_nvidia_smi_still_yields_a_report_within_the_deadline(
    ssh_fleet, healthy_pods, start_pods, run_cli, tmp_path
):
    (hung,) = start_pods(PodSpec("hung-driver", nvidia_smi="hang", torch="cu124"))
    good = healthy_pods[0]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(hung), host_entry(good)], trusted=[hung, good]
    )

    started = time.monotonic()
    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--timeout", "8")
    elapsed = time.monotonic() - started

    assert elapsed < 10  # the 8 s deadline, plus evaluating and rendering
    host = result.host(hung.name)
    assert host.status.value == "ok", host.reason
    assert host.facts.collectors["gpu"].timed_out or host.facts.gpu.timed_out
    assert host.blockers, "a GPU that cannot be queried blocks the pod"
    assert result.host(good.name).status.value == "ok"


def test_connection_killed_mid_probe_is_connection_lost(ssh_fleet, healthy_pods, start_pods, run_cli, tmp_path):
    (doomed,) = start_pods(PodSpec("doomed", nvidia_smi="hang", torch="cu124"))
    good = healthy_pods[0]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(doomed), host_entry(good)], trusted=[doomed, good]
    )
    killed = []

    def kill_session_while_probing():
        doomed.wait_for_process("nvidia-smi", timeout=10)
        for pid in doomed.session_processes():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_session_while_probing)
    killer.start()
    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--timeout", "20")
    killer.join()

    assert killed
    host = result.host(doomed.name)
    assert host.status.value == "connection_lost", host.reason
    assert host.fix
    assert result.host(good.name).status.value == "ok"


def test_probe_leaves_the_pod_filesystem_unchanged(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(PodSpec("untouched", **HEALTHY, workspace_free_bytes=3 << 30))
    dataset = "/workspace/data/train.jsonl"
    pod.in_namespace(
        [
            "sh",
            "-c",
            f"mkdir -p {pod.merged}/workspace/data && "
            f'printf \'%s\\n\' \'{{"text": "a", "label": "x"}}\' \'{{"text": "a", "label": "y"}}\' '
            f"> {pod.merged}{dataset}",
        ]
    )
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [host_entry(pod)],
        trusted=[pod],
        checks={
            "output_dir": "/workspace/checkpoints",
            "dataset": dataset,
            "input_column": "text",
            "label_column": "label",
            "extra_paths": ["/workspace/new-dir"],
        },
    )
    before = pod.filesystem_snapshot()

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    host = result.host(pod.name)
    assert host.status.value == "ok", host.reason
    assert host.facts.dataset is not None and host.facts.dataset.rows == 2
    free = next(p for p in host.facts.storage.paths if p.role == "output_dir").free_bytes
    assert free is not None and free < 4 << 30
    assert pod.filesystem_snapshot() == before


def test_dropped_connections_past_maxstartups_are_retried(ssh_fleet, start_pods, run_cli, tmp_path):
    # OpenSSH's default MaxStartups (10:30:100) drops some of 30 simultaneous handshakes.
    (pod,) = start_pods(PodSpec("default-sshd", max_startups=None))
    hosts = [host_entry(pod, name=f"replica-{i:02d}") for i in range(30)]
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, hosts, trusted=[pod], checks={})

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    statuses = {h.name: h.status.value for h in result.report.hosts}
    assert set(statuses.values()) == {"ok"}, {n: s for n, s in statuses.items() if s != "ok"}
    assert "past MaxStartups" in pod.log.read_text(), "sshd dropped nothing: the retry went untested"


# Records when it held the pod (in the pod's own /tmp), then runs the real interpreter.
SLOW_PYTHON = (
    "#!/bin/sh\nstart=$(date +%s.%N)\nsleep 2\n"
    'echo "$start $(date +%s.%N)" > /tmp/computefence-test-interval\nexec /usr/bin/python3 "$@"\n'
)


def _most_at_once(pods) -> int:
    intervals = []
    for pod in pods:
        start, end = pod.in_namespace(["cat", f"{pod.merged}/tmp/computefence-test-interval"]).split()
        intervals.append((float(start), float(end)))
    return max(sum(1 for s, e in intervals if s < end and start < e) for start, end in intervals)


def test_concurrency_bounds_the_pods_in_flight(ssh_fleet, start_pods, run_cli, tmp_path):
    pods = start_pods(*(PodSpec(f"slow-{i}", files={"/usr/local/bin/python3": SLOW_PYTHON}) for i in range(4)))
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in pods], trusted=pods, checks={}
    )

    def most_at_once(*extra) -> int:
        result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", *extra)
        assert {h.status.value for h in result.report.hosts} == {"ok"}
        return _most_at_once(pods)

    # All four at once, load permitting; never more than two with --concurrency 2.
    assert most_at_once() >= 3
    assert most_at_once("--concurrency", "2") <= 2


def test_sigint_reports_finished_pods_and_cancels_the_rest(ssh_fleet, healthy_pods, start_pods, home, tmp_path):
    (stuck,) = start_pods(PodSpec("stuck", files={"/usr/local/bin/python3": "#!/bin/sh\nexec sleep 600\n"}))
    good = healthy_pods[0]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(good), host_entry(stuck)], trusted=[good, stuck]
    )
    proc = subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_subprocess_env(home),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    try:
        # Plain progress lines on a non-terminal stderr; wait until the healthy pod is in.
        deadline = time.monotonic() + 30
        seen = []
        while not any(f"{good.name}: checked" in line for line in seen):
            assert time.monotonic() < deadline, seen
            seen.append(lines.get(timeout=30))
        stuck.wait_for_process("sleep 600")
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 130
    hosts = json_hosts(stdout)
    assert hosts[good.name]["status"] == "ok"
    assert hosts["stuck"]["status"] == "cancelled"
    # The connection was closed, so the pod's sshd session for it is gone.
    deadline = time.monotonic() + 5
    while stuck.session_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stuck.session_processes() == []


def test_big_dataset_scan_is_cut_to_fit_the_deadline(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(PodSpec("big-data", workspace_size="20G"))
    rows = "\n".join(f'{{"text": "sample {i}", "label": "{i % 7}"}}' for i in range(3_000_000)) + "\n"
    subprocess.run(
        ["nsenter", "-t", str(pod.sshd_pid), "-m", "--", "sh", "-c", f"cat > {pod.merged}/workspace/train.jsonl"],
        input=rows.encode(),
        check=True,
    )
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [host_entry(pod)],
        trusted=[pod],
        checks={"dataset": "/workspace/train.jsonl", "input_column": "text", "label_column": "label"},
    )

    started = time.monotonic()
    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--timeout", "5")

    assert time.monotonic() - started < 8
    host = result.host(pod.name)
    assert host.status.value == "ok", host.reason
    dataset = host.facts.dataset
    assert dataset.partial and "time budget" in dataset.partial_reason
    assert 0 < dataset.rows < 3_000_000, dataset.rows
