"""env.drift (a pod against the baseline lock) and env.outlier (the odd pod out of a fleet),
and the lock itself: the fingerprint of the pods that worked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from packaging.version import Version

from computefence.errors import ConfigError
from computefence.evaluate.checks.policy_rules import satisfies
from computefence.evaluate.context import Rule, block, passed, training_python, warn
from computefence.evaluate.fingerprint import fingerprint, is_package, label, outlier_fields
from computefence.evaluate.fleet import NOT_INSTALLED
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.evaluate.torch_builds import build_misfit, install_command, parse_cuda, pip_install, pip_packages
from computefence.models import BaselineLock, Facts, Finding, Fix, FixStep, HostReport, HostStatus, Severity
from computefence.policy import Requirement
from computefence.text import one_line
from computefence.version import __version__

CHECKS: dict[str, CheckSpec] = {
    "env.drift": CheckSpec("the pod's versions and hardware match the baseline lock", Remedy.FIX),
    "env.outlier": CheckSpec("the pod's torch, Python and packages match the fleet's majority", Remedy.FIX),
}
DRIFT, OUTLIER = "env.drift", "env.outlier"
# Judged across the fleet (environment_findings, from evaluate.finish_hosts), not from one host's facts.
RULES: tuple[Rule, ...] = ()
# Fields a lock leaves out: derived from another one.
_DERIVED = ("python-minor",)


def _checked(hosts: list[HostReport]) -> list[HostReport]:
    return [h for h in hosts if h.status is HostStatus.OK and h.facts is not None]


def _facts(host: HostReport) -> Facts:
    """The facts of a host that _checked kept."""
    assert host.facts is not None
    return host.facts


# ---------------------------------------------------------------- the lock


def build_lock(hosts: list[HostReport], from_pod: str | None = None) -> BaselineLock:
    """Each field's majority value over the checked pods, or one pod's values with --from."""
    checked = _checked(hosts)
    if not checked:
        raise ConfigError("no pod could be checked: nothing to record in a baseline")
    prints = {h.name: {k: v for k, v in fingerprint(_facts(h)).items() if k not in _DERIVED} for h in checked}
    if from_pod is not None:
        if from_pod not in prints:
            names = ", ".join(sorted(prints))
            raise ConfigError(f"--from {from_pod}: not among the pods checked ({names})")
        reference = prints[from_pod]
    else:
        fields: list[str] = []
        for values in prints.values():
            fields += [f for f in values if f not in fields]
        reference = {}
        for field in fields:
            counts = Counter(values[field] for values in prints.values() if field in values)
            # Ties go to the value seen first, so the lock does not depend on dict order.
            reference[field] = max(counts, key=lambda value: counts[value])
    differing: dict[str, dict[str, str]] = {}
    for field, value in reference.items():
        odd = {pod: values[field] for pod, values in sorted(prints.items()) if values.get(field, value) != value}
        if odd:
            differing[field] = odd
    return BaselineLock(
        tool_version=__version__,
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        reference="majority" if from_pod is None else f"pod {from_pod}",
        pods=sorted(prints),
        fingerprint=reference,
        differing=dict(sorted(differing.items())),
    )


def differing_lines(lock: BaselineLock) -> list[str]:
    """What a snapshot prints: each field on which pods disagree, and who has what."""
    lines = []
    for field, pods in lock.differing.items():
        odd = ", ".join(f"{pod} {value}" for pod, value in pods.items())
        lines.append(f"{label(field)}: recorded {lock.fingerprint[field]}; differs on {odd}")
    return lines


# ---------------------------------------------------------------- env.drift


def _torch_tag(cuda_build: str) -> str | None:
    """download.pytorch.org's index for a build: 'cu124' for '12.4', 'cpu' for 'CPU'."""
    if cuda_build == "CPU":
        return "cpu"
    version = parse_cuda(cuda_build)
    return f"cu{version[0]}{version[1]}" if version else None


