"""The rules the job's policy states, against a host's facts: policy.requirement,
policy.hardware and its custom.<id> checks (checks.custom), then the policy's severities and
skips over every finding. Pure: facts and policy in, findings out."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from computefence.evaluate.checks.custom import check_custom
from computefence.evaluate.context import (
    Context,
    Rule,
    block,
    collector_error,
    first_path,
    gb,
    passed,
    q,
    training_python,
    warn,
)
from computefence.evaluate.fingerprint import smallest_gpu_memory, whole_gb
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.evaluate.torch_builds import (
    choose_build,
    cuda_text,
    driver_cuda,
    install_command,
    parse_cuda,
    parse_version,
    pip_install,
)
from computefence.models import Facts, Finding, Fix, FixStep, Severity
from computefence.policy import SPECIAL_REQUIREMENTS, EffectivePolicy, NumberSpec, Requirement, matches, normalize_name
from computefence.text import one_line, plural

CHECKS: dict[str, CheckSpec] = {
    "policy.requirement": CheckSpec(
        "every version the policy requires is installed and satisfies its specifier", Remedy.FIX
    ),
    "policy.hardware": CheckSpec("the GPUs, disk and shared memory are what the policy expects", Remedy.REPLACE),
}
REQUIREMENT = "policy.requirement"
HARDWARE = "policy.hardware"
_SEVERITY = {"block": Severity.BLOCK, "warn": Severity.WARN}
# Judged with the policy (policy_findings), which no rule of one host's facts alone sees.
RULES: tuple[Rule, ...] = ()


# ---------------------------------------------------------------- requirements


def _installed(facts: Facts, name: str, versions: dict[str, str | None]) -> tuple[bool, str | None, str | None]:
    """(collected, version, why not collected) of a requirement's subject on this host."""
    torch, gpu = facts.torch, facts.gpu
    if name == "python":
        return (
            torch.python_version is not None,
            torch.python_version,
            f"the training interpreter {torch.python} did not run",
        )
    if name == "torch-cuda":
        if not torch.importable:
            return (
                torch.python_found and not torch.timed_out,
                None,
                one_line(torch.import_error, 160) or "torch did not import",
            )
        return True, torch.cuda_build, None
    if name in ("nvidia-driver", "driver-cuda"):
        version = gpu.driver_version if name == "nvidia-driver" else gpu.cuda_version
        # A GPU collector that never answered is no evidence of a machine without a driver.
        unanswered = collector_error(facts, "gpu") is not None or gpu.timed_out
        return (
            version is not None or not (gpu.nvidia_smi_found or gpu.device_nodes or unanswered),
            version,
            "nvidia-smi did not answer",
        )
    if name == "glibc":
        return facts.identity.glibc is not None, facts.identity.glibc, "the glibc version was not found"
    if name == "torch" and torch.importable and torch.version:
        return True, torch.version, None
    if name in versions:
        return True, versions[name], None
    why = facts.packages.error or "this probe did not look the package up"
    return False, None, one_line(why, 160)


def _title(name: str) -> str:
    return SPECIAL_REQUIREMENTS.get(name, name)


def satisfies(spec: SpecifierSet, version: str) -> bool | None:
    try:
        return spec.contains(Version(version), prereleases=True)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        return None


def check_requirement(
    facts: Facts, name: str, requirement: Requirement, ctx: Context, versions: dict[str, str | None]
) -> Finding:
    """Exactly one finding per requirement: a pass, or why it is not met (`versions`: the
    host's package versions by PEP 503 name)."""
    collected, version, why = _installed(facts, name, versions)
    title = _title(name)
    wanted = "any version" if requirement.any_version else requirement.spec
    if not collected:
        return warn(
            REQUIREMENT,
            f"{title} could not be checked against {wanted}: {why}",
            Fix(commands=["computefence doctor --format json"], advice="on the pod, shows what the probe collected"),
            subject=name,
        )
    if version is None:
        return block(
            REQUIREMENT, _missing_message(facts, name, wanted), _fix(facts, name, requirement, ctx), subject=name
        )
    if requirement.any_version:
        return passed(REQUIREMENT, f"{title} {version} is installed", subject=name)
    ok = satisfies(requirement.specifier(), version)
    if name in ("driver-cuda", "torch-cuda") and parse_cuda(version) is None:
        ok = None  # "99999999999999999999.1" is PEP 440, but no CUDA release: unknown, never a pass
    if ok:
        return passed(REQUIREMENT, f"{title} {version} satisfies {requirement.spec}", subject=name)
    reason = (
        ("is not a CUDA version" if name in ("driver-cuda", "torch-cuda") else "is not a PEP 440 version")
        if ok is None
        else "does not satisfy"
    )
    return block(
        REQUIREMENT, f"{title} {version} {reason} {requirement.spec}", _fix(facts, name, requirement, ctx), subject=name
    )


