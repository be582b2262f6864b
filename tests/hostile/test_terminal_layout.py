"""The terminal report at any width: a path, host or other word is never split across lines
(one longer than the line stands alone, whole, for the terminal to wrap softly), and a `fix:`
command is printed on one line, so what is copied back is exactly what was meant. Checked on
the demo fleet and on one whose pods carry hostile long names, paths and reasons."""

from __future__ import annotations

import re

import pytest

from computefence.cli import main
from computefence.models import (
    FindingResult,
    FixHost,
    FixReport,
    ReleasePod,
    ReleaseReport,
    Report,
    Severity,
    StepRecord,
)
from computefence.render import render, views
from computefence.render.fix import render_fix
from computefence.render.release import render_release

WIDTHS = (40, 60, 80, 100, 120, 200)
LAYOUTS = ({}, {"group_by": "pod"})
FIX_LINE = re.compile(r"^ +fix: ")
# The most label words a line has before its message: "✗ BLOCK check.id", "note:", a status and a pod.
LABEL_WORDS = 3
DEEP = "/workspace/" + "/".join(f"segment-{i:02d}" for i in range(12)) + "/" + "z" * 90 + ".safetensors"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Report:
    saved = tmp_path_factory.mktemp("demo") / "r.json"
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(saved)]) == 1
    return Report.model_validate_json(saved.read_text())


def _hostile(demo: Report) -> Report:
    """The demo with a 90-character pod name, a path deeper than any terminal in a message and
    a note, and an unreachable pod's reason naming a long key path."""
    hosts = []
    for host in demo.hosts:
        update: dict = {}
        if host.name == "pod-old-driver":
            update["name"] = "pod-" + "x" * 76 + "-old-driver"
        if host.reason:
            update["reason"] = f"{host.reason} with key /home/someone/.ssh/{'k' * 64}_ed25519 refused"
        findings = []
        for finding in host.findings:
            if finding.severity is Severity.BLOCK:
                finding = finding.model_copy(update={"message": f"{finding.message}; it writes to {DEEP} too"})
                if finding.fix is not None and finding.fix.advice:
                    fix = finding.fix.model_copy(update={"advice": f"{finding.fix.advice}, or see {DEEP}"})
                    finding = finding.model_copy(update={"fix": fix})
            findings.append(finding)
        hosts.append(host.model_copy(update={**update, "findings": findings}))
    return demo.model_copy(update={"hosts": hosts})


def _words(report: Report) -> set[str]:
    """Every word the report quotes from a pod or a check: names, reasons, messages, notes."""
    texts = [host.name for host in report.hosts] + [h.reason or "" for h in report.hosts if h.status.value != "ok"]
    for host in report.hosts:
        for finding in host.findings:
            if finding.severity in (Severity.BLOCK, Severity.WARN):
                texts += [finding.message, finding.fix.advice if finding.fix else ""]
    for row in report.drift:
        texts += [version for version, _ in views.drift_cells(row.values)]
    return {word for text in texts for word in (text or "").split()}


def _commands(report: Report) -> set[str]:
    return {
        step.run
        for host in report.hosts
        for fix in [host.fix, *(f.fix for f in host.findings if f.severity in (Severity.BLOCK, Severity.WARN))]
        if fix is not None
        for step in fix.steps
    }


@pytest.fixture(params=["demo", "hostile"])
def report(request, demo) -> Report:
    return demo if request.param == "demo" else _hostile(demo)


@pytest.mark.parametrize("layout", LAYOUTS, ids=["by-check", "by-pod"])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_is_split_across_lines(report, width, layout):
    printed = set(render(report, "rich", width=width, **layout).split())
    assert sorted(_words(report) - printed) == []


@pytest.mark.parametrize("layout", LAYOUTS, ids=["by-check", "by-pod"])
@pytest.mark.parametrize("width", WIDTHS)
def test_every_fix_command_is_on_one_line_as_it_runs(report, width, layout):
    lines = render(report, "rich", width=width, **layout).splitlines()
    fix_lines = [line for line in lines if FIX_LINE.match(line)]
    for command in _commands(report):
        assert any(line.split("fix: ", 1)[1].split("  # ")[0] == command for line in fix_lines), command


