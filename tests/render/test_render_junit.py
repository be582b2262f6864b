import xml.etree.ElementTree as ET

from sample_reports import HF_ADVICE, HF_COMMANDS, HOSTILE_NAME, OUTPUT_DIR_FIX, OUTPUT_DIR_MSG, SKIP_MSG

from computefence.models import Severity, SourceStatus
from computefence.render import render


def _suites(report):
    root = ET.fromstring(render(report, "junit"))
    assert root.tag == "testsuites"
    return root, {s.get("name"): s for s in root.findall("testsuite")}


def test_a_suite_per_pod_and_a_case_per_check(fleet_report):
    _root, suites = _suites(fleet_report)
    assert set(suites) == {"pod-a", "pod-b", "pod-c", "pod-d", "pod-e", "computefence.sources"}
    cases = {c.get("name"): c for c in suites["pod-a"].findall("testcase")}
    assert set(cases) == {"storage.output-dir", "storage.hf-cache", "gpu.driver"}
    failure = cases["storage.output-dir"].find("failure")
    assert failure.get("type") == "block" and failure.get("message") == OUTPUT_DIR_MSG
    assert f"fix: {OUTPUT_DIR_FIX}" in failure.text
    # a warning passes (the run does not fail on it) but its message and fix are shown
    hf = cases["storage.hf-cache"]
    assert hf.find("failure") is None and hf.find("skipped") is None
    assert hf.find("system-out").text.startswith("WARN: HF cache")
    assert suites["pod-a"].get("hostname") == "203.0.113.10" and suites["pod-a"].get("time") == "3.200"
    props = {p.get("name"): p.get("value") for p in suites["pod-a"].find("properties")}
    assert props == {"status": "ok", "provider": "runpod", "pod_id": "a1", "cost_per_hour": "2.49"}


def test_counts_are_consistent(fleet_report):
    root, suites = _suites(fleet_report)
    for suite in suites.values():
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
    assert root.get("tests") == str(sum(int(s.get("tests")) for s in suites.values()))
    assert (root.get("failures"), root.get("errors")) == ("3", "2")
    # junit-10.xsd allows `skipped` on a suite only.
    assert root.get("skipped") is None and all(s.get("skipped") == "0" for s in suites.values())


def test_an_unreachable_pod_is_an_error_and_a_failed_source_too(fleet_report):
    _, suites = _suites(fleet_report)
    (case,) = suites["pod-d"].findall("testcase")
    error = case.find("error")
    assert case.get("name") == "probe" and error.get("type") == "unreachable"
    assert error.get("message") == "connection refused on 203.0.113.13:22"
    assert "fix: ssh -p 22 root@203.0.113.13 true" in error.text
    sources = {c.get("name"): c for c in suites["computefence.sources"].findall("testcase")}
    assert sources["vast"].find("error").get("message") == "HTTP 401 from the Vast.ai API"
    assert sources["inventory/pods.yaml"].find("error") is None


def test_allow_unreachable_makes_the_pod_skipped(fleet_report):
    fleet_report.allow_unreachable = True
    _, suites = _suites(fleet_report)
    (case,) = suites["pod-d"].findall("testcase")
    assert case.find("error") is None and case.find("skipped") is not None


def test_fail_on_warn_turns_warnings_into_failures(fleet_report):
    fleet_report.fail_on = Severity.WARN
    _, suites = _suites(fleet_report)
    hf = next(c for c in suites["pod-a"].findall("testcase") if c.get("name") == "storage.hf-cache")
    assert hf.find("failure").get("type") == "warn"


def test_hostile_strings_stay_well_formed_xml(hostile_report):
    _, suites = _suites(hostile_report)
    expected = 'evil[bold red]X[/]?[2J<script>|"q"\\'
    assert HOSTILE_NAME.replace("\x1b", "?") == expected
    assert expected in suites
    failure = suites[expected].find("testcase/failure")
    assert "]]>" in failure.text and "\x07" not in failure.text
    assert "\n" not in failure.get("message")
    props = {p.get("name"): p.get("value") for p in suites[expected].find("properties")}
    assert props["pod_id"] == 'id"\n'


def test_a_skipped_check_is_skipped_and_fix_and_note_are_apart(doctor_report):
    _root, suites = _suites(doctor_report)
    cases = {c.get("name"): c for c in suites["laptop"].findall("testcase")}
    assert cases["gpu.driver"].find("skipped").get("message") == SKIP_MSG
    assert suites["laptop"].get("skipped") == "1"
    hf = cases["storage.hf-cache"].find("system-out").text.splitlines()
    assert hf[1:] == [f"fix: {HF_COMMANDS[0]}", f"fix: {HF_COMMANDS[1]}", f"note: {HF_ADVICE}"]


def test_a_source_case_says_what_read_it(fleet_report):
    fleet_report.sources.append(SourceStatus(name="ansible hosts.ini", targets=3, resolver="ansible-inventory"))
    root = ET.fromstring(render(fleet_report, "junit"))
    case = root.find("testsuite[@name='computefence.sources']/testcase[@name='ansible hosts.ini']")
    assert case.find("system-out").text == "3 targets (read by ansible-inventory)"
