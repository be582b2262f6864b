"""`fleet check --history DIR` and `report diff`, end to end: between two runs one pod breaks
and another is fixed, and the report says exactly that."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading

import pytest
from fleet_helpers import (
    CLI,
    SPOTLESS,
    break_torch,
    cli_subprocess_env,
    fix_torch,
    host_entry,
    json_hosts,
    started_pods,
    write_inventory,
)
from sshfleet import PodSpec

from computefence.models import Report

pytestmark = pytest.mark.sshd

# Sleeps before running the real python: the run holds the history lock long enough for the
# other two CLI processes to start (a few seconds each on a busy machine) and find it taken.
SLOW_PYTHON = '#!/bin/sh\nsleep 10\nexec /usr/bin/python3 "$@"\n'
STUCK_PYTHON = "#!/bin/sh\nexec sleep 600\n"


@pytest.fixture(scope="module")
def pool(ssh_fleet):
    """steady stays healthy; breaks loses torch after the first run; heals gets it back."""
    specs = [PodSpec(name, **SPOTLESS) for name in ("hist-steady", "hist-breaks", "hist-heals")]
    with started_pods(ssh_fleet, specs) as pods:
        yield pods


def _entries(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".json"))


def test_second_run_leads_with_the_pod_that_broke_and_the_one_that_was_fixed(ssh_fleet, pool, run_cli, tmp_path):
    inventory = write_inventory(
        tmp_path / "pool.yaml", ssh_fleet, [host_entry(p) for p in pool.values()], trusted=list(pool.values())
    )
    history = tmp_path / "history"
    break_torch(pool["hist-heals"])
    first = run_cli("fleet", "check", "-i", str(inventory), "--history", str(history), "--format", "json")
    assert first.code == 1 and first.report.changes is None  # nothing to compare with yet
    (first_entry,) = _entries(history)

    break_torch(pool["hist-breaks"])
    fix_torch(pool["hist-heals"])
    try:
        second = run_cli("fleet", "check", "-i", str(inventory), "--history", str(history), "--format", "json")
        shown = run_cli("report", str(history / _entries(history)[-1]), "--format", "rich")
    finally:
        fix_torch(pool["hist-breaks"])

    changes = second.report.changes
    assert changes.since == first.report.generated_at
    blockers = [(c.host, c.finding.check, c.severity_before) for c in changes.new if c.severity_after.value == "block"]
    assert blockers == [("hist-breaks", "python.torch-missing", None)]
    assert changes.new[0].finding.fix  # the alert carries the fix
    cleared = [
        (c.host, c.finding.check, c.severity_after) for c in changes.cleared if c.severity_before.value == "block"
    ]
    assert cleared == [("hist-heals", "python.torch-missing", None)]
    # Besides: the odd pod out of the fleet's versions (env.outlier) moved from one pod to the other.
    assert {(c.host, c.finding.check) for c in changes.new if c.severity_after.value == "warn"} <= {
        ("hist-breaks", "env.outlier")
    }
    assert {(c.host, c.finding.check) for c in changes.cleared if c.severity_before.value == "warn"} <= {
        ("hist-heals", "env.outlier")
    }
    assert changes.appeared == changes.vanished == changes.status == []
    # torch went away on one pod and came back on the other: versions say so, on those pods only.
    assert {v.host for v in changes.versions} == {"hist-breaks", "hist-heals"}
    assert {(v.host, v.component, v.after) for v in changes.versions if v.component == "torch"} == {
        ("hist-breaks", "torch", "(not installed)"),
        (
            "hist-heals",
            "torch",
            next(v.before for v in changes.versions if v.host == "hist-breaks" and v.component == "torch"),
        ),
    }
    assert len(_entries(history)) == 2 and _entries(history)[0] == first_entry

    # The saved run re-renders with the change section leading.
    lines = shown.stdout.splitlines()
    assert lines[1].startswith(f"Since the last run ({first.report.generated_at})")
    assert lines[2].startswith("1 new blocker, ") and lines[2].endswith(" 4 version changes")
    assert lines[3].split()[:4] == ["new", "blocker", "hist-breaks", "python.torch-missing:"]
    assert any(line.split()[:3] == ["cleared", "blocker", "hist-heals"] for line in lines[4:12])

    # report diff over the two history entries prints the same section and fails on the new blocker.
    old, new = (history / name for name in _entries(history))
    diff = run_cli("report", "diff", str(old), str(new), "--format", "json")
    assert diff.code == 1
    assert json.loads(diff.stdout) == json.loads(changes.model_dump_json())
    back = run_cli("report", "diff", str(new), str(old))
    assert back.code == 1  # backwards, the fixed pod's blocker is the new one
    assert [line.split()[:3] for line in back.stdout.splitlines() if line.startswith("new blocker")] == [
        ["new", "blocker", "hist-heals"]
    ]


def test_keep_prunes_to_the_newest_runs(ssh_fleet, pool, run_cli, tmp_path):
    pod = pool["hist-steady"]
    inventory = write_inventory(tmp_path / "pool.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    history = tmp_path / "history"
    names = []
    for _ in range(3):
        assert run_cli("fleet", "check", "-i", str(inventory), "--history", str(history), "--keep", "2").code == 0
        names.append(_entries(history)[-1])
    assert _entries(history) == names[1:]
    assert len(set(names)) == 3  # same-second runs still get their own entry


def _start(home, inventory, history, *extra):
    return subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--history", str(history), "--format", "json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_subprocess_env(home),
    )


def test_two_concurrent_runs_take_turns_on_one_history(ssh_fleet, start_pods, home, tmp_path):
    (slow,) = start_pods(PodSpec("hist-slow", **SPOTLESS, files={"/usr/local/bin/python3": SLOW_PYTHON}))
    inventory = write_inventory(tmp_path / "pool.yaml", ssh_fleet, [host_entry(slow)], trusted=[slow])
    history = tmp_path / "history"
    first = _start(home, inventory, history)
    slow.wait_for_process("sleep 10")
    second = _start(home, inventory, history, "--history-wait", "60")
    impatient = _start(home, inventory, history, "--history-wait", "0")
    outputs = [proc.communicate(timeout=120) for proc in (first, second, impatient)]

    assert first.returncode == 0 and second.returncode == 0
    assert impatient.returncode == 2 and outputs[2][0] == ""
    assert outputs[2][1].count("\n") == 1 and "holds" in outputs[2][1] and "--history-wait" in outputs[2][1]
    assert str(history / ".lock") in outputs[2][1]
    reports = [Report.model_validate_json(out) for out, _ in outputs[:2]]
    # The second waited for the first, then compared with its result.
    assert reports[1].changes is not None and reports[1].changes.since == reports[0].generated_at
    assert len(_entries(history)) == 2
    for name in _entries(history):
        Report.model_validate_json((history / name).read_text())


def test_kill_9_mid_run_leaves_the_history_as_it_was(ssh_fleet, start_pods, home, tmp_path):
    good, stuck = start_pods(
        PodSpec("hist-good", **SPOTLESS),
        PodSpec("hist-stuck", **SPOTLESS, files={"/usr/local/bin/python3": STUCK_PYTHON}),
    )
    history = tmp_path / "history"
    before_inventory = write_inventory(tmp_path / "good.yaml", ssh_fleet, [host_entry(good)], trusted=[good])
    assert (
        subprocess.run(
            [*CLI, "fleet", "check", "-i", str(before_inventory), "--history", str(history)],
            env=cli_subprocess_env(home),
            capture_output=True,
            timeout=120,
        ).returncode
        == 0
    )
    snapshot = {name: (history / name).read_bytes() for name in _entries(history)}

    inventory = write_inventory(
        tmp_path / "pool.yaml", ssh_fleet, [host_entry(good), host_entry(stuck)], trusted=[good, stuck]
    )
    proc = _start(home, inventory, history, "--healthy-out", str(tmp_path / "ready.txt"))
    stuck.wait_for_process("sleep 600")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)

    assert {name: (history / name).read_bytes() for name in _entries(history)} == snapshot
    assert not (tmp_path / "ready.txt").exists()
    # The lock died with its holder: the next run does not wait.
    again = subprocess.run(
        [
            *CLI,
            "fleet",
            "check",
            "-i",
            str(before_inventory),
            "--history",
            str(history),
            "--history-wait",
            "0",
            "--format",
            "json",
        ],
        env=cli_subprocess_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert len(_entries(history)) == 2


def test_interrupted_run_writes_no_history_entry_and_no_gate_file(ssh_fleet, start_pods, home, tmp_path):
    good, stuck = start_pods(
        PodSpec("hist-fine", **SPOTLESS),
        PodSpec("hist-hung", **SPOTLESS, files={"/usr/local/bin/python3": STUCK_PYTHON}),
    )
    inventory = write_inventory(
        tmp_path / "pool.yaml", ssh_fleet, [host_entry(good), host_entry(stuck)], trusted=[good, stuck]
    )
    history = tmp_path / "history"
    ready = tmp_path / "ready.txt"
    ready.write_text("yesterday\n")
    proc = _start(home, inventory, history, "--healthy-out", str(ready))
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    seen: list[str] = []
    while not any("hist-fine: checked" in line for line in seen):
        seen.append(lines.get(timeout=30))
    stuck.wait_for_process("sleep 600")
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=30)

    assert proc.returncode == 130
    assert json_hosts(stdout)["hist-fine"]["status"] == "ok"  # a finished pod, yet nothing written
    assert _entries(history) == []
    assert ready.read_text() == "yesterday\n"
