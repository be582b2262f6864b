"""What a new user read and tripped on: counts that say "(s)" or "1 hosts", a baseline taken
from one pod described as the baseline of the whole fleet, "0 with warnings" beside pods
that have warnings, `report FILE` missing from `report --help`, and COMPUTEFENCE_FORMAT=junit
breaking `report diff`."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import computefence
from computefence.cli import main
from computefence.evaluate.ledger import build_ledger
from computefence.models import (
    FindingResult,
    FixHost,
    FixReport,
    HostReport,
    HostStatus,
    ProviderInfo,
    Report,
    StepRecord,
    Target,
)
from computefence.render.fix import render_fix
from computefence.render.hosts import render_hosts
from computefence.sources.export import export_yaml

PACKAGE = Path(computefence.__file__).parent


def test_a_baseline_from_one_pod_names_that_pod(tmp_path, capsys):
    assert main(["fleet", "snapshot", "--demo", "--from", "pod-healthy", "-o", str(tmp_path / "l.json")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"computefence: wrote the baseline of pod-healthy to {tmp_path / 'l.json'}"


def test_a_majority_baseline_counts_its_pods_in_words(tmp_path, capsys):
    assert main(["fleet", "snapshot", "--demo", "-o", str(tmp_path / "l.json")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"computefence: wrote the majority baseline of 5 pods to {tmp_path / 'l.json'}"


def test_one_exported_host_is_one_host():
    assert export_yaml([Target(name="a", host="10.0.0.1")]).splitlines()[0].endswith("(1 host).")


def test_report_help_names_the_report_file_form(capsys):
    assert main(["report", "--help"]) == 0
    assert "`computefence report FILE.json` is `report show FILE.json`" in " ".join(capsys.readouterr().out.split())


def test_a_computefence_format_with_no_changes_form_leaves_report_diff_working(tmp_path, capsys, monkeypatch):
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    monkeypatch.setenv("COMPUTEFENCE_FORMAT", "junit")  # set for fleet check's CI step
    capsys.readouterr()
    code = main(["report", "diff", str(tmp_path / "r.json"), str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "") and "nothing changed" in out


def _shown(tmp_path, capsys, fmt: str) -> str:
    capsys.readouterr()
    main(["report", "show", str(tmp_path / "r.json"), "--format", fmt, "--no-policy"])
    return capsys.readouterr().out


def test_the_pod_counts_never_say_no_warnings_beside_pods_that_have_some(tmp_path, capsys):
    # The demo's blocked pods have warnings too; a pod counts once, under its worst finding,
    # and every format words that count the same way from the report's one summary.
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    verdicts = Counter(host["verdict"] for host in report["hosts"])
    assert any(h["verdict"] == "blocked" and h["warnings"] for h in report["hosts"])
    assert report["summary"]["hosts_warned"] == verdicts["warnings"]
    detail = (
        f"{verdicts['blocked']} of 6 pods blocked, {verdicts['not_checked']} not checked, "
        f"{verdicts['warnings']} with warnings only, {verdicts['ready']} clean"
    )
    assert _shown(tmp_path, capsys, "rich").splitlines()[-2].endswith(f"BLOCKED  {detail}")
    assert detail in _shown(tmp_path, capsys, "markdown")
    html = _shown(tmp_path, capsys, "html")
    assert f'<p class="detail">{detail}</p>' in html
    assert f'<b>{verdicts["warnings"]}</b><span class="state v-warnings">with warnings only</span>' in html


COUNTED = re.compile(r"\b1 (pods|GPUs|hosts|steps|findings|targets|machines|runs|errors|files|lines)\b|\w\(s\)")


def test_the_demo_report_counts_in_words(capsys):
    # Its accelerate finding said "1 visible GPU(s)".
    assert main(["fleet", "check", "--demo"]) == 1
    out, err = capsys.readouterr()
    assert COUNTED.findall(out + err) == []
    assert "has 1 visible GPU: the launch fails or hangs" in " ".join(out.split())


def test_a_fix_plan_for_one_pod_counts_in_words():
    step = StepRecord(
        check="gpu.torch-cpu-build", run="python3 -m pip install torch", on="pod", kind="safe", status="planned"
    )
    result = FindingResult(check="gpu.torch-cpu-build", outcome="planned")
    plan = FixReport(
        tool_version="0", generated_at="now", hosts=[FixHost(name="pod-a", steps=[step], results=[result])]
    )
    plan.summary.planned = 1
    text = render_fix(plan, "rich")
    assert COUNTED.findall(text) == []
    assert text.startswith("ComputeFence fix · plan · 1 pod · now")
    assert "pod-a: 1 finding, 1 step to run" in text
    assert "PLAN  1 step on 1 pod: 1 finding with steps to run" in text


def test_a_ledger_of_one_machine_in_one_run_counts_in_words():
    pod = HostReport(
        name="pod-a",
        status=HostStatus.OK,
        provider=ProviderInfo(provider="vast", pod_id="1", machine_id="1001", gpu_type="H100 SXM"),
    )
    ledger = build_ledger(
        [Report(tool_version="0", kind="fleet", generated_at="2026-12-01T20:00:00+00:00", hosts=[pod])]
    )
    assert render_hosts(ledger, "rich").startswith("ComputeFence hosts · 1 machine in 1 run")


def test_no_message_in_the_code_counts_with_an_s_in_brackets():
    # The class, not the examples: every count goes through text.plural.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.search(r"[A-Za-z]\(s\)", node.value.replace("http(s)", "")):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value.strip()[:60]}")
    assert found == []
