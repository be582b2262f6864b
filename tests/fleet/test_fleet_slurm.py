"""`fleet check --slurm`, `fleet drain` and `fleet resume` end to end against a real Slurm
(tests/slurmcluster.py): 22.05's slurmctld and one slurmd per node on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from slurmcluster import NodeSpec
from terminal_session import TerminalSession

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
    cluster.run(
        "sbatch", "--nodelist=n4", "--exclusive", "--output=/dev/null", "--job-name=holder", "--wrap", "sleep 600"
    )
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


def test_inventory_list_shows_each_node_as_its_srun_step_without_ssh_columns(cli, slurm_env, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("inventory", "list", "--slurm", "--nodelist", "n[1-3]")
    assert code == 0, err
    lines = out.splitlines()
    assert "reached as" in lines[0] and "identity" not in lines[0] and "key" not in lines[0]
    assert any(line.startswith("n1 ") and "srun --nodelist=n1" in line for line in lines), out
    assert not any(":0" in line or "ssh default" in line for line in lines), out
    assert "n3: not checkable: Slurm has it idle+drain (admin: bad fan)." in out


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


def test_without_sinfo_json_the_format_fields_are_read(cli, slurm_env, tmp_path, monkeypatch):
    """A Slurm whose sinfo has no --json (before 21.08, or built without JSON support)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    sinfo.write_text(
        "#!/bin/sh\n"
        'for a; do [ "$a" = --json ] && { echo "sinfo: unrecognized option \'--json\'" >&2; exit 1; }; done\n'
        'exec /usr/bin/sinfo "$@"\n'
    )
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{slurm_env.env['PATH']}")
    _, out, err = cli("fleet", "check", "--slurm", "--no-policy", "-w", "n[2-3]", "--only", "gpu.*", "-f", "json")
    report = json.loads(out)
    assert report["sources"][0]["resolver"] == "sinfo -N -o", err
    hosts = by_name(report)
    assert hosts["n2"]["status"] == "ok" and hosts["n2"]["provider"]["gpu_count"] == 2
    assert hosts["n3"]["reason"] == "Slurm has it drained (admin: bad fan)"
    assert sorted(hosts["n2"]["tags"]) == ["debug", "gpu"]


@pytest.fixture(scope="module")
def saved_report(cluster, tmp_path_factory):
    """One check of the whole cluster, saved as drain and resume read it."""
    path = tmp_path_factory.mktemp("reports") / "report.json"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in cluster.env.items():
            patch.setenv(name, value)
        from computefence.cli import main

        main(
            [
                "fleet",
                "check",
                "--slurm",
                "--no-policy",
                "--timeout",
                "20",
                "--immediate",
                "2",
                "-f",
                "json",
                "-o",
                str(path),
                "-q",
            ]
        )
    return path


