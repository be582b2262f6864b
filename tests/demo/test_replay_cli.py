"""`fleet check --replay`: recorded pods served back through the whole CLI, no server anywhere."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from computefence.cli import main
from computefence.connectors.interface import check_targets
from computefence.connectors.replay import ReplayConnector, load_recordings
from computefence.demo import DEMO_RECORDING
from computefence.demo.fleet import DEMO_PODS
from computefence.models import HostStatus, Report, Target


def _replay(capsys, *args: str, folder: Path = DEMO_RECORDING) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["fleet", "check", "--replay", str(folder), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _copy_demo(tmp_path: Path) -> Path:
    folder = tmp_path / "recording"
    shutil.copytree(DEMO_RECORDING, folder)
    return folder


def test_the_demo_recording_replays_every_fault_and_exits_1(capsys, expected_blockers):
    code, out, _ = _replay(capsys, "--format", "json")
    assert code == 1
    report = Report.model_validate_json(out)
    hosts = {h.name: h for h in report.hosts}
    assert list(hosts) == [pod.name for pod in DEMO_PODS]
    for name, expected in expected_blockers.items():
        # Disk headroom in the recording is the recording machine's, not this one's.
        assert hosts[name].status is HostStatus.OK
        assert {f.check for f in hosts[name].blocking_findings} - {"storage.disk-headroom"} == expected - {
            "storage.disk-headroom"
        }
    assert hosts["pod-unreachable"].status is HostStatus.UNREACHABLE
    assert hosts["pod-unreachable"].fix.commands[0].startswith("ssh ")
    assert (report.summary.hosts, report.summary.not_ok, report.summary.verdict.value) == (6, 1, "block")
    assert [s.name for s in report.sources] == ["replay"]


def test_exit_codes_follow_the_replayed_pods(capsys):
    assert _replay(capsys, "--limit", "pod-healthy")[0] == 0
    assert _replay(capsys, "--limit", "pod-unreachable")[0] == 1
    assert _replay(capsys, "--limit", "pod-unreachable", "--allow-unreachable")[0] == 0
    # pod-ephemeral-ckpt carries warnings too: --fail-on warn fails on them when --skip drops its blockers.
    skip = ["--skip", "storage.output-dir", "--skip", "accelerate.num-processes", "--skip", "storage.disk-headroom"]
    assert _replay(capsys, "--limit", "pod-ephemeral-ckpt", *skip)[0] == 0
    assert _replay(capsys, "--limit", "pod-ephemeral-ckpt", *skip, "--fail-on", "warn")[0] == 1


def test_every_format_renders_the_replayed_fleet(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, rich, _ = _replay(capsys)
    assert code == 1 and "pod-driver-broken" in rich and "4 of 6 pods blocked" in rich
    # Fix commands stay whole on one line at 80 columns, so they paste as they are.
    assert any(
        line.strip().startswith("fix: /root/.pyenv/versions/3.11.7/bin/python3 -m pip uninstall -y torch && ")
        for line in rich.splitlines()
    )
    code, junit, _ = _replay(capsys, "--format", "junit")
    assert code == 1
    cases = ET.fromstring(junit).iter("testcase")
    assert {case.get("classname") or case.get("name") for case in cases}
    code, markdown, _ = _replay(capsys, "--format", "markdown")
    assert code == 1 and "pod-old-driver" in markdown
    code, prometheus, _ = _replay(capsys, "--format", "prometheus")
    assert code == 1 and any(line.startswith("computefence_") for line in prometheus.splitlines())


def test_a_garbled_probe_output_is_probe_failed_for_that_pod_only(tmp_path, capsys):
    folder = _copy_demo(tmp_path)
    recording = folder / "2-pod-cpu-torch.json"
    document = json.loads(recording.read_text())
    document["probe_output"] = "Welcome to the pod!\n\x1b[31mgarbage"
    recording.write_text(json.dumps(document))
    code, out, _ = _replay(capsys, "--format", "json", folder=folder)
    hosts = {h.name: h for h in Report.model_validate_json(out).hosts}
    assert code == 1
    assert hosts["pod-cpu-torch"].status is HostStatus.PROBE_FAILED
    assert hosts["pod-cpu-torch"].reason.startswith("probe output is not JSON: ?[31mgarbage")
    assert hosts["pod-healthy"].status is HostStatus.OK and hosts["pod-healthy"].facts is not None


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not JSON"),
        ('{"recording": 99}', "not a version-1 recording"),
        ('{"recording": 1, "target": {"name": "x", "host": "h"}, "status": "sleeping"}', "bad target or status"),
        ('{"recording": 1, "target": {"name": "x", "host": "h"}, "status": "ok", "reason": 3}', "wrong type"),
    ],
)
def test_a_bad_recording_is_a_one_line_error_exit_2(tmp_path, capsys, content, message):
    folder = tmp_path / "recording"
    folder.mkdir()
    (folder / "1-x.json").write_text(content)
    code, out, err = _replay(capsys, folder=folder)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_pod_recorded_twice_is_a_one_line_error_exit_2(tmp_path, capsys):
    folder = _copy_demo(tmp_path)
    shutil.copy(folder / "2-pod-cpu-torch.json", folder / "9-pod-cpu-torch-again.json")
    code, out, err = _replay(capsys, folder=folder)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"computefence: error: --replay {folder}: pod-cpu-torch is recorded twice"]


def test_replay_takes_no_other_target_source(tmp_path, capsys):
    inventory = tmp_path / "pods.yaml"
    inventory.write_text("hosts: []\n")
    code, _, err = _replay(capsys, "-i", str(inventory))
    assert code == 2 and "--replay checks its own recorded pods; drop --inventory" in err
    assert main(["fleet", "check", "--demo", "--replay", str(DEMO_RECORDING)]) == 2


def test_a_target_without_a_recording_is_probe_failed():
    connector = ReplayConnector(load_recordings(DEMO_RECORDING))
    stranger = Target(name="pod-stranger", host="10.0.0.9")
    healthy = next(r.target for r in load_recordings(DEMO_RECORDING) if r.target.name == "pod-healthy")
    reports = asyncio.run(check_targets(connector, [stranger, healthy]))
    assert [r.status for r in reports] == [HostStatus.PROBE_FAILED, HostStatus.OK]
    assert reports[0].reason == "nothing was recorded for pod-stranger"
    assert reports[1].duration_s == next(
        r.duration_s for r in load_recordings(DEMO_RECORDING) if r.target.name == "pod-healthy"
    )


def test_replay_from_a_subprocess_as_a_user_runs_it(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "computefence",
            "fleet",
            "check",
            "--replay",
            str(DEMO_RECORDING),
            "--format",
            "json",
            "--output",
            str(tmp_path / "report.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert Report.model_validate_json((tmp_path / "report.json").read_text()).summary.hosts == 6
