"""accelerate.num-processes: the launch config must start one process per visible GPU.

accelerate's num_processes counts processes across all machines; each machine starts
num_processes / num_machines of them, and each needs a GPU of its own.
"""

from __future__ import annotations

from typing import Any

from computefence.evaluate.context import Context, block, passed, q, skipped, warn
from computefence.evaluate.file_edits import refuse_link, replace_file
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep
from computefence.text import one_line, plural

CHECKS: dict[str, CheckSpec] = {
    "accelerate.num-processes": CheckSpec(
        "accelerate starts one process per visible GPU on each machine", Remedy.CONFIG
    ),
}

# Launch modes that do not put processes on NVIDIA GPUs.
NOT_GPU = {"MULTI_CPU", "XLA", "TPU", "MULTI_NPU", "MULTI_XPU", "MULTI_MLU", "MULTI_MUSA", "MULTI_HPU", "MULTI_SDAA"}


def _int(value: object, default: int) -> int | None:
    if value is None or value == "":
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in ("true", "yes", "1")


def _visible_gpus(facts: Facts, config: dict[str, Any]) -> int:
    torch = facts.torch
    if torch.importable and torch.cuda_available and torch.device_count is not None:
        count = torch.device_count
    else:
        count = len(facts.gpu.gpus)
    ids = config.get("gpu_ids")
    if ids is not None and str(ids).strip().lower() not in ("", "all"):
        chosen = [part for part in str(ids).split(",") if part.strip()]
        count = min(count, len(chosen))
    return count


def check_num_processes(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "accelerate.num-processes"
    accel = facts.accelerate
    if not accel.found:
        if checks.accelerate_config:
            path = checks.accelerate_config
            return [
                block(
                    cid,
                    f"accelerate config {path} not found",
                    f"accelerate config --config_file {q(path)}",
                    subject=path,
                )
            ]
        return []
    path = accel.path or checks.accelerate_config or "the accelerate config"
    if accel.error:
        return [
            warn(
                cid,
                f"accelerate config {path} could not be read: {one_line(accel.error, 160)}",
                f"accelerate config --config_file {q(path)}",
                subject=path,
            )
        ]
    config = accel.config
    distributed = str(config.get("distributed_type") or "NO").strip().upper()
    if _truthy(config.get("use_cpu")) or distributed in NOT_GPU:
        return [
            skipped(
                cid, f"accelerate config {path} does not use GPUs ({distributed}): nothing to compare", subject=path
            )
        ]
    torch = facts.torch
    countable = ctx.gpu_usable or (torch.importable and torch.cuda_available and torch.device_count is not None)
    if not countable:
        if ctx.gpu_present or ctx.gpu_expected:
            return []  # gpu.driver reports why the GPUs cannot be counted
        return [skipped(cid, f"no NVIDIA GPU on this machine; accelerate config {path} not compared", subject=path)]
    processes = _int(config.get("num_processes"), 1)
    machines = _int(config.get("num_machines"), 1)
    if processes is None or machines is None or processes < 1 or machines < 1:
        return [
            warn(
                cid,
                f"accelerate config {path}: num_processes {config.get('num_processes')!r} / num_machines "
                f"{config.get('num_machines')!r} are not positive numbers",
                f"accelerate config --config_file {q(path)}",
                subject=path,
            )
        ]
    visible = _visible_gpus(facts, config)
    want = visible * machines
    per_machine, rest = divmod(processes, machines)
    spread = f" ({processes} over {machines} machines)" if machines > 1 else ""
    fix = _set_processes(path, want, distributed)
    if rest:
        return [
            warn(
                cid,
                f"accelerate config {path}: num_processes {processes} is not a multiple of num_machines "
                f"{machines}; this machine has {plural(visible, 'GPU')}",
                fix,
                subject=path,
            )
        ]
    if per_machine > visible:
        return [
            block(
                cid,
                f"accelerate starts {per_machine} processes per machine{spread}, but this machine has "
                f"{plural(visible, 'visible GPU')}: the launch fails or hangs",
                fix,
                subject=path,
            )
        ]
    if per_machine < visible:
        return [
            warn(
                cid,
                f"accelerate starts {per_machine} process(es) per machine{spread}, but this machine has "
                f"{visible} visible GPUs: {visible - per_machine} stay idle",
                fix,
                subject=path,
            )
        ]
    return [passed(cid, f"accelerate starts {per_machine} process(es) per machine, one per visible GPU", subject=path)]


def _set_processes(path: str, total: int, distributed: str) -> Fix:
    """Rewrite the config the job uses (the probe reports the one in effect). A YAML config
    without the key gets it last; a second run finds the value in place and writes the same bytes."""
    advice = f"or pass --num_processes {total} to accelerate launch"
    config = q(path)
    if path.endswith(".json"):
        edits = [f"-e 's/\\(\"num_processes\"[[:space:]]*:[[:space:]]*\\)[0-9]*/\\1{total}/'"]
        if distributed == "NO" and total > 1:
            edits.append('-e \'s/\\("distributed_type"[[:space:]]*:[[:space:]]*\\)"NO"/\\1"MULTI_GPU"/\'')
        return Fix(
            steps=[FixStep.safe(f"{refuse_link(config)} && sed -i {' '.join(edits)} -- {config}")], advice=advice
        )
    # awk ends every line it prints: a last line without its newline is never joined to the key.
    program = f'index($0, "num_processes:") == 1 {{ $0 = "num_processes: {total}"; found = 1 }} '
    if distributed == "NO" and total > 1:
        program += 'index($0, "distributed_type:") == 1 { $0 = "distributed_type: MULTI_GPU" } '
    program += f'{{ print }} END {{ if (!found) print "num_processes: {total}" }}'
    command = replace_file(config, f'awk {q(program)} < {config} > "$t"')
    return Fix(steps=[FixStep.safe(command)], advice=advice)


RULES = [check_num_processes]