def _missing_message(facts: Facts, name: str, wanted: str) -> str:
    if name == "torch-cuda":
        return f"torch {facts.torch.version or ''} is a CPU build; the policy requires CUDA {wanted}".replace("  ", " ")
    if name in ("nvidia-driver", "driver-cuda"):
        return f"no NVIDIA driver on this machine; the policy requires {_title(name)} {wanted}"
    return f"{_title(name)} is not installed in {facts.torch.python}; the policy requires {wanted}"


def _lowest(spec: SpecifierSet) -> tuple[int, ...] | None:
    """The lowest version a specifier lets through, as far as its bounds say."""
    parsed = [parse_version(s.version) for s in spec if s.operator in (">=", ">", "==", "~=", "===")]
    bounds = [b for b in parsed if b]
    return max(bounds) if bounds else None


def _fix(facts: Facts, name: str, requirement: Requirement, ctx: Context) -> Fix:
    python = training_python(facts)
    if name in ("nvidia-driver", "driver-cuda"):
        return _driver_fix(requirement, ctx)
    if name == "torch-cuda":
        low = _lowest(requirement.specifier())
        choice = choose_build(
            facts.torch.version, facts.gpu.cuda_version, (low[0], low[1] if len(low) > 1 else 0) if low else None
        )
        if choice is None:
            return _driver_fix(Requirement(spec=f">={cuda_text(low)}") if low else requirement, ctx, cuda=True)
        requirement_text, tag = choice
        return Fix(steps=[FixStep.safe(install_command(python, requirement_text, tag, replace=True))])
    if name == "python":
        return Fix(
            advice=f"no pip install changes Python: use an image with Python {requirement.spec} "
            "(or point --python at one)"
        )
    if name == "glibc":
        return Fix(advice=f"glibc comes with the OS image: use an image whose glibc is {requirement.spec}")
    target = name if requirement.any_version else f"{name}{requirement.spec}"
    return Fix(steps=[FixStep.safe(pip_install(python, target))])


def _driver_fix(requirement: Requirement, ctx: Context, cuda: bool = False) -> Fix:
    low = _lowest(requirement.specifier())
    needed = (cuda_text(low) if cuda else driver_cuda(low)) if low else None
    advice = ctx.profile.advice
    words = (
        advice.newer_driver.format(cuda=needed)
        if needed and advice.newer_driver
        else f"use a machine whose NVIDIA driver satisfies {requirement.spec}"
    )
    if needed and advice.driver_search:
        return Fix(steps=[FixStep.local(advice.driver_search.format(cuda=needed))], advice=words)
    return Fix(advice=words)


def check_requirements(facts: Facts, policy: EffectivePolicy, ctx: Context) -> list[Finding]:
    versions = {normalize_name(k): v for k, v in facts.packages.versions.items()}
    return [
        check_requirement(facts, name, requirement, ctx, versions)
        for name, requirement in policy.requirement_specs().items()
    ]


# ---------------------------------------------------------------- hardware


def _gpu_names(facts: Facts) -> list[str]:
    if facts.gpu.gpus:
        return [g.name for g in facts.gpu.gpus]
    return [d.name or "?" for d in facts.torch.devices]


def _size_check(key: str, what: str, spec: NumberSpec, n_bytes: int | None, fix: Fix) -> Finding:
    if n_bytes is None:
        return warn(HARDWARE, f"{what} was not collected; the policy expects {key} {spec.text}", fix, subject=key)
    value = n_bytes / 1e9
    if spec.satisfied_by(value):
        return passed(HARDWARE, f"{what}: {gb(n_bytes)} ({key} {spec.text})", subject=key)
    return block(HARDWARE, f"{what}: {gb(n_bytes)}, the policy expects {key} {spec.text}", fix, subject=key)


def _gpu_memory_check(facts: Facts, spec: NumberSpec, fix: Fix) -> Finding:
    """gpu_memory_gb against the smallest GPU, in the whole GB that policy init writes and the lock records."""
    key = "gpu_memory_gb"
    memory = smallest_gpu_memory(facts)
    if memory is None:
        return warn(HARDWARE, f"GPU memory was not collected; the policy expects {key} {spec.text}", fix, subject=key)
    n_bytes, mib = memory
    value = whole_gb(n_bytes)
    shown = f"{value} GB (10^9 bytes; {mib} MiB)" if mib is not None else f"{value} GB (10^9 bytes)"
    if spec.satisfied_by(value):
        return passed(HARDWARE, f"smallest GPU memory: {shown} ({key} {spec.text})", subject=key)
    return block(HARDWARE, f"smallest GPU memory: {shown}, the policy expects {key} {spec.text}", fix, subject=key)


