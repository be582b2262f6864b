"""build_report and exit_code: counts, money at risk, drift and the verdict."""

from __future__ import annotations

import pytest
from evaluate_builders import gpus, runpod_pod, torch

from computefence.evaluate import build_report, evaluate_host, exit_code
from computefence.models import (
    CheckOptions,
    Finding,
    HostReport,
    HostStatus,
    PackageFacts,
    ProviderInfo,
    Report,
    Severity,
    SourceStatus,
)


def _host(name: str, *severities: Severity, status=HostStatus.OK, cost: float | None = None, facts=None) -> HostReport:
    findings = [Finding(check=f"gpu.c{i}", severity=s, message="m") for i, s in enumerate(severities)]
    provider = ProviderInfo(provider="runpod", pod_id=name, cost_per_hour=cost) if cost is not None else None
    return HostReport(name=name, status=status, findings=findings, provider=provider, facts=facts)


def test_summary_counts_hosts_findings_and_money_at_risk():
    hosts = [
        _host("clean", Severity.PASS, Severity.PASS, cost=0.69),
        _host("warned", Severity.WARN, Severity.PASS, cost=1.89),
        _host("blocked", Severity.BLOCK, Severity.WARN, cost=2.49),
        _host("down", status=HostStatus.UNREACHABLE, cost=2.99),
        _host("unpriced", Severity.BLOCK),
    ]
    report = build_report(hosts, kind="fleet")
    s = report.summary
    assert (s.hosts, s.ok, s.not_ok) == (5, 4, 1)
    assert (s.hosts_blocked, s.hosts_warned, s.hosts_clean) == (2, 1, 1)
    assert (s.blockers, s.warnings, s.passed) == (2, 2, 3)
    assert s.cost_per_hour_total == pytest.approx(8.06)
    assert s.cost_per_hour_at_risk == pytest.approx(5.48)  # blocked + unreachable, priced
    assert s.hosts_at_risk_priced == 2
    assert s.verdict is Severity.BLOCK
    assert report.kind == "fleet" and report.tool_version and report.generated_at


def test_no_prices_means_no_money_figures():
    s = build_report([_host("a", Severity.PASS)], kind="doctor").summary
    assert s.cost_per_hour_total is None and s.cost_per_hour_at_risk is None


def test_priced_fleet_with_nothing_at_risk_reports_zero():
    s = build_report([_host("a", Severity.WARN, cost=1.0)], kind="fleet").summary
    assert s.cost_per_hour_total == 1.0 and s.cost_per_hour_at_risk == 0.0


@pytest.mark.parametrize(
    ("hosts", "allow_unreachable", "verdict"),
    [
        ([_host("a", Severity.PASS)], False, Severity.PASS),
        ([_host("a", Severity.PASS, Severity.WARN)], False, Severity.WARN),
        ([_host("a", Severity.WARN, Severity.BLOCK)], False, Severity.BLOCK),
        ([_host("a", Severity.PASS), _host("b", status=HostStatus.TIMEOUT)], False, Severity.BLOCK),
        # Allowed, an unchecked pod still is not a clean bill of health.
        ([_host("a", Severity.PASS), _host("b", status=HostStatus.TIMEOUT)], True, Severity.WARN),
        ([_host("a", Severity.BLOCK), _host("b", status=HostStatus.TIMEOUT)], True, Severity.BLOCK),
    ],
)
def test_verdict(hosts, allow_unreachable, verdict):
    assert build_report(hosts, kind="fleet", allow_unreachable=allow_unreachable).summary.verdict is verdict


def test_a_failed_source_blocks_unless_unreachable_is_allowed():
    sources = [SourceStatus(name="runpod", ok=False, error="401"), SourceStatus(name="inventory/pods.yaml", targets=1)]
    hosts = [_host("a", Severity.PASS)]
    assert build_report(hosts, kind="fleet", sources=sources).summary.verdict is Severity.BLOCK
    report = build_report(hosts, kind="fleet", sources=sources, allow_unreachable=True)
    assert report.summary.verdict is Severity.WARN and report.sources == sources


@pytest.mark.parametrize(
    ("severities", "fail_on", "code"),
    [
        ((Severity.PASS,), Severity.BLOCK, 0),
        ((Severity.WARN,), Severity.BLOCK, 0),
        ((Severity.WARN,), Severity.WARN, 1),
        ((Severity.BLOCK,), Severity.BLOCK, 1),
        ((Severity.PASS,), Severity.WARN, 0),
    ],
)
def test_exit_code(severities, fail_on, code):
    report = build_report([_host("a", *severities)], kind="doctor", fail_on=fail_on)
    assert report.fail_on is fail_on
    assert exit_code(report) == code


def test_exit_code_of_a_saved_report_uses_its_recorded_options():
    report = build_report([_host("a", Severity.WARN)], kind="fleet", fail_on=Severity.WARN)
    assert exit_code(Report.model_validate_json(report.model_dump_json())) == 1


def test_drift_lists_only_components_that_differ_between_checked_hosts():
    a = runpod_pod()
    b = runpod_pod().model_copy(
        update={
            "gpu": gpus(driver="535.104.05", cuda="12.2"),
            "torch": torch(version="2.3.1+cu121", cuda="12.1"),
            "packages": PackageFacts(
                python_found=True,
                versions={"torch": "2.3.1+cu121", "transformers": "4.44.2", "accelerate": None, "peft": None},
            ),
        }
    )
    c = runpod_pod().model_copy(update={"packages": PackageFacts(error="python3 not found")})
    hosts = [
        HostReport(name="a", status=HostStatus.OK, facts=a),
        HostReport(name="b", status=HostStatus.OK, facts=b),
        HostReport(name="c", status=HostStatus.OK, facts=c),
        HostReport(name="down", status=HostStatus.UNREACHABLE),
    ]
    drift = {row.component: row.values for row in build_report(hosts, kind="fleet").drift}
    assert drift["torch"] == {"2.4.1+cu124": ["a", "c"], "2.3.1+cu121": ["b"]}
    assert drift["torch CUDA build"] == {"12.4": ["a", "c"], "12.1": ["b"]}
    assert drift["NVIDIA driver"] == {"550.54.15": ["a", "c"], "535.104.05": ["b"]}
    assert drift["driver CUDA"] == {"12.4": ["a", "c"], "12.2": ["b"]}
    # c's package list was not collected: it says nothing about accelerate.
    assert drift["accelerate"] == {"0.34.2": ["a"], "(not installed)": ["b"]}
    assert "transformers" not in drift and "python" not in drift and "peft" not in drift


def test_a_single_host_has_no_drift():
    host = HostReport(name="a", status=HostStatus.OK, facts=runpod_pod())
    assert build_report([host], kind="doctor").drift == []


def test_a_report_of_evaluated_hosts_round_trips_through_json():
    facts = runpod_pod()
    host = HostReport(name="pod", status=HostStatus.OK, facts=facts, findings=evaluate_host(facts, CheckOptions()))
    report = build_report([host], kind="doctor")
    assert report.summary.verdict is Severity.PASS and report.summary.hosts_clean == 1
    assert Report.model_validate_json(report.model_dump_json()) == report
