"""Which PyTorch CUDA build fits a driver and the GPUs, and the pip commands of package fixes
(written here, and read back here to tell which packages a fix installs with which interpreter)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PipRequirement

from computefence.evaluate.context import gpu_present, q
from computefence.models import Facts, Finding, Fix, FixStep, Severity
from computefence.policy import normalize_name

INDEX_URL = "https://download.pytorch.org/whl/{tag}"

# CUDA builds published on download.pytorch.org per torch minor release. Releases newer
# than the last row are assumed to ship that row's builds.
CUDA_TAGS: dict[tuple[int, int], tuple[str, ...]] = {
    (2, 0): ("cu117", "cu118"),
    (2, 1): ("cu118", "cu121"),
    (2, 2): ("cu118", "cu121"),
    (2, 3): ("cu118", "cu121"),
    (2, 4): ("cu118", "cu121", "cu124"),
    (2, 5): ("cu118", "cu121", "cu124"),
    (2, 6): ("cu118", "cu124", "cu126"),
    (2, 7): ("cu118", "cu126", "cu128"),
    (2, 8): ("cu126", "cu128", "cu129"),
    (2, 9): ("cu126", "cu128", "cu130"),
}

# The first CUDA release whose builds carry kernels for a compute capability.
ARCH_MIN_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (8, 9): (11, 8),
    (9, 0): (11, 8),
    (10, 0): (12, 8),
    (12, 0): (12, 8),
}


# The newest CUDA each Linux driver branch runs (NVIDIA's CUDA toolkit release notes, table 3).
DRIVER_CUDA: tuple[tuple[int, str], ...] = (
    (450, "11.0"),
    (455, "11.1"),
    (460, "11.2"),
    (465, "11.3"),
    (470, "11.4"),
    (495, "11.5"),
    (510, "11.6"),
    (515, "11.7"),
    (520, "11.8"),
    (525, "12.0"),
    (530, "12.1"),
    (535, "12.2"),
    (545, "12.3"),
    (550, "12.4"),
    (555, "12.5"),
    (560, "12.6"),
    (570, "12.8"),
    (575, "12.9"),
    (580, "13.0"),
)


def driver_cuda(driver: tuple[int, ...]) -> str | None:
    """The CUDA version a driver of this branch runs: '12.4' for (550,) or (550, 54)."""
    fitting = [cuda for branch, cuda in DRIVER_CUDA if branch <= driver[0]]
    return fitting[-1] if fitting else None


# Every pod of a fleet reports the same few versions and architectures: parsed once each.
@lru_cache(maxsize=4096)
def parse_version(text: str | None) -> tuple[int, ...] | None:
    """(2, 3, 1) from '2.3.1+cu121'; (12, 4) from '12.4'; None if there is no number, or a
    part longer than 9 digits (no version has one; int() of 5,000 digits raises)."""
    if not text:
        return None
    match = re.match(r"\s*(\d{1,9}(?:\.\d{1,9})*)(?![\d.]*\d)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


# A CUDA version as nvidia-smi and torch.version.cuda print it: "12.4", "11.8", "12.4.1".
_CUDA = re.compile(r"\s*([1-9]\d?)\.(\d{1,2})(?:\.\d{1,3})?\s*")


@lru_cache(maxsize=4096)
def parse_cuda(text: str | None) -> tuple[int, int] | None:
    """(12, 4) from '12.4' or '12.4.1'; None for anything else: no number, '12.4e5', '-12.4',
    'NaN', or a major version of three digits or more (the driver's CUDA never had one). A CUDA
    version that reads as None is unknown, which no check takes as a pass."""
    match = _CUDA.fullmatch(text) if text else None
    return (int(match.group(1)), int(match.group(2))) if match else None


@lru_cache(maxsize=4096)
def parse_capability(text: str | None) -> tuple[int, int] | None:
    """(9, 0) from '9.0', 'sm_90' or '90'."""
    if not text:
        return None
    text = text.strip().lower().removeprefix("sm_").removeprefix("compute_")
    if "." in text:
        version = parse_version(text)
        return (version[0], version[1] if len(version) > 1 else 0) if version else None
    digits = re.match(r"(\d+)", text)
    if not digits or not 2 <= len(digits.group(1)) <= 9:
        return None
    number = digits.group(1)
    return int(number[:-1]), int(number[-1])


def driver_runs(driver_cuda: str | None, build_cuda: str | None) -> bool | None:
    """Whether a driver of CUDA `driver_cuda` runs a torch build for CUDA `build_cuda` (a
    driver runs builds up to its own CUDA major.minor); None when either is not a version."""
    driver, build = parse_cuda(driver_cuda), parse_cuda(build_cuda)
    if driver is None or build is None:
        return None
    return driver >= build


def capability(facts: Facts, index: int, from_smi: str | None) -> tuple[int, int] | None:
    """GPU `index`'s compute capability, from nvidia-smi, else from torch."""
    cap = parse_capability(from_smi)
    if cap is None:
        device = next((d for d in facts.torch.devices if d.index == index), None)
        cap = parse_capability(device.capability) if device else None
    return cap


def min_cuda_for_gpus(facts: Facts) -> tuple[int, int] | None:
    """The oldest CUDA whose builds have kernels for every GPU of the machine, where one is known."""
    needs = [
        ARCH_MIN_CUDA[cap]
        for cap in (capability(facts, g.index, g.compute_cap) for g in facts.gpu.gpus)
        if cap in ARCH_MIN_CUDA
    ]
    return max(needs) if needs else None


def build_misfit(facts: Facts, build: str) -> str | None:
    """Why a torch build ('12.4', 'CPU', 'ROCm 6.1': the fingerprint's torch-cuda) cannot do
    the job on this machine's NVIDIA GPUs, or None when the evaluator knows it can (or the
    machine has no GPU, where any build runs as it would anywhere)."""
    if not gpu_present(facts):
        return None
    if build == "CPU" or build.startswith("ROCm"):
        return "it cannot use NVIDIA GPUs, so training runs on the CPU"
    driver = facts.gpu.cuda_version
    runs = driver_runs(driver, build)
    if runs is None:
        return "the driver's CUDA version is not known, so nothing says the build runs on it"
    if not runs:
        return f"this driver runs builds up to CUDA {cuda_text(parse_cuda(driver) or ())} only"
    needed = min_cuda_for_gpus(facts)
    built = parse_cuda(build) or (0, 0)
    if needed is not None and built < needed:
        return f"it has no kernels for these GPUs, which need a CUDA {cuda_text(needed)} build or newer"
    return None


def tag_cuda(tag: str) -> tuple[int, int]:
    """(12, 1) from 'cu121'."""
    digits = tag.removeprefix("cu")
    return int(digits[:-1]), int(digits[-1])


def cuda_text(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version[:2])


def _tags_for(minor: tuple[int, int]) -> tuple[str, ...]:
    if minor in CUDA_TAGS:
        return CUDA_TAGS[minor]
    newest = max(CUDA_TAGS)
    return CUDA_TAGS[newest] if minor > newest else ()


def _best_tag(
    tags: tuple[str, ...], driver: tuple[int, ...] | None, at_least: tuple[int, int] | None, same_major: bool
) -> str | None:
    fitting = [
        tag
        for tag in tags
        if (driver is None or tag_cuda(tag) <= tuple(driver[:2]))
        and (at_least is None or tag_cuda(tag) >= at_least)
        and (not same_major or driver is None or tag_cuda(tag)[0] == driver[0])
    ]
    return max(fitting, key=tag_cuda) if fitting else None


def choose_build(
    torch_version: str | None, driver_cuda: str | None, min_cuda: tuple[int, int] | None = None
) -> tuple[str, str] | None:
    """(requirement, tag) for a CUDA build the driver runs: ('torch==2.3.1', 'cu121'),
    ('torch==2.5.*', 'cu121') or ('torch', 'cu128'); None when no published build fits.

    A build of the driver's own CUDA major version is preferred (CUDA 12 extensions such as
    flash-attn expect one), then the installed torch release, then the newest release."""
    driver = parse_cuda(driver_cuda)
    installed = parse_version(torch_version)
    newest = max(CUDA_TAGS)
    for same_major in (True, False):
        if installed is not None and len(installed) >= 2:
            tag = _best_tag(_tags_for((installed[0], installed[1])), driver, min_cuda, same_major)
            if tag is not None:
                return f"torch=={'.'.join(str(p) for p in installed[:3])}", tag
        for minor in sorted(CUDA_TAGS, reverse=True):
            tag = _best_tag(CUDA_TAGS[minor], driver, min_cuda, same_major)
            if tag is not None:
                return ("torch" if minor == newest else f"torch=={minor[0]}.{minor[1]}.*"), tag
    return None


def build_fix(
    python: str,
    driver_cuda: str | None,
    torch_version: str | None = None,
    min_cuda: tuple[int, int] | None = None,
    replace: bool = False,
    advice: str | None = None,
) -> Fix:
    """The pip command that installs a torch CUDA build the driver runs (see choose_build),
    with `advice` beside it; when no published build fits, the one phrasing of that dead end."""
    choice = choose_build(torch_version, driver_cuda, min_cuda)
    if choice is None:
        return Fix(
            advice=f"no published PyTorch CUDA build runs on this driver (CUDA {driver_cuda}): "
            "use a machine with a newer NVIDIA driver"
        )
    requirement, tag = choice
    return Fix(steps=[FixStep.safe(install_command(python, requirement, tag, replace=replace))], advice=advice)


def pip_install(python: str, *requirements: str) -> str:
    """`python -m pip install REQ...`, each quoted."""
    return f"{q(python)} -m pip install " + " ".join(q(r) for r in requirements)


def install_command(python: str, requirement: str, tag: str, replace: bool) -> str:
    """The pip command line; `replace` uninstalls first, since pip treats 2.3.1+cpu as
    already satisfying torch==2.3.1 and would keep the wrong build."""
    pip = f"{q(python)} -m pip"
    install = f"{pip} install {q(requirement)} --index-url {INDEX_URL.format(tag=tag)}"
    return f"{pip} uninstall -y torch && {install}" if replace else install


def reinstall_command(python: str, installed: str) -> str:
    """Reinstall the torch that is there, from the index it came from ('2.5.1+cu124' from
    whl/cu124; a plain '2.5.1' from PyPI), dependencies included: a later pip install that
    replaced NCCL or cuDNN is what usually broke it."""
    release, _, local = installed.partition("+")
    index = f" --index-url {INDEX_URL.format(tag=local)}" if re.fullmatch(r"cu\d+|cpu|rocm[\d.]+", local) else ""
    return f"{q(python)} -m pip install --force-reinstall {q('torch==' + release)}{index}"


# Options of pip install/uninstall that take a value: that value is no package.
_PIP_VALUE_OPTIONS = frozenset({"--index-url", "-i", "--extra-index-url", "-r", "--requirement", "-c", "--constraint"})


def pip_packages(fix: Fix | None) -> dict[str, str]:
    """Package name (PEP 503) -> the interpreter whose pip a fix's steps install or remove it with."""
    found: dict[str, str] = {}
    for step in fix.steps if fix else []:
        try:
            words = shlex.split(step.run)
        except ValueError:
            continue
        for at in range(len(words) - 3):
            if words[at + 1 : at + 3] != ["-m", "pip"] or words[at + 3] not in ("install", "uninstall"):
                continue
            skip_next = False
            for word in words[at + 4 :]:
                if word in ("&&", "||", ";", "|"):
                    break
                if skip_next or word.startswith("-"):
                    skip_next = word in _PIP_VALUE_OPTIONS
                    continue
                try:
                    found.setdefault(normalize_name(PipRequirement(word).name), words[at])
                except InvalidRequirement:
                    continue
    return found


def one_install_per_package(findings: list[Finding]) -> list[Finding]:
    """`findings` with no package installed by two of their fixes: a later warning or blocker
    loses its steps for a package an earlier one already installs (with the same interpreter,
    training_python), and its advice names that check, so a pod's script installs it once."""
    claimed: dict[str, str] = {}
    kept: list[Finding] = []
    for finding in findings:
        fix = finding.fix
        if finding.severity not in (Severity.WARN, Severity.BLOCK) or fix is None:
            kept.append(finding)
            continue
        packages = pip_packages(fix)
        taken = sorted(package for package in packages if package in claimed)
        if taken:
            steps = [step for step in fix.steps if not set(pip_packages(Fix(steps=[step]))) & set(taken)]
            words = [f"{claimed[p]}'s fix already installs {p} on this pod: run it, then check again" for p in taken]
            fix = Fix(steps=steps, advice="; ".join([*([fix.advice] if fix.advice else []), *words]))
            finding = finding.model_copy(update={"fix": fix})
        for package in packages:
            claimed.setdefault(package, finding.check)
        kept.append(finding)
    return kept