def check_hardware(facts: Facts, policy: EffectivePolicy, ctx: Context) -> list[Finding]:
    hardware = policy.hardware
    found: list[Finding] = []
    names = _gpu_names(facts)
    redeploy = Fix(advice="the GPUs come with the machine: redeploy on one that has what the policy expects")
    if not names and ctx.gpu_present and (hardware.gpu_model is not None or hardware.gpu_count is not None):
        # A GPU is there but nothing could list it: gpu.driver blocks with the cause; say so once.
        expected = [f"gpu_model {hardware.gpu_model}"] if hardware.gpu_model is not None else []
        if hardware.gpu_count is not None:
            expected.append(f"gpu_count {hardware.gpu_count.text}")
        expects = ", ".join(expected)
        found.append(
            block(
                HARDWARE,
                f"the GPUs could not be listed (see gpu.driver); the policy expects {expects}",
                Fix(commands=["nvidia-smi -L"]),
                subject="gpus",
            )
        )
        hardware = hardware.model_copy(update={"gpu_model": None, "gpu_count": None})
    if hardware.gpu_model is not None:
        pattern = hardware.gpu_model.lower()
        odd = sorted({n for n in names if not fnmatch.fnmatchcase(n.lower(), pattern)})
        if names and not odd:
            found.append(passed(HARDWARE, f"GPU model {names[0]} matches {hardware.gpu_model}", subject="gpu_model"))
        else:
            have = ", ".join(odd) if odd else "no GPU"
            found.append(
                block(HARDWARE, f"GPU model {have} does not match {hardware.gpu_model}", redeploy, subject="gpu_model")
            )
    if hardware.gpu_count is not None:
        count = len(names)
        if hardware.gpu_count.satisfied_by(count):
            found.append(
                passed(HARDWARE, f"{plural(count, 'GPU')} (gpu_count {hardware.gpu_count.text})", subject="gpu_count")
            )
        else:
            found.append(
                block(
                    HARDWARE,
                    f"{count} GPU{'' if count == 1 else 's'} here, the policy expects "
                    f"gpu_count {hardware.gpu_count.text}",
                    redeploy,
                    subject="gpu_count",
                )
            )
    if hardware.gpu_memory_gb is not None:
        found.append(_gpu_memory_check(facts, hardware.gpu_memory_gb, redeploy))
    if hardware.disk_free_gb is not None:
        place = first_path(facts, "output_dir") or first_path(facts, "workspace") or first_path(facts, "volume")
        where = f"free on {place.path}" if place is not None else "free space where checkpoints go (no output_dir set)"
        grow = ctx.profile.advice.grow_volume
        fix = Fix(
            commands=[
                f"du -xh -d 2 {q(place.path)} 2>/dev/null | sort -h | tail -n 15"
                if place
                else "computefence doctor --output-dir /path/to/checkpoints"
            ],
            advice="delete what is not needed" + (f" {grow}" if grow else ""),
        )
        found.append(
            _size_check(
                "disk_free_gb", where, hardware.disk_free_gb, place.free_bytes if place is not None else None, fix
            )
        )
    if hardware.shm_gb is not None:
        shm = first_path(facts, "shm")
        fix = Fix(advice="recreate the container with a larger --shm-size (or --ipc=host)")
        found.append(
            _size_check("shm_gb", "/dev/shm size", hardware.shm_gb, shm.total_bytes if shm is not None else None, fix)
        )
    return found


# ---------------------------------------------------------------- the policy over all findings


def policy_findings(facts: Facts, policy: EffectivePolicy, ctx: Context) -> list[Finding]:
    """The policy's own findings: its requirements and hardware, then its custom checks."""
    return [*check_requirements(facts, policy, ctx), *check_hardware(facts, policy, ctx), *check_custom(facts, policy)]


def severity_for(finding: Finding, severity: Mapping[str, str]) -> str | None:
    """The policy's severity for a finding: `check.subject` (e.g. env.drift.torch-cuda or
    policy.requirement.transformers) before `check` before an area or glob."""
    if finding.subject is not None and f"{finding.check}.{finding.subject}" in severity:
        return severity[f"{finding.check}.{finding.subject}"]
    if finding.check in severity:
        return severity[finding.check]
    for pattern, level in severity.items():
        if matches(finding.check, pattern):
            return level
    return None


def apply_policy(findings: list[Finding], policy: EffectivePolicy) -> list[Finding]:
    """The policy's `severity` and `skip` over a host's findings; "ignore" drops one."""
    result = []
    for finding in findings:
        if any(matches(finding.check, pattern) for pattern in policy.skip):
            continue
        level = severity_for(finding, policy.severity)
        if level == "ignore":
            continue
        if level is not None and finding.severity in (Severity.WARN, Severity.BLOCK):
            finding = finding.model_copy(update={"severity": _SEVERITY[level]})
        result.append(finding)
    return result
