"""Every machine-readable format checked by the tools that consume it: JUnit against the
Jenkins xUnit plugin's junit-10.xsd (tests/render/xsd, MIT) and through junitparser;
Prometheus through `promtool check metrics` where the Debian prometheus package put it,
else through prometheus_client's own parser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from lxml import etree
from prometheus_client.parser import text_string_to_metric_families
from recorded_fleets import recorded_fleet
from sample_reports import doctor_report, fleet_report, hostile_report

from computefence.models import Report, Severity
from computefence.render import render

XSD = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "xsd" / "junit-10.xsd")))


def _variants() -> dict[str, Report]:
    fleet = fleet_report()
    return {
        "fleet": fleet,
        "fleet --allow-unreachable": fleet.model_copy(update={"allow_unreachable": True}),
        "fleet --fail-on warn": fleet.model_copy(update={"fail_on": Severity.WARN}),
        "doctor with a skip": doctor_report(),
        "hostile strings": hostile_report(),
        "31 recorded pods": recorded_fleet(31),
    }


REPORTS = _variants()


@pytest.mark.parametrize("name", REPORTS)
def test_junit_validates_against_the_jenkins_xunit_schema(name):
    document = etree.fromstring(render(REPORTS[name], "junit").encode("utf-8"))
    assert XSD.validate(document), XSD.error_log.last_error


@pytest.mark.parametrize("name", REPORTS)
def test_junitparser_reads_every_case_with_its_time_and_consistent_counts(name):
    xml = JUnitXml.fromstring(render(REPORTS[name], "junit").encode("utf-8"))
    cases = [case for suite in xml for case in suite]
    assert cases and all(case.time is not None for case in cases)
    for suite in xml:
        results = [type(result) for case in suite for result in case.result]
        assert suite.tests == len(list(suite))
        assert (suite.failures, suite.errors, suite.skipped) == (
            results.count(Failure),
            results.count(Error),
            results.count(Skipped),
        )


def test_a_skipped_check_is_a_skipped_case_for_junitparser():
    xml = JUnitXml.fromstring(render(doctor_report(), "junit").encode("utf-8"))
    skipped = {case.name for suite in xml for case in suite if any(isinstance(r, Skipped) for r in case.result)}
    assert skipped == {"gpu.driver"}


def _promtool_or_parser(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        list(text_string_to_metric_families(text))  # raises ValueError on a malformed exposition
        return
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    # promtool exits 3 for lint findings only (e.g. naming advice), 1 for an invalid exposition.
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", REPORTS)
def test_prometheus_exposition_passes_promtool_or_the_client_parser(name):
    text = render(REPORTS[name], "prometheus")
    _promtool_or_parser(text)
    families = {family.name for family in text_string_to_metric_families(text)}
    assert {"computefence_host_up", "computefence_findings"} <= families
