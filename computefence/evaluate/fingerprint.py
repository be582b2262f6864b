"""A machine's environment fingerprint: the versions and hardware a job depends on, as
comparable strings. The drift table, env.outlier, env.drift and the baseline lock read it."""

from __future__ import annotations

from computefence.evaluate.context import collector_error, timed_out
from computefence.evaluate.fleet import NONE, NOT_INSTALLED
from computefence.models import Facts
from computefence.policy import normalize_name

# Field key -> how a message names it. Package fields are keyed by their PEP 503 name.
LABELS: dict[str, str] = {
    "torch": "torch",
    "torch-cuda": "torch CUDA build",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "nvidia-driver": "NVIDIA driver",
    "driver-cuda": "driver CUDA",
    "python": "python",
    "glibc": "glibc",
    "os": "OS",
    "kernel": "kernel",
    "gpu-model": "GPU model",
    "gpu-count": "GPU count",
    "gpu-memory-gb": "GPU memory (whole GB of 10^9 bytes)",
}
# What a job imports: only these make a pod an outlier without a baseline. Driver, kernel,
# glibc and OS differ between rented machines as a matter of course.
OUTLIER_FIELDS = ("torch", "torch-cuda", "python-minor")


def label(field: str) -> str:
    return "python minor" if field == "python-minor" else LABELS.get(field, field)


def _torch_build(facts: Facts) -> str:
    torch = facts.torch
    if not torch.importable:
        return NOT_INSTALLED
    return torch.cuda_build or ("ROCm " + torch.hip_build if torch.hip_build else "CPU")


def fingerprint(facts: Facts) -> dict[str, str]:
    """Field -> value, in a stable order; a field whose facts were not collected is left out."""
    torch, gpu, identity = facts.torch, facts.gpu, facts.identity
    values: dict[str, str] = {}
    # A collector cut off at its time limit leaves its fields unknown, never "not installed".
    if (torch.python_found or torch.importable) and timed_out(facts, "torch") is None:
        values["torch"] = torch.version if torch.importable and torch.version else NOT_INSTALLED
        values["torch-cuda"] = _torch_build(facts)
        if torch.importable and torch.cuda_build:
            values["cudnn"] = str(torch.cudnn_version) if torch.cudnn_version else NONE
            values["nccl"] = torch.nccl_version or NONE
    if gpu.driver_version or (collector_error(facts, "gpu") is None and not gpu.timed_out):
        values["nvidia-driver"] = gpu.driver_version or NONE
        values["driver-cuda"] = gpu.cuda_version or NONE
    python = torch.python_version or identity.python_version
    if python:
        values["python"] = python
        values["python-minor"] = ".".join(python.split(".")[:2])
    if identity.glibc:
        values["glibc"] = identity.glibc
    release = identity.os_release
    if release.id or release.pretty_name:
        values["os"] = release.pretty_name or f"{release.id} {release.version_id or ''}".strip()
    if identity.kernel:
        values["kernel"] = identity.kernel
    if gpu.gpus:
        names = sorted({g.name for g in gpu.gpus})
        values["gpu-model"] = ", ".join(names)
        values["gpu-count"] = str(len(gpu.gpus))
    memory = smallest_gpu_memory(facts)
    if memory is not None:
        values["gpu-memory-gb"] = str(whole_gb(memory[0]))
    for name, version in sorted(facts.packages.versions.items() if timed_out(facts, "packages") is None else ()):
        key = normalize_name(name)
        if key != "torch":
            values[key] = version or NOT_INSTALLED
    return values


def smallest_gpu_memory(facts: Facts) -> tuple[int, int | None] | None:
    """(bytes, nvidia-smi's MiB or None) of the GPU with the least memory: nvidia-smi's
    figure, else torch's; None when neither reported one."""
    mib = [g.memory_total_mib for g in facts.gpu.gpus if g.memory_total_mib and g.memory_total_mib > 0]
    if mib:
        return min(mib) * 2**20, min(mib)
    torch = [d.total_memory_bytes for d in facts.torch.devices if d.total_memory_bytes and d.total_memory_bytes > 0]
    return (min(torch), None) if torch else None


def whole_gb(n_bytes: int) -> int:
    """GPU memory as ComputeFence states it everywhere (policy init, the lock, policy.hardware's
    gpu_memory_gb): whole GB of 10^9 bytes, like every other size here, rounded to nearest.
    An H100's 81559 MiB is 86 GB (79.6 GiB): a policy's ">=80" for an "80GB" card holds."""
    return round(n_bytes / 1e9)


def is_package(field: str) -> bool:
    return field not in LABELS and field != "python-minor"


def outlier_fields(values: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if k in OUTLIER_FIELDS or is_package(k)}
