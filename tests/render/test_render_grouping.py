"""Findings grouped across pods: a fix that names each pod's own path is never shown with a
`<path>` placeholder (it could not be pasted); the verdict line leads with the count it rests on."""

from __future__ import annotations

from computefence.models import Finding, Fix, FixStep, HostReport, HostStatus, Report, Severity, Summary
from computefence.render import views


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
