"""The 'Since the last run' section in every renderer that shows it, and `report diff`."""

from __future__ import annotations

import json

from computefence.cli import main
from computefence.evaluate import build_report
from computefence.evaluate.changes import compare_reports
from computefence.models import Finding, Fix, FixStep, HostReport, HostStatus, Severity
from computefence.render import render, render_changes

FIX = "pip install --index-url https://download.pytorch.org/whl/cu124 torch==2.4.1"


def _runs():
    torch_missing = Finding(
        check="python.torch-missing",
        severity=Severity.BLOCK,
        message="torch is not importable by python3",
        fix=Fix(steps=[FixStep.safe(FIX)]),
        subject="python3",
    )
    shm = Finding(check="system.shm", severity=Severity.WARN, message="/dev/shm is 64 MiB", subject="/dev/shm")
    old = build_report(
        [
            HostReport(name="pod-breaks", status=HostStatus.OK, findings=[shm]),
            HostReport(name="pod-heals", status=HostStatus.OK, findings=[torch_missing]),
            HostReport(name="pod-down", status=HostStatus.OK),
        ],
        kind="fleet",
    )
    new = build_report(
        [
            HostReport(name="pod-breaks", status=HostStatus.OK, findings=[shm, torch_missing]),
            HostReport(name="pod-heals", status=HostStatus.OK),
            HostReport(name="pod-down", status=HostStatus.UNREACHABLE, reason="connection refused"),
        ],
        kind="fleet",
    )
    return old, new.model_copy(update={"changes": compare_reports(old, new)})


def test_rich_report_leads_with_the_changes_at_80_columns():
    _, new = _runs()
    lines = render(new, "rich", width=80).splitlines()
    assert lines[1].startswith(f"Since the last run ({new.changes.since})")
    assert lines[2] == "1 new blocker, 1 cleared, 1 connection change"
    section = lines[3 : lines.index("")]
    rows = [line for line in section if not line.startswith(" ")]  # continuation and fix lines are indented
    assert [row.split()[:2] for row in rows] == [["new", "blocker"], ["connection", "pod-down"], ["cleared", "blocker"]]
    assert rows[0].split()[2:4] == ["pod-breaks", "python.torch-missing:"] and "pod-heals" in rows[2]
    assert "ok → unreachable: connection refused" in rows[1]
    assert section[section.index(rows[0]) + 1 : section.index(rows[1])][-1].strip() == f"fix: {FIX}"
    assert all(len(line) <= 80 for line in lines if "fix:" not in line)
    assert lines.index("") < next(i for i, line in enumerate(lines) if line.lstrip().startswith("Pod"))


def test_markdown_report_has_the_section_with_fix_blocks():
    _, new = _runs()
    text = render(new, "markdown")
    assert "### Since the last run" in text and "1 new blocker, 1 cleared, 1 connection change" in text
    assert text.index("### Since the last run") < text.index("| Pod |")
    assert "- 🔴 new blocker **pod-breaks**: python.torch-missing" in text
    assert f"  ```sh\n  {FIX}\n  ```" in text
    assert "- 🟢 cleared blocker **pod-heals**" in text


def test_json_changes_have_a_stable_shape():
    _, new = _runs()
    changes = json.loads(render(new, "json"))["changes"]
    assert set(changes) == {"since", "new", "cleared", "appeared", "vanished", "status", "versions"}
    assert set(changes["new"][0]) == {"host", "severity_before", "severity_after", "finding"}
    assert changes["status"] == [
        {"host": "pod-down", "before": "ok", "after": "unreachable", "reason": "connection refused"}
    ]
    assert json.loads(render_changes(new.changes, "json")) == changes


def test_report_diff_exits_1_on_new_blockers_only(tmp_path, capsys):
    old, new = _runs()
    (tmp_path / "old.json").write_text(old.model_dump_json())
    (tmp_path / "new.json").write_text(new.model_dump_json())
    assert main(["report", "diff", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Since the last run") and "pod-breaks" in out
    assert main(["report", "diff", str(tmp_path / "new.json"), str(tmp_path / "new.json"), "-f", "markdown"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert main(["report", "diff", str(tmp_path / "old.json"), str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