def log_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_drain_and_resume(cli, slurm_env, saved_report, tmp_path):
    cluster = slurm_env
    # A copy of the report in which n3, drained by an administrator since, was found at fault too.
    report = json.loads(saved_report.read_text())
    faulted = dict(by_name(report)["n7"], name="n3")
    report["hosts"] = [h for h in report["hosts"] if h["name"] != "n3"] + [faulted]
    with_n3 = tmp_path / "with-n3.json"
    with_n3.write_text(json.dumps(report))
    log = tmp_path / "actions.jsonl"

    # The dry run: the nodes, their faults and the exact commands; nothing changes.
    code, out, err = cli("fleet", "drain", "--from", str(with_n3), "--dry-run")
    assert code == 0, err
    assert re.search(r"would drain +n7 · gpu.missing", out) and re.search(r"would drain +n8 · gpu.driver", out)
    assert "$ scontrol update NodeName=n7 State=DRAIN 'Reason=computefence: gpu.missing'" in out
    assert re.search(r"left alone +n3 · gpu.missing: Slurm has it idle\+drain \(admin: bad fan\)", out)
    assert "n1" not in out and "n2" not in out  # healthy machines; their job-side blockers are not faults
    assert cluster.state("n7") == "idle"
    # Without a terminal nobody can answer the question: nothing runs without --yes.
    code, out, err = cli("fleet", "drain", "--from", str(with_n3))
    assert code == 2 and "fleet drain without a terminal needs --yes to act or --dry-run" in err
    assert cluster.state("n7") == "idle" and not log.exists()

    # On a terminal: the same plan in full, then the question; nothing changes until "y".
    session = TerminalSession("fleet", "drain", "--from", str(with_n3), "--log", str(log), env=dict(os.environ))
    plan = session.read_until("[y/N]")
    assert "$ scontrol update NodeName=n8 State=DRAIN 'Reason=computefence: gpu.driver'" in plan
    assert "drain 2 nodes (n7, n8), as listed above? [y/N]" in plan
    assert cluster.state("n7") == "idle" and not log.exists()
    session.type("y")
    assert session.finish() == 0, session.seen
    shown = re.sub(r"\x1b\[[0-9;]*m", "", session.seen)  # the result is coloured on a terminal
    assert re.search(r"drained +n7 · gpu.missing", shown)
    assert cluster.state("n7") == "drained" and cluster.reason("n7") == "computefence: gpu.missing"
    assert cluster.reason("n8") == "computefence: gpu.driver"
    assert cluster.reason("n3") == "admin: bad fan"  # someone else's drain keeps its reason
    sends = [e for e in log_lines(log) if e["event"] == "send"]
    assert [e["node"] for e in sends] == ["n7", "n8"] and all(e["command"] == "fleet drain" for e in sends)

    # Idempotent: a second run sends nothing.
    code, out, err = cli("fleet", "drain", "--from", str(with_n3), "--yes", "--log", str(log), "-f", "json")
    assert code == 0 and {n["outcome"] for n in json.loads(out)["nodes"]} == {"already_drained", "left_alone"}
    assert len([e for e in log_lines(log) if e["event"] == "send"]) == 2
    # Nothing to do: said so, no question, exit 0 (terminal or not).
    code, out, err = cli("fleet", "drain", "--from", str(with_n3))
    assert code == 0 and "computefence: nothing to drain" in err and "[y/N]" not in out + err

    # n7's missing GPU is back; n8's driver is still wedged.
    cluster.set_nvidia_smi("n7", "a100x2")
    code, out, err = cli("fleet", "resume", "--from", str(saved_report), "--dry-run")
    assert code == 0, err
    assert re.search(r"would resume +n7 · computefence: gpu.missing", out)
    assert "$ scontrol create reservation ReservationName=computefence-resume-n7 Nodes=n7 Users=root" in out
    assert re.search(r"left alone +n3: drained by someone else: admin: bad fan", out)
    assert cluster.state("n7") == "drained"
    # Answered no on a terminal: every command was shown, none ran.
    sends = len(log_lines(log))
    session = TerminalSession("fleet", "resume", "--from", str(saved_report), "--log", str(log), env=dict(os.environ))
    plan = session.read_until("[y/N]")
    assert "$ scontrol update NodeName=n7 State=RESUME" in plan and "$ scontrol delete ReservationName=" in plan
    assert "prove and resume 2 nodes (n7, n8), as listed above? [y/N]" in plan
    session.type("n")
    assert session.finish() == 1 and "computefence: nothing resumed" in session.seen
    assert cluster.state("n7") == "drained" and len(log_lines(log)) == sends

    # A job waiting for n7 must not start there before the node has passed its check.
    waiting = cluster.run(
        "sbatch", "--parsable", "--nodelist=n7", "--job-name=user-job", "--output=/dev/null", "--wrap", "true"
    ).stdout.strip()
    code, out, err = cli(
        "fleet", "resume", "--from", str(saved_report), "--yes", "--log", str(log), "--timeout", "20", "-f", "json"
    )
    assert code == 1, err  # n8 failed its proof
    outcomes = {n["name"]: n["outcome"] for n in json.loads(out)["nodes"]}
    assert outcomes["n7"] == "resumed" and outcomes["n8"] == "kept_drained" and outcomes["n3"] == "left_alone"
    assert outcomes["n1"] == "not_drained"
    assert "drain" not in cluster.state("n7")
    assert cluster.state("n8") == "drained" and cluster.reason("n8") == "computefence: gpu.driver"
    assert cluster.reason("n3") == "admin: bad fan"
    # No proving reservation outlives the run.
    assert "computefence-resume" not in cluster.run("scontrol", "show", "reservation").stdout
    calls = [e["call"] for e in log_lines(log) if e["event"] == "send" and e["command"] == "fleet resume"]
    assert calls[:3] == [
        "scontrol create reservation ReservationName=computefence-resume-n7 Nodes=n7 Users=root StartTime=now "
        "Duration=30 Flags=MAINT,IGNORE_JOBS",
        "scontrol update NodeName=n7 State=RESUME",
        "scontrol delete ReservationName=computefence-resume-n7",
    ]
    assert "scontrol update NodeName=n8 State=DRAIN 'Reason=computefence: gpu.driver'" in calls
    deleted = next(e["at"] for e in log_lines(log) if e["event"] == "send" and e["call"].startswith("scontrol delete"))
    cluster.wait_until(
        lambda: "StartTime=Unknown" not in cluster.run("scontrol", "show", "job", waiting).stdout,
        what="user-job started",
    )
    started = re.search(r"StartTime=(\S+)", cluster.run("scontrol", "show", "job", waiting).stdout).group(1)
    # Slurm's times are local and whole seconds; the log's are UTC (this machine runs in UTC).
    assert started >= deleted[:19], (started, deleted)

    # Idempotent: n7 is in service, n8 drained again and proven faulty again.
    code, out, err = cli("fleet", "resume", "--from", str(saved_report), "--dry-run", "-f", "json")
    assert {n["name"]: n["outcome"] for n in json.loads(out)["nodes"]}["n7"] == "not_drained"


