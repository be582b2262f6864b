"""JUnit XML for CI systems: a test suite per pod, a test case per check.

Mapping (chosen for what GitHub, GitLab and Jenkins display):
- a check with a blocker is a <failure>; so is a warning when the run used --fail-on warn
  (report.fail_on), since it then fails the job too;
- otherwise a warning is a passing case whose <system-out> carries the message and fix
  ("skipped" would read as "not checked", which it was not);
- a check that reported only skip (it could not run or does not apply) is <skipped>;
- a pod that could not be checked is one <error> case named "probe" (or <skipped> when
  the run allowed unreachable pods);
- a target source that failed (an inventory, a provider API) is an <error> in a
  "computefence.sources" suite.

It validates against the Jenkins xUnit plugin's junit-10.xsd (tests/render/xsd): `skipped`
is counted per suite only (the schema has no such attribute on <testsuites>), and every case
has a `time`: the probe's duration for the "probe" case, 0 for a check (judged from facts
already collected; the suite's time is the pod's whole probe).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from computefence.evaluate.fleet import fails
from computefence.models import Finding, Fix, HostReport, HostStatus, Report, Severity
from computefence.render import views
from computefence.render.interface import Renderer
from computefence.text import clean, one_line, plural


def render(report: Report) -> str:
    root = ET.Element("testsuites", name=f"computefence {report.kind}")
    for host in report.hosts:
        root.append(_host_suite(report, host))
    if report.sources:
        root.append(_sources_suite(report))
    _total(root, root.findall("testsuite"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _x(text: object) -> str:
    # XML 1.0 forbids control characters (clean() replaces them) and U+FFFE/U+FFFF.
    return clean(text).replace("\ufffe", "?").replace("\uffff", "?")


def _host_suite(report: Report, host: HostReport) -> ET.Element:
    suite = ET.Element("testsuite", name=_x(host.name), timestamp=_x(report.generated_at))
    if host.host:
        suite.set("hostname", _x(host.host))
    if host.duration_s is not None:
        suite.set("time", _time(host.duration_s))
    props = ET.SubElement(suite, "properties")
    _prop(props, "status", host.status.value)
    if host.provider is not None:
        _prop(props, "provider", host.provider.provider)
        _prop(props, "pod_id", host.provider.pod_id)
        if host.provider.cost_per_hour is not None:
            _prop(props, "cost_per_hour", f"{host.provider.cost_per_hour:.2f}")
    classname = _x(host.name)
    if host.status is not HostStatus.OK:
        case = ET.SubElement(suite, "testcase", classname=classname, name="probe", time=_time(host.duration_s))
        reason = _x(one_line(host.reason or host.status.value))
        if report.allow_unreachable:
            ET.SubElement(case, "skipped", message=reason)
        else:
            error = ET.SubElement(case, "error", message=reason, type=host.status.value)
            error.text = _x(_join(reason, host.fix))
    by_check: dict[str, list[Finding]] = {}
    for finding in host.findings:
        by_check.setdefault(finding.check, []).append(finding)
    for check, findings in by_check.items():
        suite.append(_check_case(report, classname, check, findings))
    return suite


def _check_case(report: Report, classname: str, check: str, findings: list[Finding]) -> ET.Element:
    case = ET.Element("testcase", classname=classname, name=_x(check), time=_time(0.0))
    worst = max(findings, key=lambda f: f.severity.rank)
    details = "\n\n".join(_finding_text(f) for f in sorted(findings, key=lambda f: -f.severity.rank))
    if worst.severity is Severity.SKIP:
        ET.SubElement(case, "skipped", message=_x(one_line(worst.message)))
    elif fails(worst.severity, report.fail_on):
        failure = ET.SubElement(case, "failure", message=_x(one_line(worst.message)), type=worst.severity.value)
        failure.text = _x(details)
    else:
        ET.SubElement(case, "system-out").text = _x(details)
    return case


def _finding_text(finding: Finding) -> str:
    head = f"{views.SEVERITY_LABEL[finding.severity]}: {finding.message}"
    return _join(head, finding.fix if views.has_fix(finding) else None)


def _join(message: str, fix: Fix | None) -> str:
    lines = [message]
    if fix:
        lines += [f"fix: {command}" for command in fix.commands]
        if fix.advice:
            lines.append(f"note: {fix.advice}")
    return "\n".join(lines)


def _sources_suite(report: Report) -> ET.Element:
    suite = ET.Element("testsuite", name="computefence.sources", timestamp=_x(report.generated_at))
    for source in report.sources:
        case = ET.SubElement(suite, "testcase", classname="computefence.sources", name=_x(source.name), time=_time(0.0))
        if not source.ok:
            message = _x(source.error or "source failed")
            ET.SubElement(case, "error", message=message, type="source").text = message
        else:
            read_by = f" (read by {source.resolver})" if source.resolver else ""
            ET.SubElement(case, "system-out").text = _x(f"{plural(source.targets, 'target')}{read_by}")
    return suite


def _prop(props: ET.Element, name: str, value: str) -> None:
    ET.SubElement(props, "property", name=name, value=_x(value))


def _total(root: ET.Element, suites: list[ET.Element]) -> None:
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        cases = suite.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(1 for c in cases if c.find("failure") is not None),
            "errors": sum(1 for c in cases if c.find("error") is not None),
            "skipped": sum(1 for c in cases if c.find("skipped") is not None),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    root.set("time", _time(sum(float(suite.get("time", 0)) for suite in suites)))


def _time(seconds: float | None) -> str:
    return f"{seconds or 0.0:.3f}"


class JunitRenderer(Renderer):
    """`--format junit`: one testcase a pod and check, for CI."""

    def render(self, report: Report) -> str:
        return render(report)
