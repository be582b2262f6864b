"""`computefence hosts` and `hosts avoid`: the host ledger of a fleet check --history."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from computefence.cli import main
from computefence.models import (
    Facts,
    Finding,
    GpuFacts,
    GpuPerf,
    HostReport,
    HostStatus,
    KernelLogFacts,
    PerfFacts,
    ProviderInfo,
    Remedy,
    Report,
    Severity,
    XidEvent,
)
from computefence.operations.history import History

ECC = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 uncorrectable ECC errors", remedy=Remedy.REPLACE)
CPU_TORCH = Finding(check="gpu.torch-cpu-build", severity=Severity.BLOCK, message="CPU torch", remedy=Remedy.FIX)
H100 = "NVIDIA H100 80GB HBM3"


def _pod(
    name: str, machine: str, findings: list[Finding], *, tflops: float = 700.0, xid: int | None = None
) -> HostReport:
    facts = Facts(
        gpu=GpuFacts(
            kernel_log=KernelLogFacts(
                readable=True, xid_events=[XidEvent(code=xid, line=f"NVRM: Xid {xid}")] if xid else []
            )
        ),
        perf=PerfFacts(ran=True, gpus=[GpuPerf(index=0, name=H100, matmul_tflops=tflops)]),
    )
    info = ProviderInfo(provider="vast", pod_id=f"{name}-id", machine_id=machine, host_id="77", gpu_type="H100 SXM")
    return HostReport(name=name, status=HostStatus.OK, provider=info, facts=facts, findings=findings)


def _run(when: str, hosts: list[HostReport]) -> Report:
    return Report(tool_version="test", kind="fleet", generated_at=when, hosts=hosts)


@pytest.fixture
def history(tmp_path) -> Path:
    """3 runs: machine 1001 blocked by ECC twice (with an Xid 79 and a slow canary the second
    time), 2002 once, 3003 never; 4004 blocked twice, but by a fixable check."""
    directory = tmp_path / "runs"
    directory.mkdir()
    store = History(directory, keep=10)
    runs = [
        [_pod("a", "1001", [ECC]), _pod("b", "2002", []), _pod("c", "3003", []), _pod("d", "4004", [CPU_TORCH])],
        [_pod("a", "1001", []), _pod("b", "2002", [ECC]), _pod("c", "3003", []), _pod("d", "4004", [CPU_TORCH])],
        [_pod("a2", "1001", [ECC], tflops=350.0, xid=79), _pod("b", "2002", []), _pod("c", "3003", [])],
    ]
    for minute, hosts in enumerate(runs):
        store.save(_run(f"2026-12-01T20:0{minute}:00+00:00", hosts))
    return directory


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_ledger_counts_runs_blocked_runs_and_checks_per_machine(history, capsys):
    code, out, _ = _cli(capsys, "hosts", "--history", str(history), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    rows = {row["machine_id"]: row for row in doc["hosts"]}
    assert set(rows) == {"1001", "2002", "3003", "4004"}
    a = rows["1001"]
    for key in (
        "provider",
        "machine_id",
        "host_id",
        "gpu_model",
        "runs",
        "blocked_runs",
        "checks",
        "last_seen",
        "perf",
    ):
        assert key in a
    assert (a["provider"], a["host_id"], a["gpu_model"], a["runs"], a["blocked_runs"]) == (
        "vast",
        "77",
        "H100 SXM",
        3,
        2,
    )
    assert a["checks"] == {"gpu.ecc": 2} and a["last_seen"] == "2026-12-01T20:02:00+00:00"
    assert a["last_xid"] == "Xid 79 (GPU has fallen off the bus) at 2026-12-01T20:02:00+00:00"
    # The last run's canary: 350 TFLOPS beside the median of that run's 3 H100 pods (700).
    assert a["perf"]["gpu.perf-compute"] == {
        "value": 350.0,
        "unit": "TFLOPS",
        "fleet_median": 700.0,
        "pods": 3,
        "share": 0.5,
        "at": "2026-12-01T20:02:00+00:00",
    }
    assert (rows["2002"]["blocked_runs"], rows["3003"]["blocked_runs"], rows["4004"]["checks"]) == (
        1,
        0,
        {"gpu.torch-cpu-build": 2},
    )


def test_min_runs_keeps_one_failure_from_condemning_a_machine(history, capsys):
    _, out, _ = _cli(capsys, "hosts", "avoid", "--history", str(history), "--format", "json")
    assert [(m["machine_id"], m["replace_runs"], m["checks"]) for m in json.loads(out)] == [
        ("1001", 2, ["gpu.ecc"]),
        ("2002", 1, ["gpu.ecc"]),
    ]
    _, out, _ = _cli(capsys, "hosts", "avoid", "--history", str(history), "--min-runs", "2", "--format", "json")
    assert [m["machine_id"] for m in json.loads(out)] == ["1001"]
    _, out, _ = _cli(capsys, "hosts", "avoid", "--history", str(history), "--min-runs", "3")
    assert out == ""  # nothing to leave out: no clause at all


def test_the_vast_clause_excludes_the_machines_in_vastais_notin_syntax(history, capsys):
    code, out, _ = _cli(capsys, "hosts", "avoid", "--history", str(history))
    assert code == 0 and out == "machine_id notin [1001,2002]\n"


def test_the_vast_clause_parses_back_with_the_vastai_clis_own_parser(history, capsys):
    query = pytest.importorskip("vastai.api.query", reason="vastai is not installed (see README: its pins)")
    _, out, _ = _cli(capsys, "hosts", "avoid", "--history", str(history))
    parsed = query.parse_query(f"reliability > 0.98 {out.strip()}", {}, query.offers_fields)
    assert parsed == {"reliability": {"gt": "0.98"}, "machine_id": {"notin": ["1001", "2002"]}}


def test_the_terminal_ledger_fits_80_columns_and_marks_the_machines_to_avoid(history, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = _cli(capsys, "hosts", "--history", str(history), "--min-runs", "2")
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[0].startswith("ComputeFence hosts · 4 machines in 3 runs")
    avoid = [line for line in lines if line.startswith("vast ") and "avoid" in line.split()]
    assert len(avoid) == 1 and avoid[0].startswith("vast 1001 avoid")
    assert "vast 1001: last Xid 79 (GPU has fallen off the bus) at 2026-12-01T20:02:00+00:00" in lines
    monkeypatch.setenv("COLUMNS", "140")
    _, out, _ = _cli(capsys, "hosts", "--history", str(history))
    [row] = [line for line in out.splitlines() if line.startswith("vast 1001 ")]
    assert row.split()[-3:] == ["compute", "50%", "2026-12-01T20:02:00+00:00"]


def test_history_files_keep_the_machine_behind_each_pod(tmp_path):
    store = History(tmp_path, keep=5)
    path = store.save(_run("2026-12-01T20:00:00+00:00", [_pod("a", "1001", [])]))
    saved = json.loads(path.read_text())
    assert saved["hosts"][0]["provider"]["machine_id"] == "1001"
    assert saved["hosts"][0]["provider"]["host_id"] == "77"


def test_a_missing_history_is_a_usage_error(tmp_path, capsys):
    code, _, err = _cli(capsys, "hosts", "--history", str(tmp_path / "none"))
    assert code == 2 and "not a directory" in err


# ---------------------------------------------------------------- the digests beside the runs (#35)


def _digests(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.digest"))


def test_each_saved_run_has_a_digest_and_hosts_reads_it_not_the_run(history, capsys):
    runs = sorted(history.glob("*.json"))
    assert [d.name for d in _digests(history)] == [r.stem + ".digest" for r in runs]
    # A digest that still matches its run (size and time) is what is read: rename a pod's
    # machine in the newest digest alone, and the ledger shows the new name.
    newest = _digests(history)[-1]
    newest.write_text(newest.read_text().replace('"3003"', '"9009"'))
    stamp = runs[-1].stat()
    _, out, _ = _cli(capsys, "hosts", "--history", str(history), "--format", "json")
    assert "9009" in out and stamp == runs[-1].stat()


@pytest.mark.parametrize(
    "spoil",
    ["missing", "stale", "not json", "another kind", "a directory", "a fifo"],
)
def test_a_missing_stale_or_bad_digest_is_made_again_from_the_run(history, capsys, spoil):
    _, before, _ = _cli(capsys, "hosts", "--history", str(history), "--format", "json")
    first, last = _digests(history)[0], _digests(history)[-1]
    if spoil == "missing":
        first.unlink()
    elif spoil == "stale":
        # Another run's digest, as if the run had been replaced since: its stamp does not match.
        first.write_bytes(last.read_bytes())
    elif spoil == "not json":
        first.write_bytes(b"\xff{" * 1000)
    elif spoil == "another kind":
        first.write_text(json.dumps({"digest_version": 2, "generated_at": "x", "summary": {}}))
    elif spoil == "a directory":
        first.unlink()
        first.mkdir()
    else:
        first.unlink()
        os.mkfifo(first)
    code, after, err = _cli(capsys, "hosts", "--history", str(history), "--format", "json")
    assert code == 0 and after == before and "Traceback" not in err
    if spoil in ("missing", "stale", "not json", "another kind"):
        # Made again and saved: the next read takes it as it is.
        assert json.loads(first.read_text())["run_size"] == (history / (first.stem + ".json")).stat().st_size


def test_report_history_reads_the_digests_and_pruning_takes_a_digest_with_its_run(history, capsys, tmp_path):
    page = tmp_path / "page.html"
    for digest in _digests(history):
        digest.write_text(digest.read_text().replace('"name":"c"', '"name":"renamed-in-digest"'))
    assert _cli(capsys, "report", "history", str(history), "-o", str(page))[0] == 0
    assert "renamed-in-digest" in page.read_text()
    store = History(history, keep=1)
    store.save(_run("2026-12-01T21:00:00+00:00", [_pod("z", "5005", [])]))
    assert len(list(history.glob("*.json"))) == 1 and len(_digests(history)) == 1