def match_fix(
    facts: Facts,
    wanted: Mapping[str, str],
    others: Sequence[Finding] = (),
    requirements: Mapping[str, Requirement] | None = None,
    whose: str = "the baseline's",
) -> Fix:
    """Commands that give this pod the `wanted` values (field -> value) where pip can, and
    words for what comes with the image or the machine. A value gets no command where the
    evaluator knows it cannot serve this pod: a torch build its driver or GPUs cannot run, a
    version the pod's policy `requirements` refuse, or a package that another of the pod's
    findings (`others`) already installs, so a pod's script never holds two installs of one
    package."""
    python = training_python(facts)
    requirements = requirements or {}
    elsewhere = _installed_elsewhere(others)
    commands: list[FixStep] = []
    held: list[str] = []
    torch_fields = {k: v for k, v in wanted.items() if k in ("torch", "torch-cuda")}
    if torch_fields and NOT_INSTALLED not in torch_fields.values():
        current = fingerprint(facts)
        version = torch_fields.get("torch", current.get("torch", "")).split("+")[0]
        build = torch_fields.get("torch-cuda", current.get("torch-cuda", ""))
        tag = _torch_tag(build)
        why = _held_back(facts, "torch", torch_fields, build, elsewhere, requirements, others, whose)
        if why:
            held.append(why)
        elif version and version != NOT_INSTALLED and tag:
            commands.append(FixStep.safe(install_command(python, f"torch=={version}", tag, replace=True)))
    packages = []
    for field, value in wanted.items():
        if not is_package(field) or value == NOT_INSTALLED:
            continue
        why = _held_back(facts, field, {field: value}, None, elsewhere, requirements, others, whose)
        if why:
            held.append(why)
        else:
            packages.append(f"{field}=={value}")
    if packages:
        commands.append(FixStep.safe(pip_install(python, *packages)))
    handled = {"torch", "torch-cuda"} if commands or held else set()
    others_words = [label(k) for k in wanted if not is_package(k) and k not in handled]
    notes = [*held]
    if others_words:
        notes.append(f"{', '.join(others_words)}: comes with the image or the machine; redeploy on one that matches")
    note = "; ".join(notes) or None
    if commands:
        return Fix(steps=commands, advice=note)
    return Fix(advice=note or "redeploy from the image the reference pod ran")


def _installed_elsewhere(others: Sequence[Finding]) -> dict[str, str]:
    """Package -> the check id of another warning or blocker of the pod whose fix installs it."""
    found: dict[str, str] = {}
    for finding in others:
        if finding.severity in (Severity.WARN, Severity.BLOCK) and finding.check not in (DRIFT, OUTLIER):
            for package in pip_packages(finding.fix):
                found.setdefault(package, finding.check)
    return found


def _held_back(
    facts: Facts,
    package: str,
    values: Mapping[str, str],
    build: str | None,
    elsewhere: Mapping[str, str],
    requirements: Mapping[str, Requirement],
    others: Sequence[Finding],
    whose: str,
) -> str | None:
    """Why `values` (field -> value, all of one package) get no command on this pod, or None."""
    if build is not None:
        kind = "CPU-only" if build == "CPU" else build if build.startswith("ROCm") else f"CUDA {build}"
        version = values.get("torch", "").split("+")[0] or (facts.torch.version or "").split("+")[0]
        shown = " ".join(word for word in ("torch", version, f"({kind} build)") if word)
        misfit = build_misfit(facts, build)
        if misfit:
            failing = [f.check for f in others if f.severity is Severity.BLOCK and f.check.startswith("gpu.")]
            see = f" (see {', '.join(dict.fromkeys(failing))})" if failing else ""
            return f"{whose} {shown} cannot run here: {misfit}; no command on this pod helps{see}"
    for field, value in values.items():
        # A lock or a pod can hold any text; only a PEP 440 version makes a pip requirement.
        if (field == "torch" or is_package(field)) and not _is_version(value):
            return (
                f"{whose} {label(field)} {one_line(value, 60)!r} is not a PEP 440 version: no pip command installs it"
            )
    for field, value in values.items():
        requirement = requirements.get(field)
        if requirement is not None and not requirement.any_version:
            if not satisfies(requirement.specifier(), value):
                return (
                    f"{label(field)} {value} does not satisfy the policy's {field}{requirement.spec}: "
                    "installing it here would break the policy (see policy.requirement)"
                )
    if package in elsewhere:
        return f"{elsewhere[package]}'s fix already installs {package} on this pod: run that one, not a second install"
    return None


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        return False
    return True


