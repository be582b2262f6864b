"""What an action leaves behind is a true record. `fleet fix --log` keeps one transcript per
pod whatever the pods are called (names that differ only in `/ : + _`, `.` and `..`), never
replacing or writing through a file already there; `fleet release` sends one call per provider
pod however many entries of the report name it, and every entry says what the provider
answered for that call, in the result and in the action log."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))
from fake_api import FakeProviderApi, vast_instance
from fleet_helpers import HEALTHY, host_entry, write_inventory
from sshfleet import PodSpec

from computefence.connectors.replay import load_recordings, record_run
from computefence.models import (
    Finding,
    HostReport,
    HostStatus,
    Remedy,
    Report,
    Severity,
    StepKind,
    StepPlace,
    Target,
)
from computefence.operations.fix import StepRecord, Transcript, write_transcripts
from computefence.sources.vast import VastSource

NAMES = ["gpu/a", "gpu_a", "gpu:a", "gpu+a", ".", ".."]


def _transcript(name: str) -> Transcript:
    step = StepRecord(
        check="storage.output-dir", run="mkdir -p /x", on=StepPlace.POD, kind=StepKind.SAFE, status="ran", exit=0
    )
    return Transcript(name, [(step.model_copy(update={"duration_s": 0.1}), f"made by {name}\n".encode())])


def _first_lines(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text().splitlines()[0] for p in folder.iterdir()}


def test_names_that_differ_give_different_transcripts_and_a_second_run_replaces_none(tmp_path):
    logs = tmp_path / "logs"
    write_transcripts(logs, [_transcript(name) for name in NAMES])
    first = _first_lines(logs)
    assert sorted(first.values()) == sorted(f"# computefence fleet fix: {name}" for name in NAMES)
    assert all(not name.startswith(".") and "/" not in name for name in first)
    before = {p.name: p.read_bytes() for p in logs.iterdir()}

    write_transcripts(logs, [_transcript(name) for name in NAMES])

    assert len(list(logs.iterdir())) == 2 * len(NAMES)
    assert {name: (logs / name).read_bytes() for name in before} == before


def test_a_link_planted_at_a_transcripts_name_is_not_written_through(tmp_path):
    logs, victim = tmp_path / "logs", tmp_path / "victim"
    logs.mkdir()
    victim.write_text("keep me\n")
    (logs / "gpu_a.log").symlink_to(victim)

    [written] = write_transcripts(logs, [_transcript("gpu_a")])

    assert victim.read_text() == "keep me\n" and written.name == "gpu_a~2.log"
    assert written.read_text().startswith("# computefence fleet fix: gpu_a\n")
    assert written.stat().st_mode & 0o077 == 0  # commands run as root and their output: the user's alone


@pytest.mark.sshd
def test_six_names_for_one_pod_run_its_steps_once_and_leave_six_transcripts(ssh_fleet, start_pods, cli, tmp_path):
    (pod,) = start_pods(PodSpec("one-pod-six-names", **dict(HEALTHY, shm_size="16g")))
    hosts = [host_entry(pod, name=name) for name in NAMES]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, hosts, trusted=[pod], checks={"output_dir": "/workspace/runs/7/ckpt"}
    )
    logs = tmp_path / "logs"

    code, out, err = cli(
        "fleet", "fix", "-i", str(inventory), "--no-policy", "--only", "storage.output-dir", "--apply", "--yes",
        "--log", str(logs), "-f", "json",
    )  # fmt: skip

    assert code == 0, err
    # The one pod's step ran once, under its first name; every name is re-probed and fixed.
    ran = [line for line in err.splitlines() if ": storage.output-dir: ran" in line]
    assert len(ran) == 1 and ran[0].startswith("computefence: [1/1] gpu/a: "), err
    hosts_out = json.loads(out)["hosts"]
    assert {h["name"]: h["results"][0]["outcome"] for h in hosts_out} == dict.fromkeys(NAMES, "fixed")
    assert all(h["same_pod"] == NAMES for h in hosts_out)
    transcripts = {p.read_text().splitlines()[0]: p.read_text().splitlines()[1] for p in logs.iterdir()}
    assert sorted(transcripts) == sorted(f"# computefence fleet fix: {name}" for name in NAMES)
    assert set(transcripts.values()) == {f"# one pod named {', '.join(NAMES)}: its steps ran once, under gpu/a"}


# ---------------------------------------------------------------- fleet release


def _ecc_report(target, names: list[str]) -> Report:
    ecc = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 uncorrectable ECC errors", remedy=Remedy.REPLACE)
    hosts = [
        HostReport(name=name, status=HostStatus.OK, host=target.host, port=target.port, provider=target.provider,
                   findings=[ecc])
        for name in names
    ]  # fmt: skip
    when = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat(timespec="seconds")
    return Report(tool_version="test", kind="fleet", generated_at=when, hosts=hosts)


@pytest.fixture
def vast(tmp_path, monkeypatch):
    with FakeProviderApi() as api:
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("VAST_API_KEY", api.keys["vast"])
        monkeypatch.setenv("VAST_URL", api.base_url("vast"))
        api.vast_instances = [vast_instance(4242, "vast-ecc", machine_id=31337)]
        yield api


def test_one_instance_named_twice_gets_one_delete_and_both_entries_the_real_answer(vast, cli, tmp_path):
    [target] = VastSource().targets()
    report = tmp_path / "report.json"
    report.write_text(_ecc_report(target, ["vast-ecc", "vast-ecc-again"]).model_dump_json())
    log = tmp_path / "actions.jsonl"
    vast.requests.clear()

    code, out, _ = cli(
        "fleet", "release", "--from", str(report), "--yes", "--action", "terminate", "-f", "json", "--log", str(log)
    )

    assert code == 0
    assert [(r.method, r.path) for r in vast.requests if r.method == "DELETE"] == [
        ("DELETE", "/api/v0/instances/4242/")
    ]
    pods = json.loads(out)["pods"]
    assert [(p["name"], p["outcome"]) for p in pods] == [("vast-ecc", "released"), ("vast-ecc-again", "released")]
    for pod in pods:
        assert "destroy accepted" in pod["detail"] and "vast-ecc, vast-ecc-again" in pod["detail"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["event"], line.get("names")) for line in lines] == [
        ("send", ["vast-ecc", "vast-ecc-again"]),
        ("answer", ["vast-ecc", "vast-ecc-again"]),
    ]
    assert lines[1]["outcome"] == "released" and "destroy accepted" in lines[1]["detail"]


def test_a_link_at_the_action_logs_path_is_refused_before_any_call(vast, cli, tmp_path):
    [target] = VastSource().targets()
    report = tmp_path / "report.json"
    report.write_text(_ecc_report(target, ["vast-ecc"]).model_dump_json())
    victim, log = tmp_path / "victim", tmp_path / "actions.jsonl"
    victim.write_text("keep me\n")
    log.symlink_to(victim)
    vast.requests.clear()

    code, _, err = cli("fleet", "release", "--from", str(report), "--yes", "--action", "terminate", "--log", str(log))

    assert code != 0 and victim.read_text() == "keep me\n"
    assert [r for r in vast.requests if r.method != "GET"] == []
    assert err.strip().splitlines() == [
        f"computefence: error: --log {log} is a symbolic link; the action log is never written through one"
    ]

    log.unlink()
    code, _, err = cli("fleet", "release", "--from", str(report), "--yes", "--action", "terminate", "--log", str(log))
    assert code == 0, err
    assert log.stat().st_mode & 0o777 == 0o600  # the provider's answers: the user's alone


def test_a_release_that_sends_nothing_leaves_no_action_log_behind(vast, cli, tmp_path):
    [target] = VastSource().targets()
    report = tmp_path / "report.json"
    report.write_text(_ecc_report(target, ["vast-ecc"]).model_dump_json())
    vast.vast_instances = []  # gone when the run lists the account again: nothing to send
    log = tmp_path / "actions.jsonl"

    code, out, err = cli("fleet", "release", "--from", str(report), "--yes", "-f", "json", "--log", str(log))

    assert code == 0, err
    assert [p["outcome"] for p in json.loads(out)["pods"]] == ["gone"]
    assert not log.exists()


def test_an_action_log_is_made_with_its_first_line_and_its_path_is_checked_before(tmp_path):
    from computefence.errors import ConfigError
    from computefence.operations.action_log import open_log

    with pytest.raises(ConfigError, match="does not exist"):
        open_log(tmp_path / "missing" / "actions.jsonl", {})
    path = tmp_path / "actions.jsonl"
    with open_log(path, {"command": "test"}) as log:
        assert not path.exists()
        log.record("send", call="scontrol update")
    assert [json.loads(line)["call"] for line in path.read_text().splitlines()] == ["scontrol update"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_slurm_health_refuses_a_log_it_cannot_write_before_it_probes(cli, tmp_path):
    log = tmp_path / "missing" / "actions.jsonl"

    code, out, err = cli("doctor", "--slurm-health", "--log", str(log))

    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"computefence: error: --log {log}: directory {log.parent} does not exist"]


# ---------------------------------------------------------------- recordings


def test_a_recording_keeps_one_file_in_its_folder_for_every_name(tmp_path):
    names = [*NAMES, "../../escaped", "a/../../b"]
    targets = [Target(name=name, host="10.0.0.7") for name in names]
    hosts = [HostReport(name=name, status=HostStatus.UNREACHABLE, reason=f"down: {name}") for name in names]
    folder = tmp_path / "recording"

    record_run(folder, targets, hosts)

    assert sorted(p.parent for p in tmp_path.rglob("*.json")) == [folder] * len(names)
    recordings = load_recordings(folder)
    assert [(r.target.name, r.reason) for r in recordings] == [(name, f"down: {name}") for name in names]
