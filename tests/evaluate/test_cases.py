"""Evaluator cases as data: tests/evaluate/cases/<check id>/<case>.json, facts in, findings out.

One pytest id per case file (`<check id>/<case>`). The format and how to add a case are in
cases/README.md; load_case() refuses a case it cannot read exactly (an unknown check folder,
an unknown key at any depth, a case that expects nothing), so a typo fails instead of passing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from computefence.evaluate import CHECK_IDS, evaluate_host, finish_hosts, judge_host
from computefence.models import CheckOptions, Facts, Finding, HostReport, HostStatus, ProviderInfo, Severity
from computefence.policy import EffectivePolicy

CASES = Path(__file__).resolve().parent / "cases"
# Whole facts documents that cases start from ("base"): _facts/<name>.json.
BASES = CASES / "_facts"

CASE_KEYS = {"about", "base", "facts", "fleet", "checks", "provider", "policy", "findings", "no_findings", "absent"}
# Checks that compare a pod with the rest of its run: their cases give the other pods ("fleet").
FLEET_CHECKS = {"env.outlier"}
FINDING_KEYS = {"check", "severity", "message", "commands", "commands_contain", "advice", "subject", "lacks"}


class CaseError(Exception):
    """A case file that cannot be read as a case."""


@dataclass
class Case:
    check: str
    facts: Facts
    checks: CheckOptions
    provider: ProviderInfo | None
    policy: EffectivePolicy | None
    findings: list[dict[str, Any]]
    absent: list[str] = field(default_factory=list)
    # The other pods of the run, judged with the case's pod by finish_hosts (fleet checks).
    fleet: list[Facts] = field(default_factory=list)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _unknown_keys(data: Any, value: Any, where: str) -> list[str]:
    """Keys of `data` that the validated `value` has no field for (the models ignore them)."""
    if isinstance(value, BaseModel) and isinstance(data, dict):
        fields = type(value).model_fields
        found = [f"{where}{key}" for key in data if key not in fields]
        for key in data:
            if key in fields:
                found += _unknown_keys(data[key], getattr(value, key), f"{where}{key}.")
        return found
    if isinstance(value, list) and isinstance(data, list):
        return [key for i, (d, v) in enumerate(zip(data, value)) for key in _unknown_keys(d, v, f"{where}{i}.")]
    if isinstance(value, dict) and isinstance(data, dict):
        return [key for k in data if k in value for key in _unknown_keys(data[k], value[k], f"{where}{k}.")]
    return []


def _model(cls: type[BaseModel], data: Any, what: str) -> Any:
    try:
        value = cls.model_validate(data)
    except ValidationError as exc:
        raise CaseError(f"{what}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    unknown = _unknown_keys(data, value, "")
    if unknown:
        raise CaseError(f"{what}: unknown key {unknown[0]}")
    return value


def _expected_finding(entry: Any, check: str, index: int) -> dict[str, Any]:
    where = f"findings[{index}]"
    if not isinstance(entry, dict):
        raise CaseError(f"{where} is not an object")
    if set(entry) - FINDING_KEYS:
        raise CaseError(f"{where}: unknown key {sorted(set(entry) - FINDING_KEYS)[0]}")
    if entry.get("check") != check:
        raise CaseError(f"{where}: check must be {check!r}, the case's folder, not {entry.get('check')!r}")
    if entry.get("severity") not in {s.value for s in Severity}:
        raise CaseError(f"{where}: severity must be one of {', '.join(s.value for s in Severity)}")
    for key in ("message", "commands", "commands_contain", "lacks"):
        if key in entry and not _strings(entry[key]):
            raise CaseError(f"{where}: {key} must be a list of strings")
    if "advice" in entry and entry["advice"] is not None and not _strings(entry["advice"]):
        raise CaseError(f"{where}: advice must be a list of strings, or null for no advice")
    if "subject" in entry and entry["subject"] is not None and not isinstance(entry["subject"], str):
        raise CaseError(f"{where}: subject must be a string or null")
    return entry


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def load_case(path: Path) -> Case:
    check = path.parent.name
    if check not in CHECK_IDS:
        raise CaseError(f"{path.parent.name}/ is not a check id (computefence.evaluate.CHECKS)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CaseError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CaseError("a case is a JSON object")
    if set(data) - CASE_KEYS:
        raise CaseError(f"unknown key {sorted(set(data) - CASE_KEYS)[0]}")
    if not isinstance(data.get("about"), str) or not data["about"].strip():
        raise CaseError("about: say in a line what the case pins")
    base_facts: dict[str, Any] = {}
    if "base" in data:
        base = BASES / f"{data['base']}.json"
        if not isinstance(data["base"], str) or "/" in data["base"] or not base.is_file():
            raise CaseError(f"base {data['base']!r}: no such file in {BASES.name}/")
        base_facts = json.loads(base.read_text(encoding="utf-8"))
    facts = merge_patch(base_facts, data.get("facts", {})) if "base" in data else data.get("facts", {})
    fleet = data.get("fleet", [])
    if not isinstance(fleet, list) or not all(isinstance(pod, dict) for pod in fleet):
        raise CaseError("fleet: a list of the other pods' facts (patches on the base)")
    if (check in FLEET_CHECKS) != bool(fleet):
        raise CaseError(f"fleet: give the other pods for {', '.join(sorted(FLEET_CHECKS))} cases, and only for them")
    findings = data.get("findings", [])
    if not isinstance(findings, list) or (not findings) == (data.get("no_findings") is not True):
        raise CaseError('give the expected "findings" (a non-empty list), or "no_findings": true, not both')
    absent = data.get("absent", [])
    if not _strings(absent) or set(absent) - CHECK_IDS or check in absent:
        raise CaseError("absent: a list of other check ids that must give no finding")
    return Case(
        check=check,
        facts=_model(Facts, facts, "facts"),
        checks=_model(CheckOptions, data.get("checks", {}), "checks"),
        provider=_model(ProviderInfo, data["provider"], "provider") if "provider" in data else None,
        policy=_model(EffectivePolicy, data["policy"], "policy") if "policy" in data else None,
        findings=[_expected_finding(entry, check, i) for i, entry in enumerate(findings)],
        absent=absent,
        fleet=[_model(Facts, merge_patch(base_facts, pod), f"fleet[{i}]") for i, pod in enumerate(fleet)],
    )


def mismatches(case: Case, findings: list[Finding]) -> list[str]:
    """How the evaluator's findings differ from what the case expects (empty: they agree).

    The findings of the case's check, in the evaluator's order, pair one to one with the
    expected ones: check and severity exactly, every `message` and `advice` text as a substring,
    `commands` as the exact list (they are pasted in order), every `commands_contain` text
    somewhere in them, `subject` exactly, and no `lacks` text in the message or the fix."""
    got = [f for f in findings if f.check == case.check]
    problems = []
    if len(got) != len(case.findings):
        problems.append(f"{len(got)} {case.check} finding(s), expected {len(case.findings)}: {got}")
    for index, (finding, want) in enumerate(zip(got, case.findings)):
        where = f"findings[{index}]"
        commands = finding.fix.commands if finding.fix else []
        advice = finding.fix.advice if finding.fix else None
        if finding.severity.value != want["severity"]:
            problems.append(f"{where}: severity {finding.severity.value}, expected {want['severity']}")
        problems += [
            f"{where}: message lacks {t!r}: {finding.message!r}"
            for t in want.get("message", [])
            if t not in finding.message
        ]
        if "commands" in want and commands != want["commands"]:
            problems.append(f"{where}: commands {commands}, expected {want['commands']}")
        problems += [
            f"{where}: no command holds {t!r}: {commands}"
            for t in want.get("commands_contain", [])
            if not any(t in command for command in commands)
        ]
        if "advice" in want:
            if want["advice"] is None and advice is not None:
                problems.append(f"{where}: advice {advice!r}, expected none")
            problems += [
                f"{where}: advice lacks {t!r}: {advice!r}" for t in want["advice"] or [] if t not in (advice or "")
            ]
        texts = [finding.message, *commands, advice or ""]
        problems += [
            f"{where}: {t!r} is in the message or fix: {texts}"
            for t in want.get("lacks", [])
            if any(t in x for x in texts)
        ]
        if "subject" in want and finding.subject != want["subject"]:
            problems.append(f"{where}: subject {finding.subject!r}, expected {want['subject']!r}")
    if not case.findings and not [f for f in findings if f.check != case.check]:
        # "no_findings" must not pass on facts that nothing judged.
        problems.append("no finding at all: the facts were not judged")
    problems += [
        f"{check} gave {[f for f in findings if f.check == check]}"
        for check in case.absent
        if any(f.check == check for f in findings)
    ]
    return problems


def run_case(case: Case) -> list[Finding]:
    if not case.fleet:
        return evaluate_host(case.facts, case.checks, case.provider, case.policy)
    # One run: every pod judged alone, then the fleet-wide findings, as fleet check does.
    pods = [("pod", case.facts, case.provider), *((f"other-{i}", f, None) for i, f in enumerate(case.fleet, 1))]
    hosts = [
        judge_host(HostReport(name=name, status=HostStatus.OK, facts=facts), case.checks, provider, case.policy)
        for name, facts, provider in pods
    ]
    policies = {name: case.policy for name, _, _ in pods} if case.policy is not None else {}
    finished = finish_hosts(hosts, policies, None, only=[], skip=[])
    return next(h for h in finished if h.name == "pod").findings


CASE_FILES = sorted(p for p in CASES.glob("*/*.json") if p.parent != BASES)


@pytest.mark.parametrize("path", CASE_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in CASE_FILES])
def test_case(path):
    try:
        case = load_case(path)
    except CaseError as exc:
        pytest.fail(f"{path.relative_to(CASES)}: {exc}")
    problems = mismatches(case, run_case(case))
    assert not problems, "\n".join(problems)


def test_every_entry_under_cases_is_a_check_folder_of_case_files():
    stray = [
        p.name
        for p in CASES.iterdir()
        if p != BASES and p.name != "README.md" and not (p.is_dir() and p.name in CHECK_IDS)
    ]
    stray += [str(p.relative_to(CASES)) for p in CASES.glob("*/*") if p.parent != BASES and p.suffix != ".json"]
    assert stray == []
    assert CASE_FILES, "no case files found"


# ---------------------------------------------------------------- the harness itself


def _write_case(tmp_path: Path, check: str, data: Any) -> Path:
    path = tmp_path / check / "case.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


SHM_PASS = {
    "about": "a pod's 30 GB /dev/shm passes",
    "base": "runpod-pod",
    "findings": [{"check": "system.shm", "severity": "pass", "message": ["/dev/shm is 30.0 GB"]}],
}


@pytest.mark.parametrize(
    ("check", "data", "error"),
    [
        ("system.shmm", SHM_PASS, "is not a check id"),
        ("system.shm", "{not json", "not JSON"),
        ("system.shm", [SHM_PASS], "a case is a JSON object"),
        ("system.shm", {**SHM_PASS, "expect": []}, "unknown key expect"),
        ("system.shm", {**SHM_PASS, "about": ""}, "about"),
        ("system.shm", {**SHM_PASS, "base": "no-such-pod"}, "no such file"),
        ("system.shm", {**SHM_PASS, "findings": []}, "no_findings"),
        ("system.shm", {**SHM_PASS, "no_findings": True}, "not both"),
        ("system.shm", {**SHM_PASS, "findings": [{"check": "system.shm", "severity": "fail"}]}, "severity"),
        ("system.shm", {**SHM_PASS, "findings": [{"check": "gpu.driver", "severity": "pass"}]}, "case's folder"),
        ("system.shm", {**SHM_PASS, "findings": [{"check": "system.shm", "severity": "pass", "mesage": []}]}, "mesage"),
        ("system.shm", {**SHM_PASS, "findings": [{"check": "system.shm", "severity": "pass", "message": "x"}]}, "list"),
        ("system.shm", {**SHM_PASS, "facts": {"gpu": {"gpuz": []}}}, "unknown key gpu.gpuz"),
        (
            "system.shm",
            {**SHM_PASS, "facts": {"storage": {"paths": [{"role": "shm", "path": "/dev/shm", "rol": "x"}]}}},
            "storage.paths.0.rol",
        ),
        ("system.shm", {**SHM_PASS, "checks": {"expect_gpus": True}}, "checks"),
        ("system.shm", {**SHM_PASS, "absent": ["gpu.nope"]}, "absent"),
    ],
)
def test_a_case_that_cannot_be_read_exactly_is_refused(tmp_path, check, data, error):
    with pytest.raises(CaseError, match=error):
        load_case(_write_case(tmp_path, check, data))


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"severity": "warn"}, "severity pass, expected warn"),
        ({"message": ["/dev/shm is 64 MB"]}, "message lacks"),
        ({"commands": ["mount -o remount,size=64G /dev/shm"]}, "commands [], expected"),
        ({"advice": ["--shm-size"]}, "advice lacks"),
        ({"subject": "/dev/shm2"}, "subject"),
    ],
)
def test_a_case_whose_expectation_is_wrong_fails(tmp_path, change, complaint):
    data = {**SHM_PASS, "findings": [{**SHM_PASS["findings"][0], **change}]}
    case = load_case(_write_case(tmp_path, "system.shm", data))
    assert any(complaint in problem for problem in mismatches(case, run_case(case)))


def test_no_findings_fails_when_the_check_gives_one_or_nothing_was_judged(tmp_path):
    case = load_case(_write_case(tmp_path, "system.shm", {**SHM_PASS, "findings": [], "no_findings": True}))
    assert mismatches(case, run_case(case))[0].startswith("1 system.shm finding(s), expected 0")
    assert mismatches(case, []) == ["no finding at all: the facts were not judged"]
