"""`computefence report FILE.json` re-renders a saved run and exits with its status."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from computefence.cli import main
from computefence.models import Finding, HostReport, HostStatus, Report, Severity, Summary


def _report(verdict: Severity, fail_on: Severity = Severity.BLOCK) -> Report:
    findings = {
        Severity.PASS: [Finding(check="gpu.driver", severity=Severity.PASS, message="driver 550 answers")],
        Severity.WARN: [
            Finding(
                check="system.shm",
                severity=Severity.WARN,
                message="/dev/shm is 64 MB",
                fix="docker run --shm-size=16g ...",
            )
        ],
        Severity.BLOCK: [
            Finding(
                check="storage.output-dir",
                severity=Severity.BLOCK,
                message="/root/out is on the overlay root",
                fix="mkdir -p /workspace/out",
            )
        ],
    }[verdict]
    host = HostReport(name="pod-a", status=HostStatus.OK, findings=findings)
    return Report(
        tool_version="0.1.0",
        kind="fleet",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=[host, HostReport(name="pod-b", status=HostStatus.OK)],
        fail_on=fail_on,
        summary=Summary(
            hosts=2,
            ok=2,
            hosts_blocked=int(verdict is Severity.BLOCK),
            hosts_warned=int(verdict is Severity.WARN),
            hosts_clean=1 + int(verdict is Severity.PASS),
            blockers=int(verdict is Severity.BLOCK),
            warnings=int(verdict is Severity.WARN),
            passed=int(verdict is Severity.PASS),
            verdict=verdict,
        ),
    )


@pytest.fixture
def saved(tmp_path):
    def save(report: Report):
        path = tmp_path / "run.json"
        path.write_text(report.model_dump_json())
        return path

    return save


@pytest.mark.parametrize(
    "verdict, fail_on, code",
    [
        (Severity.PASS, Severity.BLOCK, 0),
        (Severity.WARN, Severity.BLOCK, 0),
        (Severity.WARN, Severity.WARN, 1),
        (Severity.BLOCK, Severity.BLOCK, 1),
    ],
)
def test_exit_code_is_the_saved_runs(saved, capsys, verdict, fail_on, code):
    assert main(["report", str(saved(_report(verdict, fail_on))), "--format", "json"]) == code
    assert Report.model_validate_json(capsys.readouterr().out) == _report(verdict, fail_on)


def test_rerender_as_junit_into_a_file(saved, capsys, tmp_path):
    out = tmp_path / "junit.xml"
    assert main(["report", str(saved(_report(Severity.BLOCK))), "--format", "junit", "--output", str(out)]) == 1
    suites = {s.get("name"): s for s in ET.parse(out).getroot().findall("testsuite")}
    assert set(suites) == {"pod-a", "pod-b"}
    assert suites["pod-a"].find("testcase/failure").get("message") == "/root/out is on the overlay root"


@pytest.mark.parametrize(
    "fmt, marker", [("rich", "BLOCKED"), ("markdown", "## 🛑"), ("prometheus", "# TYPE computefence_host_up gauge")]
)
def test_every_format(saved, capsys, fmt, marker):
    main(["report", str(saved(_report(Severity.BLOCK))), "--format", fmt])
    assert marker in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "is not a computefence JSON report (Invalid JSON"),
        (json.dumps({"tool_version": "0.1.0"}), "is not a computefence JSON report (generated_at: Field required)"),
        (
            json.dumps({"tool_version": "0.1.0", "generated_at": "x", "hosts": [{"name": "a", "status": "exploded"}]}),
            "(hosts.0.status: Input should be",
        ),
        (
            json.dumps({"schema_version": 99, "tool_version": "9", "generated_at": "x"}),
            "has schema_version 99; this computefence reads up to 2",
        ),
        ("", "is not a computefence JSON report"),
    ],
)
def test_malformed_report_is_one_line_and_exit_2(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"computefence: error: {path} ") and expected in err
    assert err.count("\n") == 1


def test_missing_file_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.json")]) == 2
    assert "nope.json: no such computefence JSON report" in capsys.readouterr().err


def test_doctor_json_round_trips_through_report(tmp_path, capsys):
    saved_path = tmp_path / "doctor.json"
    code = main(["doctor", "--format", "json", "--python", "/nonexistent/python3", "--output", str(saved_path)])
    capsys.readouterr()
    assert main(["report", str(saved_path), "--format", "json"]) == code
    assert capsys.readouterr().out == saved_path.read_text()


def test_a_file_far_larger_than_any_report_is_refused_unread(tmp_path, capsys, monkeypatch):
    from computefence import saved_files

    monkeypatch.setattr(saved_files, "MAX_REPORT_BYTES", 1024)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    assert main(["report", str(big)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is over" in err and len(err.splitlines()) == 1
