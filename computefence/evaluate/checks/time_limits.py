"""probe.timeout: a collector that ran past its time limit leaves its facts unknown.

Unknown is never absent: an `import torch` cut off at its limit on a loaded pod says nothing
about whether torch is installed, so no check reads that silence as "not installed" or "no
GPU" (python.torch-missing skips, and the fingerprint leaves the field out). This check says
which facts are unknown and after how long, and fails closed where they matter: a GPU or
torch host whose torch import did not finish is blocked, as the question is open. The GPU
collector is gpu.driver's (a hung nvidia-smi is a wedged driver), the storage and dataset
collectors their own checks' ("was not checked"); this check names the others.
"""

from __future__ import annotations

from computefence.evaluate.context import Context, block, q, timed_out, training_python, warn
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix

CHECKS: dict[str, CheckSpec] = {
    "probe.timeout": CheckSpec("every collector answered within its time limit", Remedy.FIX),
}

CID = "probe.timeout"
# Collectors whose unknown facts this check names (others are named by their own checks),
# with what becomes unknown when they do not answer.
UNKNOWN_FACTS = {
    "torch": "whether torch imports, its version and CUDA build",
    "packages": "the installed package versions",
    "identity": "the OS, kernel, glibc and provider markers",
    "environment": "the environment variables",
    "accelerate": "the accelerate config",
}


def check_timeouts(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    findings = []
    for name, unknown in UNKNOWN_FACTS.items():
        how = timed_out(facts, name)
        if how is None:
            continue
        message = f"unknown: the {name} collector ran out of time ({how}), so {unknown} are not known"
        if name == "torch":
            python = training_python(facts)
            needed = ctx.gpu_present or ctx.gpu_expected or bool(facts.packages.versions.get("torch"))
            fix = Fix(
                commands=[f"time timeout 300 {q(python)} -c 'import torch; print(torch.__version__)'"],
                advice="then check again; an import this slow is a loaded pod, site-packages on a slow or dead "
                "network mount, or CUDA initialisation stuck on a wedged GPU",
            )
            findings.append((block if needed else warn)(CID, message, fix, subject=name))
        else:
            fix = Fix(advice="check again; a collector this slow is a loaded pod or a filesystem that hangs")
            findings.append(warn(CID, message, fix, subject=name))
    return findings


RULES = [check_timeouts]
