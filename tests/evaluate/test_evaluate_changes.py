"""compare_reports: what changed between two runs, as a pure function of two reports."""

from __future__ import annotations

from computefence.evaluate import build_report
from computefence.evaluate.changes import compare_reports, newsworthy, worsened
from computefence.models import Facts, Finding, HostReport, HostStatus, PackageFacts, Severity, TorchFacts


def _finding(check: str, severity: Severity, subject: str | None = None) -> Finding:
    return Finding(
        check=check,
        severity=severity,
        message=f"{check} says {severity.value}",
        subject=subject,
        fix=f"fix-{check}" if severity is not Severity.PASS else None,
    )


def _host(
    name: str,
    *findings: Finding,
    status: HostStatus = HostStatus.OK,
    torch: str = "2.4.1",
    numpy: str | None = "1.26.4",
) -> HostReport:
    facts = (
        Facts(
            torch=TorchFacts(importable=True, version=torch, cuda_build="12.4"),
            packages=PackageFacts(versions={"numpy": numpy}),
        )
        if status is HostStatus.OK
        else None
    )
    return HostReport(
        name=name,
        status=status,
        reason=None if status is HostStatus.OK else "connection refused",
        facts=facts,
        findings=list(findings),
    )


def _run(*hosts: HostReport):
    return build_report(list(hosts), kind="fleet")


SHM = _finding("system.shm", Severity.WARN, "/dev/shm")
OUT_DIR = _finding("storage.output-dir", Severity.BLOCK, "/workspace/out")


def test_a_pod_that_broke_and_one_that_was_fixed():
    old = _run(_host("a", SHM), _host("b", OUT_DIR, SHM))
    new = _run(_host("a", SHM, OUT_DIR), _host("b", SHM))
    changes = compare_reports(old, new)
    assert [(c.host, c.finding.check, c.severity_before, c.severity_after) for c in changes.new] == [
        ("a", "storage.output-dir", None, Severity.BLOCK)
    ]
    assert [(c.host, c.finding.check, c.severity_before, c.severity_after) for c in changes.cleared] == [
        ("b", "storage.output-dir", Severity.BLOCK, None)
    ]
    assert changes.since == old.generated_at
    assert not (changes.appeared or changes.vanished or changes.status or changes.versions)
    assert worsened(changes, new) and newsworthy(changes)


def test_same_findings_are_no_change():
    new = _run(_host("a", OUT_DIR, SHM))
    changes = compare_reports(_run(_host("a", SHM, OUT_DIR)), new)
    assert changes.empty and not worsened(changes, new) and not newsworthy(changes)


def test_a_warning_that_became_a_blocker_is_new_and_one_that_eased_is_cleared():
    shm_block = _finding("system.shm", Severity.BLOCK, "/dev/shm")
    worse = compare_reports(_run(_host("a", SHM)), _run(_host("a", shm_block)))
    assert [(c.severity_before, c.severity_after) for c in worse.new] == [(Severity.WARN, Severity.BLOCK)]
    assert worse.cleared == []
    eased = _run(_host("a", SHM))
    better = compare_reports(_run(_host("a", shm_block)), eased)
    assert better.new == []
    assert [(c.severity_before, c.severity_after) for c in better.cleared] == [(Severity.BLOCK, Severity.WARN)]
    assert not worsened(better, eased)


def test_same_check_on_another_subject_is_a_different_finding():
    other = _finding("storage.output-dir", Severity.BLOCK, "/workspace/other")
    changes = compare_reports(_run(_host("a", OUT_DIR)), _run(_host("a", other)))
    assert [c.finding.subject for c in changes.new] == ["/workspace/other"]
    assert [c.finding.subject for c in changes.cleared] == ["/workspace/out"]


def test_pods_appear_vanish_and_change_connection_status():
    old = _run(_host("a"), _host("b"), _host("gone"), _host("down", status=HostStatus.UNREACHABLE))
    new = _run(_host("a"), _host("b", status=HostStatus.TIMEOUT), _host("down", OUT_DIR), _host("fresh", SHM))
    changes = compare_reports(old, new)
    assert changes.appeared == ["fresh"] and changes.vanished == ["gone"]
    assert [(s.host, s.before, s.after) for s in changes.status] == [
        ("b", HostStatus.OK, HostStatus.TIMEOUT),
        ("down", HostStatus.UNREACHABLE, HostStatus.OK),
    ]
    # Nothing was known about "down" and "fresh" last time: their findings are new, nothing cleared.
    assert [(c.host, c.finding.check) for c in changes.new] == [("down", "storage.output-dir"), ("fresh", "system.shm")]
    assert changes.cleared == []
    assert worsened(changes, new)
    # A pod that stopped answering, or a new one that does not, is a blocker only while
    # unreachable pods are not allowed.
    down = _run(_host("a", status=HostStatus.UNREACHABLE))
    lost = compare_reports(_run(_host("a")), down)
    allowed = down.model_copy(update={"allow_unreachable": True})
    assert worsened(lost, down) and not worsened(lost, allowed) and newsworthy(lost)
    grown = _run(_host("a"), _host("b", status=HostStatus.TIMEOUT))
    assert worsened(compare_reports(_run(_host("a")), grown), grown)


def test_version_changes_on_pods_checked_both_times():
    old = _run(_host("a", torch="2.4.1", numpy="1.26.4"), _host("b"))
    new = _run(_host("a", torch="2.5.0", numpy=None), _host("b", status=HostStatus.UNREACHABLE))
    changes = compare_reports(old, new)
    assert [(v.host, v.component, v.before, v.after) for v in changes.versions] == [
        ("a", "torch", "2.4.1", "2.5.0"),
        ("a", "numpy", "1.26.4", "(not installed)"),
    ]
    assert not newsworthy(compare_reports(old, _run(_host("a", torch="2.5.0"), _host("b"))))
