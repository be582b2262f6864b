"""custom.<id>, the policy's severities and skips, and requirement specifiers over many versions;
the one-pod cases of policy.requirement and policy.hardware are data in tests/evaluate/cases/."""

from __future__ import annotations

from evaluate_builders import of, only, problems, runpod_pod
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from computefence.evaluate import evaluate_host, finish_hosts
from computefence.models import (
    CheckOptions,
    CollectorStatus,
    CustomCheckResult,
    HostReport,
    HostStatus,
    Severity,
)
from computefence.policy import parse_policy_text


def policy(text: str, name: str = "pod", tags: list[str] | None = None):
    return parse_policy_text(text, "computefence.yaml").for_target(name, tags or [])


def test_custom_check_results_become_one_finding_each():
    facts = runpod_pod()
    facts.custom = [
        CustomCheckResult(id="ok", exit_code=0, stdout="Logged in as bot", stdout_matched=True),
        CustomCheckResult(id="wrong-account", exit_code=0, stdout="Not logged in", stdout_matched=False),
        CustomCheckResult(id="fails", exit_code=1, stderr="wandb: not logged in"),
        CustomCheckResult(id="slow", timed_out=True, timeout_s=2, signal=9),
        CustomCheckResult(id="crash", signal=11),
    ]
    rule = policy("""
custom:
  - {id: ok, run: wandb status, expect: {stdout_matches: Logged in}}
  - {id: wrong-account, run: wandb status, expect: {stdout_matches: Logged in}}
  - {id: fails, run: wandb status, fix: wandb login}
  - {id: slow, run: sleep 60, timeout: 2, severity: warn}
  - {id: crash, run: ./crash}
  - {id: absent, run: "true"}
""")
    findings = {f.check: f for f in evaluate_host(facts, CheckOptions(), policy=rule) if f.check.startswith("custom.")}
    assert findings["custom.ok"].severity is Severity.PASS
    assert (
        findings["custom.wrong-account"].message == "`wandb status` printed nothing matching /Logged in/: Not logged in"
    )
    assert findings["custom.fails"].severity is Severity.BLOCK and findings["custom.fails"].fix.commands == [
        "wandb login"
    ]
    assert "exited 1 (expected 0): wandb: not logged in" in findings["custom.fails"].message
    assert findings["custom.slow"].severity is Severity.WARN and "2 s timeout" in findings["custom.slow"].message
    assert "killed by signal 11" in findings["custom.crash"].message
    assert findings["custom.absent"].message == "`true` did not run: the probe reported no result for it"
    facts.collectors["custom"] = CollectorStatus(ok=False, timed_out=True, error="timed out after 55.0s")
    [late] = [f for f in evaluate_host(facts, CheckOptions(), policy=rule) if f.check == "custom.absent"]
    assert late.message == "`true` did not run: timed out after 55.0s"


def test_severity_skip_and_thresholds_apply_per_target_after_overrides():
    facts = runpod_pod(volume=False)
    rule_text = """
severity: {storage.no-volume: warn, system: ignore}
thresholds: {disk_warn_gb: 50, disk_block_gb: 30}
overrides:
  - match: {tag: scratch}
    skip: [storage]
"""
    host = HostReport(name="pod", status=HostStatus.OK, facts=facts)
    plain = policy(rule_text)
    [judged] = finish_hosts(
        [host.model_copy(update={"findings": evaluate_host(facts, CheckOptions(), policy=plain)})],
        {"pod": plain},
        None,
        only=[],
        skip=[],
    )
    assert only(judged.findings, "storage.no-volume").severity is Severity.WARN
    assert not of(judged.findings, "system.shm")
    # 12 GB free on the container disk is under the policy's 30 GB block threshold.
    assert "under 30 GB" in problems(of(judged.findings, "storage.disk-headroom"))[0].message
    scratch = policy(rule_text, tags=["scratch"])
    [skipped] = finish_hosts(
        [host.model_copy(update={"findings": evaluate_host(facts, CheckOptions(), policy=scratch)})],
        {"pod": scratch},
        None,
        only=[],
        skip=[],
    )
    assert not [f for f in skipped.findings if f.check.startswith("storage.")]


versions = st.tuples(st.integers(0, 12), st.integers(0, 60), st.integers(0, 20)).map(lambda t: ".".join(map(str, t)))
specifiers = st.lists(
    st.tuples(st.sampled_from([">=", "<=", ">", "<", "==", "!="]), versions), min_size=1, max_size=3
).map(lambda parts: ",".join(op + v for op, v in parts))


@settings(max_examples=200, deadline=None)
@given(version=versions, spec=specifiers)
def test_a_version_satisfies_its_specifier_or_produces_exactly_one_finding(version, spec):
    facts = runpod_pod()
    facts.packages.versions["transformers"] = version
    findings = of(
        evaluate_host(facts, CheckOptions(), policy=policy(f"requirements: {{transformers: '{spec}'}}")),
        "policy.requirement",
    )
    assert len(findings) == 1
    satisfied = SpecifierSet(spec).contains(Version(version), prereleases=True)
    assert (findings[0].severity is Severity.PASS) == satisfied
