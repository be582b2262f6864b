"""Findings grouped across pods: a fix that names each pod's own path is never shown with a
`<path>` placeholder (it could not be pasted); the verdict line leads with the count it rests on."""

from __future__ import annotations

from computefence.models import Finding, Fix, FixStep, HostReport, HostStatus, Report, Severity, Summary
from computefence.render import render, views


def _ephemeral(name: str, out: str) -> HostReport:
    finding = Finding(
        check="run.checkpoint-ephemeral",
        severity=Severity.BLOCK,
        message=f"2 checkpoints written to {out}, on the container disk (overlay at /), wiped when the pod stops",
        fix=Fix(steps=[FixStep.safe(f"cp -a -- {out}/checkpoint-100 /workspace/out/")]),
        subject=out,
    )
    return HostReport(name=name, status=HostStatus.OK, findings=[finding])


def test_a_fix_with_each_pods_path_stays_with_that_path():
    hosts = [_ephemeral("pod-a", "/root/out"), _ephemeral("pod-b", "/root/run2"), _ephemeral("pod-c", "/root/out")]

    (group,) = views.group_findings(hosts)

    shown = {(tuple(name for name, _ in v.hosts), v.fix.steps[0].run) for v in group.variants}
    assert shown == {
        (("pod-a", "pod-c"), "cp -a -- /root/out/checkpoint-100 /workspace/out/"),
        (("pod-b",), "cp -a -- /root/run2/checkpoint-100 /workspace/out/"),
    }
    assert all("<path>" not in v.message for v in group.variants)
    assert sorted(group.host_names) == ["pod-a", "pod-b", "pod-c"]


def test_a_watch_failing_only_for_an_unreachable_pod_leads_with_that_count():
    no_job = Finding(check="run.no-job", severity=Severity.WARN, message="no training process; it bills for nothing")
    hosts = [HostReport(name=f"p{i}", status=HostStatus.OK, findings=[no_job]) for i in range(5)]
    hosts.append(HostReport(name="gone", status=HostStatus.UNREACHABLE, reason="connection refused"))
    summary = Summary(hosts=6, ok=5, not_ok=1, hosts_warned=5, warnings=5, verdict=Severity.BLOCK)
    report = Report(
        tool_version="t", kind="watch", generated_at="2026-12-07T00:00:00+00:00", hosts=hosts, summary=summary
    )

    line = views.verdict_detail(report)

    assert line == "1 of 6 pods not reached, 5 with warnings only, 0 healthy"
    assert "0 of 6" not in line


def _no_volume(name: str, *outs: str) -> HostReport:
    """run.checkpoint-ephemeral where no volume is mounted (advice, no command), once per output
    dir that holds checkpoints: the job's --output_dir and a folder in its working directory."""
    findings = [
        Finding(
            check="run.checkpoint-ephemeral",
            severity=Severity.BLOCK,
            message=f"2 checkpoints written to {out}, on the container disk (overlay at /), wiped when the pod stops",
            fix=Fix(advice="nothing here outlives a restart: stop the pod and add a volume"),
            subject=out,
        )
        for out in outs
    ]
    return HostReport(name=name, status=HostStatus.OK, findings=findings)


def test_a_pod_with_the_finding_about_two_paths_is_counted_and_named_once_in_every_format():
    report = Report(
        tool_version="t",
        kind="watch",
        generated_at="2026-12-07T00:00:00+00:00",
        hosts=[_no_volume("run-ephemeral", "/root/out", "/root/ckpt"), _no_volume("pod-b", "/root/out")],
    )

    terminal = render(report, "rich", width=100)
    assert "2 pods:\n" in terminal and "3 pods" not in terminal
    assert "  run-ephemeral: /root/out, /root/ckpt\n" in terminal and terminal.count("run-ephemeral:") == 1
    markdown = render(report, "markdown")
    assert "(2 pods)" in markdown and markdown.count("run-ephemeral:") == 1
    # The page groups findings across pods for a fleet check (a watch shows them per pod).
    page = render(report.model_copy(update={"kind": "fleet"}), "html")
    assert page.count("/root/out, /root/ckpt") == 1
