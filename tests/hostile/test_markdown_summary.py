"""`--format markdown` goes to $GITHUB_STEP_SUMMARY, which GitHub drops whole past 1 MiB: long
values are cut with a marker, and a huge fleet's report stops short of the limit, saying so."""

from __future__ import annotations

import json
from pathlib import Path

from computefence.cli import main
from computefence.models import Report
from computefence.render import render
from computefence.render.markdown import CUT_MARK, SUMMARY_LIMIT_BYTES


def _demo_report(tmp_path: Path) -> Report:
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    return Report.model_validate_json((tmp_path / "r.json").read_text())


def test_a_pods_five_megabyte_reason_is_cut_with_a_marker(tmp_path, capsys):
    report = _demo_report(tmp_path)
    hosts = [h.model_copy(update={"reason": "x" * 5_000_000}) if h.reason else h for h in report.hosts]
    text = render(report.model_copy(update={"hosts": hosts}), "markdown")
    assert len(text.encode()) < SUMMARY_LIMIT_BYTES
    assert CUT_MARK in text


def test_ten_thousand_pods_stop_short_of_the_limit_and_say_where_the_rest_is(tmp_path, capsys):
    report = _demo_report(tmp_path)
    blocked = next(h for h in report.hosts if h.blockers)
    hosts = [blocked.model_copy(update={"name": f"pod-{i:05d}"}) for i in range(10_000)]
    text = render(report.model_copy(update={"hosts": hosts}), "markdown")
    assert len(text.encode()) < SUMMARY_LIMIT_BYTES
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("**Cut at GitHub's 1 MiB step-summary limit: ") and "--format json" in last
    assert text.count("```") % 2 == 0  # no code block left open
    assert json.loads((tmp_path / "r.json").read_text())["hosts"]  # the JSON keeps everything
