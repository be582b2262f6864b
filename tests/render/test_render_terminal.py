from sample_reports import HF_ADVICE, HF_COMMANDS, HOSTILE_NAME, OUTPUT_DIR_FIX, OUTPUT_DIR_MSG, SKIP_MSG

from computefence.models import Finding, Fix, FixStep, Severity, SourceStatus
from computefence.render import render


def test_doctor_groups_by_area_with_counts_and_fixes(doctor_report):
    text = render(doctor_report, "rich", width=200)
    lines = text.splitlines()
    assert "laptop" in lines[0]
    assert "Storage  1 blocker · 1 warning · 2 passed" in lines
    assert "System  0 blockers · 0 warnings · 1 passed" in lines
    # a check that did not run is counted apart, and marked as such
    assert "GPU  0 blockers · 0 warnings · 0 passed · 1 skipped" in lines
    assert any(line.startswith("- skip  gpu.driver") and SKIP_MSG in line for line in lines)
    # areas in a fixed order: storage, system, gpu
    assert lines.index("Storage  1 blocker · 1 warning · 2 passed") < lines.index(
        "System  0 blockers · 0 warnings · 1 passed"
    )
    # the blocker comes first in its area, its fix right below it
    storage = lines.index("Storage  1 blocker · 1 warning · 2 passed")
    assert lines[storage + 1].startswith("✗ BLOCK storage.output-dir")
    assert OUTPUT_DIR_MSG in lines[storage + 1]
    assert lines[storage + 2].strip() == f"fix: {OUTPUT_DIR_FIX}"
    # every command on its own "fix:" line, the advice apart as a "note:"
    hf = lines.index(f"        fix: {HF_COMMANDS[0]}")
    assert lines[hf + 1] == f"        fix: {HF_COMMANDS[1]}"
    assert lines[hf + 2] == f"       note: {HF_ADVICE}"
    assert "BLOCKED  1 blocker, 1 warning, 3 passed, 1 skipped" in text
    assert "\x1b" not in text and not any(line != line.rstrip() for line in lines)


def test_fix_lines_are_never_folded(fleet_report):
    text = render(fleet_report, "rich", width=60)
    long_fix = "pip install --force-reinstall torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"
    assert f"fix: {long_fix}" in text


def test_fleet_summary_table_grouped_findings_drift_money_and_verdict(fleet_report):
    text = render(fleet_report, "rich", width=200)
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip().startswith("pod-")}
    assert rows["pod-a"][-3:] == ["blocked", "1", "1"]
    assert rows["pod-c"][-3:] == ["blocked", "1", "0"]
    assert rows["pod-d"][-3:] == ["unreachable", "-", "-"]
    assert rows["pod-e"][-3:] == ["ready", "0", "0"]
    assert "2.5.1+cpu" in rows["pod-c"] and "2.4.1+cu124" in rows["pod-a"]
    assert "8x H100 80GB HBM3" in text
    # the same finding on two pods is shown once, with both pods
    assert text.count(OUTPUT_DIR_MSG) == 1
    assert "2 pods: pod-a, pod-b" in text
    assert text.count(f"fix: {OUTPUT_DIR_FIX}") == 1
    # blockers before warnings
    assert text.index("storage.output-dir") < text.index("storage.hf-cache", text.index("Findings across pods"))
    assert "Pods not checked" in text and "connection refused on 203.0.113.13:22" in text
    assert "fix: ssh -p 22 root@203.0.113.13 true" in text
    assert "source vast failed: HTTP 401 from the Vast.ai API" in text
    drift = text[text.index("Version drift") :]
    assert "2.4.1+cu124   3 pods" in drift and "pod-a" not in drift
    assert "Money at risk: 3 blocked or unchecked pods burn $7.47/h" in text
    *_, verdict, ready = text.rstrip().splitlines()
    assert verdict.strip().startswith("BLOCKED  3 of 5 pods blocked, 1 not checked")
    assert ready == "Ready: pod-e"


def test_the_same_finding_about_different_paths_is_one_group_with_each_pods_own_fix(fleet_report):
    a, b = fleet_report.hosts[0], fleet_report.hosts[1]
    b.findings[0] = a.findings[0].model_copy(
        update={
            "subject": "/srv/out",
            "message": OUTPUT_DIR_MSG.replace("/root/out", "/srv/out"),
            "fix": Fix(steps=[FixStep.safe(OUTPUT_DIR_FIX.replace("/root/out", "/srv/out"))]),
        }
    )
    text = render(fleet_report, "rich", width=250)
    # Each pod's fix names its own path, never a `<path>` that cannot be pasted.
    assert "<path>" not in text
    assert f"fix: {OUTPUT_DIR_FIX}" in text
    assert f"fix: {OUTPUT_DIR_FIX.replace('/root/out', '/srv/out')}" in text
    # a single pod keeps its real path
    b.findings.pop(0)
    assert f"fix: {OUTPUT_DIR_FIX}" in render(fleet_report, "rich", width=250)


