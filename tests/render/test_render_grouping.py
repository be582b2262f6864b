"""Findings grouped across pods: a fix that names each pod's own path is never shown with a
`<path>` placeholder (it could not be pasted), and a watch finding carries no price that
would split one problem into a group per pod."""

from __future__ import annotations

from computefence.models import Finding, Fix, FixStep, HostReport, HostStatus, Severity
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
