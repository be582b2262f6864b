"""`computefence fleet watch` on real sshd pods, each running a fake training job
(tests/fleet/fake_trainer.py: `python3 /usr/local/bin/torchrun ... train.py ...`, writing
a Trainer's log and checkpoints as it goes) beside a fake nvidia-smi whose utilisation and
compute processes come from a file. One pod per run.* finding, and a healthy run."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import time
from pathlib import Path

import pytest
from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, started_pods, write_inventory
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families
from sshfleet import PodSpec
from trainer_pods import ACTIVITY, FILES, TOKEN, start_trainer, wait_for
from webhook_server import Answer, WebhookServer

from computefence.models import DatasetFacts, Facts, HostReport, Report

pytestmark = pytest.mark.sshd

SCHEMA = Path(__file__).resolve().parents[2] / "schema" / "report.schema.json"

# Each pod: its spec, then the trainer's arguments (None: no job at all).
PODS = {
    "watch-healthy": (HEALTHY, ["--output_dir", "/workspace/out"]),
    "watch-no-job": (HEALTHY, None),
    "watch-gpu-idle": (HEALTHY, ["--output_dir", "/workspace/out", "--burn_cpu", "--utilization", "0"]),
    "watch-plateau": (HEALTHY, ["--output_dir", "/workspace/out", "--loss", "plateau"]),
    "watch-nan": (HEALTHY, ["--output_dir", "/workspace/out", "--loss", "nan"]),
    "watch-stalled": (HEALTHY, ["--output_dir", "/workspace/out", "--stall_after", "60"]),
    "watch-ephemeral": (HEALTHY, ["--output_dir", "/root/out"]),
    "watch-disk-full": (
        dict(HEALTHY, workspace_size="64M", workspace_free_bytes=6 << 20),
        ["--output_dir", "/workspace/out", "--checkpoint_bytes", str(4 << 20), "--save_steps", "50"],
    ),
    "watch-disk-eta": (
        dict(HEALTHY, workspace_size="64M", workspace_free_bytes=24 << 20),
        # A 1 MiB checkpoint every 10 s: the 24 MiB last the module's tests, not the 500 to come.
        ["--output_dir", "/workspace/out", "--checkpoint_bytes", str(1 << 20), "--max_steps", "5000"]
        + ["--steps_per_second", "5"],
    ),
}


@pytest.fixture(scope="module")
def fleet_of_runs(ssh_fleet, tmp_path_factory):
    specs = [PodSpec(name, files=dict(FILES), **spec) for name, (spec, _) in PODS.items()]
    with started_pods(ssh_fleet, specs) as pods:
        for name, (_, args) in PODS.items():
            if args is not None:
                start_trainer(pods[name], args)
        for name, (_, args) in PODS.items():
            if args is not None:
                out = args[args.index("--output_dir") + 1]
                wait_for(pods[name], f"{out}/checkpoint-50/trainer_state.json")
        # Enough logged losses for a plateau (10 at 5 steps a line), the stall set in.
        time.sleep(3)
        inventory = write_inventory(
            tmp_path_factory.mktemp("watch") / "pods.yaml",
            ssh_fleet,
            [host_entry(pod) for pod in pods.values()],
            trusted=list(pods.values()),
            checks={},
        )
        yield pods, inventory


def findings_by_check(host) -> dict[str, list]:
    found: dict[str, list] = {}
    for finding in host.findings:
        found.setdefault(finding.check, []).append(finding)
    return found


def severities(host) -> dict[str, set[str]]:
    return {check: {f.severity.value for f in fs} for check, fs in findings_by_check(host).items()}


def test_one_watch_pass_names_each_pods_problem(fleet_of_runs, run_cli):
    _, inventory = fleet_of_runs
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--format", "json")
    report = result.report
    assert report.kind == "watch"
    Draft202012Validator(json.loads(SCHEMA.read_text())).validate(json.loads(result.stdout))
    assert result.code == 1  # NaN, checkpoints on the overlay, a full disk block
    hosts = {h.name: h for h in report.hosts}
    assert all(h.status.value == "ok" for h in hosts.values()), {h.name: h.reason for h in hosts.values()}
    # Only run.* checks judge a watch, whatever the GPUs hold.
    assert {f.check.split(".")[0] for h in hosts.values() for f in h.findings} == {"run"}

    healthy = severities(hosts["watch-healthy"])
    assert all(s <= {"pass", "skip"} for s in healthy.values()), healthy
    assert healthy["run.no-job"] == {"pass"} and healthy["run.gpu-idle"] == {"pass"}
    assert healthy["run.loss-plateau"] == {"pass"} and healthy["run.checkpoint-ephemeral"] == {"pass"}

    assert severities(hosts["watch-no-job"])["run.no-job"] == {"warn"}
    idle = findings_by_check(hosts["watch-gpu-idle"])["run.gpu-idle"][0]
    # Which cause it names depends on the CPU share the pod's job got on this loaded machine
    # (tests/evaluate/test_watch_checks.py has both); the share is measured and shown.
    assert idle.severity.value == "warn" and "CPU cores" in idle.message
    # The pods have no py-spy: the fix says how to get it and offers no command that is not there.
    assert idle.fix is not None and not any("py-spy" in c for c in idle.fix.commands)
    assert "`pip install py-spy` on the pod, then `py-spy dump --pid " in idle.fix.advice
    plateau = findings_by_check(hosts["watch-plateau"])["run.loss-plateau"][0]
    assert plateau.severity.value == "warn" and "0.693" in plateau.message
    assert severities(hosts["watch-nan"])["run.loss-nan"] == {"block"}
    stalled = findings_by_check(hosts["watch-stalled"])["run.stalled"][0]
    # Files aged 20 min when the job stalled, plus however long the tests took to get here.
    aged = re.search(r"moved for (\d+) min", stalled.message)
    assert stalled.severity.value == "warn" and aged and 20 <= int(aged.group(1)) < 30
    ephemeral = findings_by_check(hosts["watch-ephemeral"])["run.checkpoint-ephemeral"][0]
    assert ephemeral.severity.value == "block" and "/root/out" in ephemeral.message
    assert severities(hosts["watch-disk-full"])["run.disk-eta"] == {"block"}
    assert severities(hosts["watch-disk-eta"])["run.disk-eta"] == {"warn"}
    # Each problem pod has exactly its own problem.
    for name, check in (
        ("watch-no-job", "run.no-job"),
        ("watch-gpu-idle", "run.gpu-idle"),
        ("watch-plateau", "run.loss-plateau"),
        ("watch-nan", "run.loss-nan"),
        ("watch-stalled", "run.stalled"),
        ("watch-ephemeral", "run.checkpoint-ephemeral"),
        ("watch-disk-full", "run.disk-eta"),
        ("watch-disk-eta", "run.disk-eta"),
    ):
        problems = {f.check for f in hosts[name].findings if f.severity.value in ("warn", "block")}
        assert problems == {check}, (name, problems)


def test_the_hub_token_on_the_command_line_never_leaves_the_pod(fleet_of_runs, run_cli):
    _, inventory = fleet_of_runs
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--format", "json", "--only", "run.no-job")
    assert TOKEN not in result.stdout and TOKEN not in result.stderr
    job = result.host("watch-healthy").facts.watch.processes.processes[0]
    assert job.matched_by == "torchrun" and job.argv[job.argv.index("--hub_token") + 1] == "***"


def test_the_terminal_table_shows_step_loss_gpu_and_checkpoint(fleet_of_runs, run_cli):
    _, inventory = fleet_of_runs
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory))
    row = next(line for line in result.stdout.splitlines() if line.startswith("watch-healthy"))
    assert "95%" in row and "checkpoint-" in row and "healthy" in row
    assert "FAILING" in result.stdout


def test_prometheus_gauges_per_pod(fleet_of_runs, run_cli):
    _, inventory = fleet_of_runs
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--format", "prometheus")
    samples = {
        (s.name, s.labels.get("host"), s.labels.get("gpu")): s.value
        for family in text_string_to_metric_families(result.stdout)
        for s in family.samples
    }
    assert samples[("computefence_watch_step", "watch-healthy", None)] >= 50
    assert 0 < samples[("computefence_watch_loss", "watch-healthy", None)] < 2.5
    assert samples[("computefence_watch_gpu_utilization_percent", "watch-healthy", "0")] == 95.0
    assert samples[("computefence_watch_gpu_utilization_percent", "watch-gpu-idle", "0")] == 0.0
    nan = samples[("computefence_watch_loss", "watch-nan", None)]
    assert nan != nan


def test_cron_runs_keep_history_and_alert_when_the_job_dies(ssh_fleet, start_pods, run_cli, tmp_path, monkeypatch):
    (pod,) = start_pods(PodSpec("watch-later", files=dict(FILES), **HEALTHY))
    start_trainer(pod, ["--output_dir", "/workspace/out"])
    wait_for(pod, "/workspace/out/checkpoint-50/trainer_state.json")
    inventory = write_inventory(tmp_path / "later.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks={})
    history = tmp_path / "watch-history"
    cron = ("fleet", "watch", "--once", "-i", str(inventory), "--history", str(history), "--format", "json")
    with WebhookServer(Answer(204)) as hook:
        monkeypatch.setenv("COMPUTEFENCE_NOTIFY", hook.url)
        training = run_cli(*cron)
        assert training.code == 0 and severities(training.host("watch-later"))["run.no-job"] == {"pass"}
        assert hook.received == []  # the first run has nothing to compare with
        for pid, command in pod.pid_namespace_processes():
            if "torchrun" in command or "train.py" in command:
                os.kill(pid, signal.SIGKILL)
        # The driver's view follows: its process gone, the GPU idle.
        idle = json.dumps({"utilization": [0], "apps": []})
        pod.in_namespace(["sh", "-c", 'printf %s "$1" > "$2"', "sh", idle, f"{pod.merged}{ACTIVITY}"])
        died = run_cli(*cron)
    assert died.code == 0 and len(list(history.glob("*.json"))) == 2
    changes = died.report.changes
    assert changes is not None and [c.finding.check for c in changes.new] == ["run.no-job"]
    # A new warning is news for a watch: the run has stopped earning its hours.
    assert len(hook.received) == 1 and b"watch-later" in hook.received[0].body
    assert hook.url.encode() not in died.stdout.encode() + died.stderr.encode()


def test_a_history_of_fleet_check_runs_is_refused(fleet_of_runs, run_cli, tmp_path):
    _, inventory = fleet_of_runs
    history = tmp_path / "checks"
    history.mkdir()
    check = Report(tool_version="0", kind="fleet", generated_at="2026-12-01T00:00:00+00:00")
    (history / "20261201T000000Z.json").write_text(check.model_dump_json())
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--history", str(history))
    assert result.code == 2 and "holds fleet runs" in result.stderr


def test_live_table_refreshes_until_ctrl_c(fleet_of_runs, home):
    _, inventory = fleet_of_runs
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal, as a user runs it
        os.environ.update(cli_subprocess_env(home), COLUMNS="120", LINES="60")
        os.execvp(CLI[0], [*CLI, "fleet", "watch", "-i", str(inventory), "--interval", "5"])
    seen = b""
    deadline = time.monotonic() + 120
    try:
        # The whole first screen: its footer line, the table, the verdict last.
        while not (b"next pass in 5 s" in seen and b"FAILING" in seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                seen += os.read(fd, 65536)
        assert b"next pass in 5 s" in seen, seen[-2000:]
        assert b"watch-healthy" in seen and b"FAILING" in seen
        os.kill(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130


def test_the_label_count_of_a_dataset_check_sets_k(fleet_of_runs, run_cli, tmp_path):
    _, inventory = fleet_of_runs
    # What `fleet check --dataset` saved for the pod: three labels, so ln 2 is no plateau.
    dataset = DatasetFacts(path="/workspace/train.jsonl", exists=True, distinct_labels=3)
    host = HostReport(name="watch-plateau", status="ok", facts=Facts(dataset=dataset))
    checked = tmp_path / "check.json"
    checked.write_text(
        Report(tool_version="0", generated_at="2026-12-01T00:00:00+00:00", hosts=[host]).model_dump_json()
    )
    args = ("fleet", "watch", "--once", "-i", str(inventory), "--format", "json", "--only", "run.loss-plateau")
    plain = run_cli(*args).host("watch-plateau").findings[0]
    counted = run_cli(*args, "--labels-from", str(checked)).host("watch-plateau").findings[0]
    assert plain.severity.value == "warn" and counted.severity.value == "pass"
    assert "ln(3)" in counted.message