def drift_finding(
    host: HostReport,
    lock: BaselineLock,
    severity: Mapping[str, str],
    requirements: Mapping[str, Requirement] | None = None,
) -> Finding:
    """One env.drift finding for a pod: every field that moved, old -> new."""
    values = fingerprint(_facts(host))
    moved = [
        (field, old, values[field])
        for field, old in lock.fingerprint.items()
        if field in values and values[field] != old
    ]
    if not moved:
        return passed(DRIFT, f"matches the baseline ({len(lock.fingerprint)} fields)")
    message = "; ".join(f"{label(field)} {old} → {new}" for field, old, new in moved)
    raised = any(severity.get(f"{DRIFT}.{field}") == "block" for field, _, _ in moved)
    kept = [m for m in moved if severity.get(f"{DRIFT}.{m[0]}") != "ignore"]
    if not kept:
        return passed(DRIFT, f"matches the baseline except fields the policy ignores ({message})")
    if len(kept) != len(moved):
        message = "; ".join(f"{label(field)} {old} → {new}" for field, old, new in kept)
    finding = block if raised else warn
    return finding(
        DRIFT,
        f"differs from the baseline: {message}",
        match_fix(_facts(host), {f: old for f, old, _ in kept}, host.findings, requirements),
    )


# ---------------------------------------------------------------- env.outlier


def outlier_findings(
    hosts: list[HostReport], requirements: Mapping[str, Mapping[str, Requirement]] | None = None
) -> dict[str, list[Finding]]:
    """Pod name -> env.outlier warnings, where >= 3 pods were checked and a strict majority
    of them agrees on a field the job imports (torch, its CUDA build, Python minor, packages).
    `requirements`: pod name -> its policy's requirements, which a suggested version must meet."""
    requirements = requirements or {}
    checked = _checked(hosts)
    found: dict[str, list[Finding]] = {}
    if len(checked) < 3:
        return found
    prints = {h.name: outlier_fields(fingerprint(_facts(h))) for h in checked}
    fields: list[str] = []
    for values in prints.values():
        fields += [f for f in values if f not in fields]
    majority: dict[str, tuple[str, int]] = {}
    for field in fields:
        counts = Counter(values[field] for values in prints.values() if field in values)
        value, count = counts.most_common(1)[0]
        if count * 2 > len(checked) and len(counts) > 1:
            majority[field] = (value, count)
    for field, (value, count) in majority.items():
        for host in checked:
            mine = prints[host.name].get(field)
            # torch missing altogether is python.torch-missing's blocker; no second word on it.
            if mine is None or mine == value or (mine == NOT_INSTALLED and not is_package(field)):
                continue
            # "torch 2.5.1+cpu here" already names the CUDA build; one warning, not two.
            if (
                field == "torch-cuda"
                and "torch" in majority
                and prints[host.name].get("torch") not in (None, NOT_INSTALLED, majority["torch"][0])
            ):
                continue
            # A torch fix installs the majority's whole build (version and CUDA index), never half of it.
            wanted: dict[str, str] = (
                {k: majority[k][0] for k in ("torch", "torch-cuda") if k in majority}
                if field in ("torch", "torch-cuda")
                else {field: value}
            )
            fix = match_fix(_facts(host), wanted, host.findings, requirements.get(host.name), "the fleet's")
            found.setdefault(host.name, []).append(
                warn(
                    OUTLIER,
                    f"{label(field)} {mine} here; {count} of {len(checked)} pods have {value}",
                    fix,
                    subject=field,
                )
            )
    return found


def environment_findings(
    hosts: list[HostReport],
    lock: BaselineLock | None,
    severities: Mapping[str, Mapping[str, str]],
    requirements: Mapping[str, Mapping[str, Requirement]] | None = None,
) -> dict[str, list[Finding]]:
    """Pod name -> its env.outlier and env.drift findings (severities and requirements: pod ->
    its policy's)."""
    requirements = requirements or {}
    # The odd pod out is for runs without a baseline; with one, env.drift says it per pod.
    if lock is None:
        return outlier_findings(hosts, requirements)
    found: dict[str, list[Finding]] = {}
    for host in _checked(hosts):
        found[host.name] = [drift_finding(host, lock, severities.get(host.name, {}), requirements.get(host.name))]
    return found