def test_short_subjects_are_not_templated(fleet_report):
    gpu = dict(check="gpu.memory-in-use", severity=Severity.WARN, fix="nvidia-smi -i 0")
    fleet_report.hosts[0].findings.append(Finding(message="GPU 0 has 10 GB in use", subject="0", **gpu))
    fleet_report.hosts[1].findings.append(Finding(message="GPU 0 has 20 GB in use", subject="0", **gpu))
    text = render(fleet_report, "rich", width=250)
    assert "GPU 0 has 10 GB in use" in text and "GPU 0 has 20 GB in use" in text


def test_verdict_wording_follows_summary_and_fail_on(doctor_report):
    doctor_report.summary.verdict = Severity.WARN
    assert "READY WITH WARNINGS" in render(doctor_report, "rich")
    doctor_report.fail_on = Severity.WARN
    assert "FAILED ON WARNINGS" in render(doctor_report, "rich")
    doctor_report.summary.verdict = Severity.PASS
    assert " READY " in render(doctor_report, "rich")


def test_hostile_strings_are_shown_literally_not_interpreted(hostile_report):
    text = render(hostile_report, "rich", width=250)
    # rich markup from a pod is printed as is, ESC/BEL are neutralised
    assert "evil[bold red]X[/]?[2J<script>" in text
    assert "# [red]nope[/red] <b>" in text
    assert "\x1b" not in text and "\x07" not in text


def test_color_output_keeps_pod_escapes_out(hostile_report):
    text = render(hostile_report, "rich", color=True, width=250)
    assert "\x1b[" in text  # rich's own styling is there
    assert "\x1b[2J" not in text and "\x1b]0;pwned" not in text
    assert HOSTILE_NAME not in text  # the raw name, escape included, never reaches the terminal


def test_reads_the_summary_the_evaluator_builds(fleet_report):
    from computefence.evaluate import build_report

    report = build_report(fleet_report.hosts, kind="fleet", sources=fleet_report.sources)
    text = render(report, "rich", width=200)
    assert "Money at risk: 3 blocked or unchecked pods burn $7.47/h (of $7.47/h for the fleet)" in text
    assert "BLOCKED  3 of 5 pods blocked, 1 not checked, 0 with warnings only, 1 clean" in text
    assert "torch CUDA build" in text  # a drift row the evaluator found (12.4 vs CPU)


def test_torch_cell_names_the_build_when_the_version_does_not(fleet_report):
    torch = fleet_report.hosts[4].facts.torch
    torch.version, torch.cuda_build = "2.4.0", "12.1"  # e.g. a conda build
    assert "2.4.0 / CUDA 12.1" in render(fleet_report, "rich", width=200)
    torch.cuda_build = None
    assert "2.4.0 / CPU build" in render(fleet_report, "rich", width=200)


def test_dataset_report_header_describes_the_file_not_the_machine():
    from computefence.evaluate import build_report
    from computefence.models import CollectorStatus, DatasetFacts, Facts, HostReport, HostStatus

    data = DatasetFacts(
        path="/workspace/train.jsonl",
        exists=True,
        format="jsonl",
        compression="gzip",
        rows=1200,
        input_column="text",
        label_column="label",
    )
    host = HostReport(
        name="pod", status=HostStatus.OK, facts=Facts(dataset=data, collectors={"dataset": CollectorStatus()})
    )
    out = render(build_report([host], kind="dataset"), "rich")
    assert "/workspace/train.jsonl · jsonl (gzip) · 1,200 rows · input text, label label" in out
    assert "GPUs" not in out and "torch" not in out


def test_fleet_report_says_what_read_each_source(fleet_report):
    fleet_report.sources.append(SourceStatus(name="ssh_config ~/.ssh/config", targets=2, resolver="ssh -G"))
    lines = render(fleet_report, "rich", width=80).splitlines()
    assert "ssh_config ~/.ssh/config: read by ssh -G" in lines
    # a source read only one way says nothing
    assert not any(line.startswith("inventory/pods.yaml: read by") for line in lines)
