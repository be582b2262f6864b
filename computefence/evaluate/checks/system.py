"""system.shm: PyTorch DataLoader workers pass batches through /dev/shm."""

from __future__ import annotations

from computefence.evaluate.context import Context, first_path, passed, skipped, sudo, warn
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep

CHECKS: dict[str, CheckSpec] = {
    "system.shm": CheckSpec("/dev/shm is large enough for DataLoader workers", Remedy.CONFIG),
}


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def check_shm(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "system.shm"
    if not ctx.ml_host:
        return [skipped(cid, "no GPU and no torch on this machine: shared memory for DataLoader workers not checked")]
    shm = first_path(facts, "shm")
    if shm is None:
        return []
    suggested = _suggested_gb(facts)
    fix = Fix(
        steps=[FixStep.safe(f"{sudo(facts)}mount -o remount,size={suggested}G /dev/shm")],
        advice=f"needs CAP_SYS_ADMIN; otherwise recreate the container with --shm-size={suggested}g "
        "(or --ipc=host), or use DataLoader(num_workers=0)",
    )
    if not shm.exists:
        return [
            warn(
                cid,
                "/dev/shm does not exist: DataLoader workers (num_workers > 0) cannot share batches",
                fix,
                subject="/dev/shm",
            )
        ]
    if shm.total_bytes is None:
        return []
    minimum = ctx.thresholds.shm_min_gb
    if shm.total_bytes < minimum * 1e9:
        return [
            warn(
                cid,
                f"/dev/shm is {_size(shm.total_bytes)} (under {minimum:g} GB): DataLoader workers die with 'bus error'",
                fix,
                subject="/dev/shm",
            )
        ]
    return [passed(cid, f"/dev/shm is {_size(shm.total_bytes)}", subject="/dev/shm")]


def _suggested_gb(facts: Facts) -> int:
    memory = facts.identity.mem_total_bytes
    if not memory:
        return 16
    return max(1, min(64, int(memory / 2 / 1e9)))


RULES = [check_shm]
