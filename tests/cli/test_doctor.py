"""`computefence doctor` end to end: the real probe as a subprocess, the evaluator, a renderer.

The machine's own state (mounts, /dev/shm, GPUs) is not under the test's control, so the
exit-code cases pin the outcome with --only and a fake nvidia-smi on PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET

import pytest

from computefence import evaluate
from computefence.cli import main
from computefence.demo.fakes import write_fake_nvidia_smi
from computefence.models import Report, Severity


@pytest.fixture
def gpu_path(tmp_path, monkeypatch):
    """Put a fake nvidia-smi replaying `scenario` first on PATH (the probe inherits it)."""

    def install(scenario: str) -> None:
        bin_dir = tmp_path / f"bin-{scenario}"
        bin_dir.mkdir()
        write_fake_nvidia_smi(bin_dir, scenario)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    return install


def _missing_dir() -> str:
    # Outside /tmp (which the evaluator rightly calls ephemeral) and certain not to exist.
    return f"/computefence-test-{uuid.uuid4().hex}/no/out"


def _doctor_json(capsys, *argv: str) -> tuple[int, Report]:
    code = main(["doctor", "--format", "json", "--python", "/nonexistent/python3", *argv])
    out = capsys.readouterr().out
    return code, Report.model_validate_json(out)


def test_full_run_gives_a_valid_doctor_report(capsys, tmp_path):
    code, report = _doctor_json(capsys, "--output-dir", str(tmp_path / "out"))
    assert code == evaluate.exit_code(report) and code in (0, 1)
    assert report.kind == "doctor" and len(report.hosts) == 1
    host = report.hosts[0]
    assert host.status.value == "ok" and host.facts is not None
    assert host.findings and {f.check for f in host.findings} <= set(evaluate.CHECK_IDS)
    # the training interpreter does not exist: the probe says so
    assert host.facts.torch.python == "/nonexistent/python3" and not host.facts.torch.importable
    assert report.summary.blockers == sum(h.blockers for h in report.hosts)


def test_exit_0_when_the_selected_check_passes(capsys, gpu_path):
    gpu_path("h100x1")
    code, report = _doctor_json(capsys, "--only", "gpu.driver")
    assert code == 0
    assert [f.check for f in report.hosts[0].findings] == ["gpu.driver"]
    assert report.hosts[0].findings[0].severity is Severity.PASS


def test_exit_1_on_a_blocker_and_the_fix_names_the_path(capsys):
    missing = _missing_dir()
    code, report = _doctor_json(capsys, "--only", "storage.output-dir", "--output-dir", missing)
    assert code == 1
    (finding,) = report.hosts[0].findings
    assert finding.severity is Severity.BLOCK and finding.subject == missing
    assert missing in finding.fix.commands[0] and finding.fix.steps[0].kind.value == "safe"
    assert report.summary.verdict is Severity.BLOCK


def test_fail_on_warn_turns_a_warning_into_exit_1(capsys, gpu_path):
    gpu_path("h100x1-busy")
    code, report = _doctor_json(capsys, "--only", "gpu.memory-in-use")
    assert code == 0 and report.hosts[0].findings[0].severity is Severity.WARN
    code, report = _doctor_json(capsys, "--only", "gpu.memory-in-use", "--fail-on", "warn")
    assert code == 1 and report.fail_on is Severity.WARN


def test_skip_removes_a_check(capsys):
    _, report = _doctor_json(capsys, "--skip", "storage.output-dir", "--output-dir", _missing_dir())
    assert "storage.output-dir" not in {f.check for f in report.hosts[0].findings}


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["--format", "yaml"],
        ["--fail-on", "never"],
        ["--timeout", "0"],
        ["--output-dir", ""],
        ["--python", " "],
        ["--dataset", ""],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    assert main(["doctor", *argv]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_unknown_check_id_exits_2_listing_the_valid_ids(capsys):
    assert main(["doctor", "--skip", "storage.nope"]) == 2
    err = capsys.readouterr().err
    assert "storage.nope" in err and "storage.output-dir" in err and "gpu.driver" in err


def test_output_file_is_written_and_stdout_left_clean(capsys, tmp_path, gpu_path):
    gpu_path("h100x1")
    target = tmp_path / "report.xml"
    target.write_text("old")
    code = main(
        [
            "doctor",
            "--format",
            "junit",
            "--only",
            "gpu.driver",
            "--python",
            "/nonexistent/python3",
            "--output",
            str(target),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0 and captured.out == ""
    suite = ET.parse(target).getroot().find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")] == ["gpu.driver"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []  # no temp file left


def test_output_into_a_missing_directory_is_a_one_line_error(capsys, tmp_path):
    code = main(
        [
            "doctor",
            "--only",
            "gpu.driver",
            "--python",
            "/nonexistent/python3",
            "--output",
            str(tmp_path / "nope" / "r.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("computefence: error: --output") and err.count("\n") == 1


def test_rich_output_groups_by_area(capsys, tmp_path):
    code = main(["doctor", "--python", "/nonexistent/python3", "--output-dir", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert "ComputeFence doctor" in out and "Storage  " in out and "passed" in out
    assert "\x1b[" not in out  # not a terminal: no color codes


def test_console_script_gate_stops_a_bad_job(tmp_path):
    """`computefence doctor ... && python train.py` must not start the job on a blocker."""
    marker = tmp_path / "trained"
    missing = _missing_dir()
    script = (
        f"{sys.executable} -m computefence doctor --only storage.output-dir --output-dir {missing} "
        f"--python /nonexistent/python3 >/dev/null && touch {marker}"
    )
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and not marker.exists(), result.stderr


def test_probe_print_writes_the_runnable_probe(capsys):
    assert main(["probe", "--print"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#") and "EMBEDDED_PARAMS = '{" in script
    result = subprocess.run([sys.executable, "-I", "-"], input=script, capture_output=True, text=True, timeout=60)
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["probe_schema_version"] >= 1 and "identity" in facts["collectors"]


def test_probe_without_print_is_a_usage_error(capsys):
    assert main(["probe"]) == 2


def test_doctor_reads_a_parquet_dataset_with_the_pyarrow_it_runs_beside(capsys, tmp_path):
    # The local probe is the user's interpreter, site-packages included: pyarrow there reads
    # parquet (a probe started without site would call it missing).
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(50)], "label": [i % 2 for i in range(50)]}), path)
    main(["doctor", "--dataset", str(path), "--only", "dataset.*", "-f", "json"])
    dataset = json.loads(capsys.readouterr().out)["hosts"][0]["facts"]["dataset"]
    assert (dataset["error"], dataset["rows"], dataset["engine"]) == (None, 50, "pyarrow")