def test_a_stale_report_is_refused(cli, slurm_env, saved_report, tmp_path):
    report = json.loads(saved_report.read_text())
    report["generated_at"] = "2020-01-01T00:00:00+00:00"
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report))
    code, _, err = cli("fleet", "drain", "--from", str(old), "--yes")
    assert code == 2 and "older than --max-age" in err


def test_ctrl_c_cancels_the_steps_and_writes_nothing(slurm_env, tmp_path):
    cluster = slurm_env
    out = tmp_path / "report.json"
    argv = [sys.executable, "-m", "computefence", "fleet", "check", "--slurm", "-w", "n6", "--timeout", "120"]
    run = subprocess.Popen([*argv, "-o", str(out)], env=cluster.env, stderr=subprocess.PIPE, text=True)
    cluster.wait_until(lambda: cluster.run("squeue", "-h", "--nodelist=n6").stdout.strip(), what="n6's step running")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 130, err
    assert "interrupted; 1 of 1 pods were not checked" in err and "Traceback" not in err
    assert not out.exists()
    cluster.wait_until(lambda: not cluster.run("squeue", "-h", "--nodelist=n6").stdout.strip(), what="n6's step gone")


def test_watch_and_snapshot_reach_the_nodes_through_srun(cli, slurm_env, tmp_path):
    code, out, err = cli("fleet", "watch", "--slurm", "-w", "n1", "--once", "-f", "json")
    hosts = by_name(json.loads(out))
    assert hosts["n1"]["status"] == "ok", err
    lock = tmp_path / "lock.json"
    code, _, err = cli("fleet", "snapshot", "--slurm", "-w", "n2", "-o", str(lock))
    assert code == 0, err
    assert "n2" in lock.read_text()


def test_ctrl_c_while_resume_proves_a_node_puts_its_drain_back(slurm_env, saved_report, tmp_path):
    cluster = slurm_env
    cluster.run("scontrol", "update", "NodeName=n6", "State=DRAIN", "Reason=computefence: gpu.xid")
    argv = [sys.executable, "-m", "computefence", "fleet", "resume", "--from", str(saved_report), "--yes"]
    argv += ["--timeout", "120", "--log", str(tmp_path / "actions.jsonl")]
    run = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # n6's probe hangs: the run is inside the proof when its step shows up.
    cluster.wait_until(lambda: cluster.run("squeue", "-h", "--nodelist=n6").stdout.strip(), what="n6's proof running")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "computefence: interrupted; " in err and "scontrol calls made" in err and "Traceback" not in err
    assert cluster.state("n6") == "drained" and cluster.reason("n6") == "computefence: gpu.xid"
    assert "computefence-resume" not in cluster.run("scontrol", "show", "reservation").stdout
    cluster.wait_until(lambda: not cluster.run("squeue", "-h", "--nodelist=n6").stdout.strip(), what="n6's step gone")
