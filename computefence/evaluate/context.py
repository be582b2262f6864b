"""What every rule needs to know about a host besides its raw facts, worked out once."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from computefence.evaluate.mounts import StorageMap
from computefence.evaluate.profiles import Profile, detect_provider, get_profile
from computefence.models import CheckOptions, Facts, Finding, Fix, PathFacts, ProviderInfo, Remedy, Severity
from computefence.policy import Job, NumberSpec, Thresholds


@dataclass(frozen=True)
class Context:
    provider: ProviderInfo | None
    profile: Profile
    storage: StorageMap
    # Some sign of an NVIDIA GPU: nvidia-smi, /dev/nvidia* nodes, or GPU facts that could not
    # be collected (a hung tool is not evidence of no GPU).
    gpu_present: bool
    # --expect-gpu, or the provider's API says the pod has GPUs.
    gpu_expected: bool
    # nvidia-smi answered and listed at least one GPU.
    gpu_usable: bool
    # A machine meant for GPU or torch work; on anything else (a laptop, a CI runner) the
    # pod-storage and shared-memory checks only say why they do not apply.
    ml_host: bool

    # The machine's id at its provider (from the API, else from the environment), if known.
    pod_id: str | None = None
    # The built-in checks' limits (the policy's `thresholds`, else the defaults).
    thresholds: Thresholds = Thresholds()
    # The policy's hardware.gpu_count: how many GPUs the job is meant to see, if it says.
    gpu_count: NumberSpec | None = None
    # The policy's `job:` with what its `from:` file adds: what the run trains and saves
    # (storage.budget, gpu.memory-budget), and why that file could not be used, if so.
    job: Job | None = None
    job_note: str | None = None

    @property
    def on_provider(self) -> bool:
        return self.profile.name != "generic"

    def restart_command(self) -> str | None:
        """The provider's command that restarts this machine, when it and the id are known."""
        if not self.profile.advice.restart or not self.pod_id:
            return None
        return self.profile.advice.restart.format(pod_id=q(self.pod_id))


Rule = Callable[[Facts, CheckOptions, Context], list[Finding]]


def build_context(
    facts: Facts,
    checks: CheckOptions,
    provider: ProviderInfo | None,
    thresholds: Thresholds | None = None,
    gpu_count: NumberSpec | None = None,
    job: tuple[Job | None, str | None] | Job | None = None,
) -> Context:
    name = provider.provider if provider is not None else detect_provider(facts.identity.provider_hints)
    profile = get_profile(name)
    gpu = facts.gpu
    gpu_expected = checks.expect_gpu or bool(provider is not None and provider.gpu_count)
    gpu_usable = bool(gpu.nvidia_smi_found and gpu.exit_code in (0, None) and not gpu.timed_out and gpu.gpus)
    torch_installed = facts.torch.importable or bool(facts.packages.versions.get("torch"))
    present = gpu_present(facts)
    ml_host = present or gpu_expected or profile.name != "generic" or torch_installed
    pod_id = provider.pod_id if provider is not None else None
    if pod_id is None and profile.pod_id_hint:
        pod_id = facts.identity.provider_hints.get(profile.pod_id_hint)
    return Context(
        pod_id=pod_id,
        provider=provider,
        profile=profile,
        storage=StorageMap(facts.storage.mounts, profile, provider),
        gpu_present=present,
        gpu_expected=gpu_expected,
        gpu_usable=gpu_usable,
        ml_host=ml_host,
        thresholds=thresholds or Thresholds(),
        gpu_count=gpu_count,
        job=job[0] if isinstance(job, tuple) else job,
        job_note=job[1] if isinstance(job, tuple) else None,
    )


# ---------------------------------------------------------------- fact helpers


def gpu_present(facts: Facts) -> bool:
    """Some sign of an NVIDIA GPU (Context.gpu_present)."""
    gpu = facts.gpu
    return bool(gpu.nvidia_smi_found or gpu.device_nodes or gpu.gpus) or collector_error(facts, "gpu") is not None


def timed_out(facts: Facts, name: str) -> str | None:
    """How `name`'s collector ran out of time ("`import torch` did not finish within 24.5s"),
    or None when it answered in time. The collector's own limit (its thread abandoned) and a
    limit inside it (the torch import's or package listing's subprocess) both count."""
    status = facts.collectors.get(name)
    if status is not None and status.timed_out:
        return status.error or f"did not finish within {status.duration_s:g}s"
    if name == "torch" and facts.torch.timed_out:
        return facts.torch.import_error or "`import torch` did not finish within the probe's limit"
    if name == "packages" and facts.packages.timed_out:
        return facts.packages.error or "the package versions were not listed within the probe's limit"
    return None


def collector_error(facts: Facts, name: str) -> str | None:
    """Why a collector produced no facts, or None when it ran (or was not reported)."""
    status = facts.collectors.get(name)
    if status is None or (status.ok and not status.timed_out):
        return None
    if status.error:
        return status.error
    return "timed out" if status.timed_out else "failed"


def path_facts(facts: Facts, role: str) -> list[PathFacts]:
    return [p for p in facts.storage.paths if p.role == role]


def first_path(facts: Facts, role: str) -> PathFacts | None:
    found = path_facts(facts, role)
    return found[0] if found else None


def env_by_source(facts: Facts, name: str) -> dict[str, str | None]:
    """Where a variable is set ("process", "container", "etc_environment", ...) and its value."""
    return {entry.source: entry.value for entry in facts.environment.variables.get(name, [])}


# ---------------------------------------------------------------- finding helpers


def passed(check: str, message: str, subject: str | None = None, remedy: Remedy | None = None) -> Finding:
    return Finding(check=check, severity=Severity.PASS, message=message, subject=subject, remedy=remedy)


def skipped(check: str, reason: str, subject: str | None = None) -> Finding:
    """A check that could not run or does not apply here; `reason` says which and why."""
    return Finding(check=check, severity=Severity.SKIP, message=reason, subject=subject)


def warn(check: str, message: str, fix: str | Fix, subject: str | None = None, remedy: Remedy | None = None) -> Finding:
    """`fix` is a Fix, or one command as a plain string. `remedy` overrides the check's own
    (CHECKS) for this finding only."""
    return Finding(check=check, severity=Severity.WARN, message=message, fix=fix, subject=subject, remedy=remedy)


def block(
    check: str, message: str, fix: str | Fix, subject: str | None = None, remedy: Remedy | None = None
) -> Finding:
    """`fix` is a Fix, or one command as a plain string. `remedy` overrides the check's own
    (CHECKS) for this finding only."""
    return Finding(check=check, severity=Severity.BLOCK, message=message, fix=fix, subject=subject, remedy=remedy)


def q(text: str) -> str:
    """A value made safe to paste into a shell command."""
    return shlex.quote(text)


def training_python(facts: Facts) -> str:
    """The training interpreter as the pod resolved it, for pip commands."""
    return facts.torch.python_executable or facts.torch.python or facts.packages.python


def sudo(facts: Facts) -> str:
    """'sudo ' for a non-root login, nothing for root (containers often have no sudo)."""
    return "" if facts.identity.uid == 0 or facts.identity.user == "root" else "sudo "


def gb(n_bytes: int | None) -> str:
    """Bytes in GB (10^9), as the checks' thresholds are stated."""
    if n_bytes is None:
        return "?"
    value = n_bytes / 1e9
    return f"{value:.1f} GB" if value < 100 else f"{value:.0f} GB"