@pytest.mark.parametrize("layout", [*LAYOUTS, {"quiet": True}], ids=["by-check", "by-pod", "quiet"])
@pytest.mark.parametrize("width", WIDTHS)
def test_only_a_command_or_a_word_longer_than_the_line_goes_past_it(report, width, layout):
    for line in render(report, "rich", width=width, **layout).splitlines():
        if len(line) <= width or FIX_LINE.match(line):
            continue
        # A label and a word too long for the line, nothing more.
        words = line.split()
        assert len(words) <= LABEL_WORDS + 1 and max(map(len, words)) > width // 3, line


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_check_demo_at_columns(width, tmp_path, capsys, monkeypatch, demo):
    # The CLI as a user runs it, COLUMNS set: the report shown again from the saved demo run.
    saved = tmp_path / "r.json"
    saved.write_text(demo.model_dump_json())
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    assert main(["report", "show", str(saved), "--no-policy"]) == 1
    out = capsys.readouterr().out
    assert sorted(_words(demo) - set(out.split())) == []
    assert all(
        len(line) <= width or FIX_LINE.match(line) or len(line.split()) <= LABEL_WORDS + 1 for line in out.splitlines()
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_a_fix_plans_reasons_keep_paths_and_hyphenated_names_whole(width):
    # fleet fix's plan wraps a held step's reason in its own text layout.
    reason = f"the pod pod-ephemeral-ckpt-with-a-long-name keeps {DEEP} open: stop the job first"
    step = StepRecord(check="storage.output-dir", run="true", on="pod", kind="safe", status="skipped", reason=reason)
    plan = FixReport(tool_version="0", generated_at="now", hosts=[FixHost(name="pod-a", steps=[step])])
    plan.hosts[0].results.append(FindingResult(check="storage.output-dir", outcome="planned"))
    printed = render_fix(plan, "rich", width=width).split()
    assert sorted(set(reason.split()) - set(printed)) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_report_diff_keeps_every_changed_pod_and_message_whole(width, demo, tmp_path, capsys, monkeypatch):
    # The hostile fleet after the demo: a pod renamed (one vanished, one appeared), messages
    # grown by a deep path (blockers new and cleared), an unreachable pod's reason changed.
    hostile = _hostile(demo)
    (tmp_path / "a.json").write_text(demo.model_dump_json())
    (tmp_path / "b.json").write_text(hostile.model_dump_json())
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    main(["report", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert "pod-" + "x" * 76 + "-old-driver" in out.split() and "pod-old-driver" in out.split()
    assert DEEP in out.split()
    fix_lines = [line for line in out.splitlines() if FIX_LINE.match(line)]
    for line in out.splitlines():
        assert len(line) <= width or line in fix_lines or max(map(len, line.split())) > width // 3, line


@pytest.mark.parametrize("width", WIDTHS)
def test_a_release_plan_keeps_pod_names_reasons_and_the_call_whole(width):
    call = (
        'runpod.stop_pod("podidpodidpod"): POST https://api.runpod.io/graphql podStop(input: {podId: "podidpodidpod"})'
    )
    pod = ReleasePod(
        name="pod-" + "x" * 76 + "-old-driver",
        provider="runpod",
        pod_id="podidpodidpod",
        action="stop",
        selected_by=["gpu.driver-too-old"],
        cost_per_hour=1.29,
        outcome="would_release",
        detail=call,
        reasons=[f"gpu.driver-too-old: driver 470.182.03 supports CUDA 11.4 only; see {DEEP}"],
    )
    out = render_release(ReleaseReport(pods=[pod]), "rich", width=width)
    assert {pod.name, DEEP, "gpu.driver-too-old"} <= set(out.split())
    assert f"    call: {call}" in out.splitlines()
