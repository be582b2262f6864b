"""run.*: a training run judged from what the watch probe saw (`fleet watch`).

Only these checks judge a watch: the GPU memory a job holds is the job itself, not a
gpu.memory-in-use finding. Every threshold of the watch lives here.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass

from computefence.evaluate.checks.job import checkpoint_estimate, load_training_memory, model_size
from computefence.evaluate.context import Context, Rule, block, build_context, passed, q, skipped, timed_out, warn
from computefence.evaluate.mounts import Level
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import (
    CheckOptions,
    Checkpoint,
    Facts,
    Finding,
    Fix,
    FixStep,
    LedgerMachine,
    OutputDirFacts,
    PathFacts,
    ProviderInfo,
    RankProcess,
    Severity,
    StorageFacts,
    TrainerState,
    TrainingProcess,
    WatchFacts,
)
from computefence.policy import Job
from computefence.text import one_line

CHECKS: dict[str, CheckSpec] = {
    "run.no-job": CheckSpec("a pod with GPUs runs a training job (else it bills for nothing)", Remedy.CONFIG),
    "run.gpu-idle": CheckSpec("the training job keeps its GPUs busy", Remedy.CONFIG),
    "run.loss-plateau": CheckSpec(
        "the loss has not settled at ln(k), the loss of a model that learned nothing", Remedy.CONFIG
    ),
    "run.loss-nan": CheckSpec("the loss is a number (not NaN or inf)", Remedy.CONFIG),
    "run.stalled": CheckSpec("the job's log or trainer_state.json moved within --stall-minutes", Remedy.CONFIG),
    "run.checkpoint-ephemeral": CheckSpec("checkpoints land on storage that outlives the pod", Remedy.CONFIG),
    "run.disk-eta": CheckSpec("the output volume holds the checkpoints still to come", Remedy.FIX),
}

IDLE_GPU_PCT = 10.0
# A plateau: the last PLATEAU_LOSSES (at least) losses all within PLATEAU_TOLERANCE of ln(k).
PLATEAU_LOSSES = 10
PLATEAU_TOLERANCE = 0.02
# A healthy run's loss sits near ln(k) for its first hundred steps or so (measured on real
# Trainer runs): before this step a loss at chance is not yet a plateau.
PLATEAU_MIN_STEPS = 200
# A rank's CPU over the window: busy at or above BUSY_CORES, waiting at or below IDLE_CORES.
BUSY_CORES = 0.5
IDLE_CORES = 0.05
# How large the NCCL flight recorder's ring is in the fix (entries per rank).
NCCL_TRACE_ENTRIES = 2000
# The last NAN_WINDOW losses are looked at for NaN and inf.
NAN_WINDOW = 10
DEFAULT_STALL_MINUTES = 15.0
# CPU cores a job with idle GPUs keeps busy when it computes on the CPU.
CPU_FALLBACK_CORES = 0.8


@dataclass(frozen=True)
class WatchSettings:
    """What the watch knows beyond the facts: the job's policy and the last pass."""

    stall_minutes: float = DEFAULT_STALL_MINUTES
    # job.num_labels, else the label count a dataset check found; else 2.
    num_labels: int | None = None
    dataset_labels: int | None = None
    # One checkpoint's size by the job budget (storage.budget's estimate from job.params),
    # used until the job has written one: then the largest recent checkpoint's size counts.
    checkpoint_bytes: int | None = None
    # job.save_total_limit and job.max_steps, where trainer_state.json does not say.
    save_total_limit: int | None = None
    job_max_steps: int | None = None
    # This pod's facts in the previous pass (live mode, or the last run in --history).
    previous: WatchFacts | None = None
    # The machine behind this pod as a fleet check history saw it (--hosts-history).
    machine: LedgerMachine | None = None


def settings_for(
    job: Job | None,
    stall_minutes: float = DEFAULT_STALL_MINUTES,
    previous: WatchFacts | None = None,
    dataset_labels: int | None = None,
    machine: LedgerMachine | None = None,
) -> WatchSettings:
    """The watch's settings from the policy's job: section (#23's model): its label count,
    its checkpoint limits and, where job.params says, the size of one checkpoint."""
    if job is None:
        return WatchSettings(
            stall_minutes=stall_minutes, previous=previous, dataset_labels=dataset_labels, machine=machine
        )
    size = model_size(None, job, load_training_memory())
    estimate = checkpoint_estimate(size, job, load_training_memory()) if size is not None else None
    return WatchSettings(
        stall_minutes=stall_minutes,
        num_labels=job.num_labels,
        dataset_labels=dataset_labels,
        checkpoint_bytes=int(estimate.per_checkpoint) if estimate is not None else None,
        save_total_limit=job.save_total_limit,
        job_max_steps=job.max_steps,
        previous=previous,
        machine=machine,
    )


@dataclass(frozen=True)
class Progress:
    """The run's state as the tables show it; None where the pod did not say."""

    step: int | None
    max_steps: int | None
    seconds_per_step: float | None
    last_loss: float | str | None
    gpu_util_pct: float | None
    newest_checkpoint: str | None
    newest_checkpoint_age_s: float | None

    @property
    def seconds_left(self) -> float | None:
        """Time to max_steps at the current pace."""
        return _seconds_left(self)


# ---------------------------------------------------------------- fact helpers


def _finite(value: float | str | None) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def losses(watch: WatchFacts) -> tuple[list[float | str], str]:
    """The logged losses, oldest first, and where they came from: the log's tail when it
    has any (it runs ahead of trainer_state.json, written at checkpoints only)."""
    found, _, where = loss_points(watch)
    return found, where


def loss_points(watch: WatchFacts) -> tuple[list[float | str], list[int | None], str]:
    """losses(), with the step each was logged at where the log or trainer_state.json says."""
    if watch.log is not None and watch.log.losses:
        steps = list(watch.log.loss_steps)
        if len(steps) != len(watch.log.losses):
            steps = [None] * len(watch.log.losses)
        return list(watch.log.losses), steps, watch.log.path
    state = trainer_state(watch)
    if state is not None:
        entries = [e for e in state.log_history if e.loss is not None]
        if entries:
            return [e.loss for e in entries if e.loss is not None], [e.step for e in entries], state.path
    return [], [], ""


def trainer_state(watch: WatchFacts) -> TrainerState | None:
    states = [d.trainer_state for d in watch.outputs.dirs if d.trainer_state is not None and not d.trainer_state.error]
    return max(states, key=lambda s: s.mtime or 0.0) if states else None


def gpu_means(watch: WatchFacts) -> dict[int, float]:
    """Mean utilisation per GPU index over the window."""
    seen: dict[int, list[float]] = {}
    for sample in watch.gpu.samples:
        for gpu in sample.gpus:
            if gpu.index is not None and gpu.utilization_pct is not None:
                seen.setdefault(gpu.index, []).append(gpu.utilization_pct)
    return {index: sum(values) / len(values) for index, values in sorted(seen.items())}


def _gpu_count(watch: WatchFacts) -> int:
    return max((len(s.gpus) for s in watch.gpu.samples), default=0)


def newest_checkpoint(watch: WatchFacts) -> tuple[Checkpoint, OutputDirFacts] | None:
    found = [(c, d) for d in watch.outputs.dirs for c in d.checkpoints]
    return max(found, key=lambda pair: pair[0].mtime) if found else None


def progress(facts: Facts | None, previous: WatchFacts | None = None) -> Progress | None:
    watch = facts.watch if facts is not None else None
    if watch is None:
        return None
    state = trainer_state(watch)
    bar = watch.log.progress if watch.log is not None else None
    step = max([s for s in (bar.step if bar else None, state.global_step if state else None) if s is not None] or [0])
    max_steps = (state.max_steps if state and state.max_steps else None) or (bar.total if bar else None)
    rate = bar.seconds_per_step if bar else None
    if rate is None and previous is not None:
        rate = _rate_between(previous, watch, step)
    found, _ = losses(watch)
    means = gpu_means(watch)
    newest = newest_checkpoint(watch)
    now = watch.outputs.now
    return Progress(
        step=step or None,
        max_steps=max_steps,
        seconds_per_step=rate,
        last_loss=found[-1] if found else None,
        gpu_util_pct=sum(means.values()) / len(means) if means else None,
        newest_checkpoint=newest[0].name if newest else None,
        newest_checkpoint_age_s=(now - newest[0].mtime) if newest and now else None,
    )


def _rate_between(previous: WatchFacts, watch: WatchFacts, step: int) -> float | None:
    before = progress(Facts(watch=previous))
    if before is None or not before.step or not step or step <= before.step:
        return None
    if previous.outputs.now is None or watch.outputs.now is None or watch.outputs.now <= previous.outputs.now:
        return None
    return (watch.outputs.now - previous.outputs.now) / (step - before.step)


def _size(n_bytes: float | None) -> str:
    """Bytes in GB (10^9) as the storage checks state them; MB below 1 GB."""
    if n_bytes is None:
        return "?"
    return f"{n_bytes / 1e6:.0f} MB" if n_bytes < 1e9 else f"{n_bytes / 1e9:.1f} GB"


def _pace(seconds_per_step: float) -> str:
    return f"{seconds_per_step:.1f} s/step" if seconds_per_step >= 1 else f"{1 / seconds_per_step:.1f} steps/s"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _job_name(job: TrainingProcess) -> str:
    words = [posixpath.basename(job.argv[0])] if job.argv else []
    words += job.argv[1:4]
    return f"{one_line(' '.join(words), 60)} (pid {job.pid})"


# ---------------------------------------------------------------- the rules


def check_no_job(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.no-job"
    jobs = watch.processes.processes
    if jobs:
        return [passed(cid, f"training: {_job_name(jobs[0])}, running for {_duration(jobs[0].elapsed_s or 0)}")]
    means = gpu_means(watch)
    if means and max(means.values()) >= IDLE_GPU_PCT:
        return [
            passed(
                cid,
                f"no training process recognised, but the GPUs are busy ({max(means.values()):.0f}%): "
                "set job.process in computefence.yaml to the job's command line",
            )
        ]
    if not watch.gpu.nvidia_smi_found and not ctx.gpu_expected:
        return [skipped(cid, "no nvidia-smi and no training process: not a GPU pod")]
    if watch.processes.job_process_error:
        return [
            skipped(
                cid,
                f"no training process recognised by name, and {watch.processes.job_process_error}: "
                "simplify job.process in computefence.yaml",
            )
        ]
    bills = "; it bills for nothing"  # the price would split the pods into one group each
    idle = f"{len(means)} GPU{'s' if len(means) != 1 else ''} idle" if means else "GPUs idle"
    died = ""
    if watch.log is not None and watch.log.error_line:
        died = f"; the job's log {watch.log.path} ends in: {one_line(watch.log.error_line, 160)}"
    steps = [FixStep.inspect(f"tail -n 50 {q(watch.log.path)}")] if watch.log is not None and watch.log.exists else []
    return [
        warn(
            cid,
            f"no training process and {idle}{bills}{died}",
            Fix(
                steps=steps,
                advice="start the job (or see why it exited), or stop the pod in the provider's console",
            ),
        )
    ]


def check_gpu_idle(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.gpu-idle"
    jobs = watch.processes.processes
    if not jobs:
        return [skipped(cid, "no training process to judge")]
    means = gpu_means(watch)
    if not means:
        why = watch.gpu.error or ("no nvidia-smi on the pod" if not watch.gpu.nvidia_smi_found else "no samples")
        return [skipped(cid, f"GPU utilisation not sampled: {one_line(why, 120)}")]
    window = f"over {watch.gpu.window_s:.0f} s"
    if max(means.values()) >= IDLE_GPU_PCT:
        shown = ", ".join(f"{v:.0f}%" for v in means.values())
        return [passed(cid, f"GPU utilisation {window}: {shown}")]
    job = jobs[0]
    cores = job.cpu_cores
    bar = watch.log.progress if watch.log is not None else None
    pace = f" at {_pace(bar.seconds_per_step)}" if bar and bar.seconds_per_step else ""
    holds = {app.pid for app in watch.gpu.apps if app.pid is not None}
    if cores is not None and cores >= CPU_FALLBACK_CORES:
        cause = (
            f"the job keeps {cores:.1f} CPU cores busy{pace}: it is computing on the CPU "
            "(a CPU-only torch, tensors or the model never moved to cuda)"
        )
    elif cores is not None:
        cause = (
            f"the job uses {cores:.1f} CPU cores{pace}: it is waiting, on data (a DataLoader "
            "stall, a slow network volume) or in a collective that never completes (NCCL init, a barrier)"
        )
    else:
        cause = "likely a CPU fallback or a DataLoader stall"
    if not holds and watch.gpu.nvidia_smi_found:
        cause += "; no process holds GPU memory"
    every = "every GPU is" if len(means) > 1 else "the GPU is"
    steps, advice = _py_spy(watch, job.pid, "where each thread of the job is")
    return [
        warn(
            cid,
            f"{_job_name(job)} runs, but {every} under {IDLE_GPU_PCT:.0f}% utilisation {window} "
            f"({', '.join(f'{v:.0f}%' for v in means.values())}): {cause}",
            Fix(steps=steps, advice="; ".join([advice, "`computefence doctor` on the pod checks torch's CUDA"])),
        )
    ]


def _py_spy(watch: WatchFacts, pid: int, shows: str) -> tuple[list[FixStep], str]:
    """The step that shows where a process is, and the words for it: py-spy where the pod has
    it, how to get it where it does not (a command that cannot run is no step)."""
    if watch.processes.py_spy:
        return [FixStep.inspect(f"py-spy dump --pid {pid}")], f"py-spy shows {shows}"
    return [], f"`pip install py-spy` on the pod, then `py-spy dump --pid {pid}` shows {shows}"


def _classes(settings: WatchSettings) -> tuple[int, str]:
    if settings.num_labels and settings.num_labels >= 2:
        return settings.num_labels, f"k = {settings.num_labels} from job.num_labels"
    if settings.dataset_labels and settings.dataset_labels >= 2:
        return settings.dataset_labels, f"k = {settings.dataset_labels}, the dataset's labels"
    return 2, "k = 2 by default: set job.num_labels"


def _world_size(watch: WatchFacts) -> int:
    """The ranks of the watched job, from their environment (else how many there are)."""
    ranks = [r for job in watch.processes.processes for r in job.ranks]
    sizes = [r.world_size for r in ranks if r.world_size]
    return max(sizes) if sizes else max(1, len(ranks))


def _major(version: str | None) -> int | None:
    head = (version or "").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _chance(watch: WatchFacts, settings: WatchSettings) -> tuple[int, float, str]:
    """k, the loss a model that learned nothing logs, and how that figure was reached:
    ln(k), times the ranks where the framework logs the loss summed over them."""
    k, origin = _classes(settings)
    world = _world_size(watch)
    versions = watch.processes.processes[0].versions if watch.processes.processes else {}
    transformers = versions.get("transformers")
    if world > 1 and (_major(transformers) or 0) >= 5:
        return (
            k,
            world * math.log(k),
            f"{world} x ln({k}) = {world * math.log(k):.3f}: {origin}; Transformers {transformers} logs the loss "
            f"summed over the job's {world} ranks under DDP",
        )
    return k, math.log(k), f"ln({k}) = {math.log(k):.3f}: {origin}"


def _steps_span(steps: list[int | None]) -> str:
    known = [s for s in steps if s is not None]
    if len(known) < 2:
        return ""
    return f", logged over steps {known[0]}-{known[-1]} ({known[-1] - known[0]} steps watched)"


def check_loss_plateau(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.loss-plateau"
    found, steps, where = loss_points(watch)
    tail = found[-PLATEAU_LOSSES:]
    if len(tail) < PLATEAU_LOSSES:
        return [skipped(cid, f"{len(found)} losses logged so far; {PLATEAU_LOSSES} are needed to call a plateau")]
    if not all(_finite(v) for v in tail):
        return [skipped(cid, "the recent losses are not all numbers (see run.loss-nan)")]
    k, chance, how = _chance(watch, settings)
    two = "" if k == 2 else "; for two classes it is ln 2 = 0.693"
    numbers = [float(v) for v in tail]
    if not all(abs(v - chance) <= PLATEAU_TOLERANCE * chance for v in numbers):
        return [passed(cid, f"last loss {numbers[-1]:.4g}, not at chance ({how})")]
    run = 0
    for value in reversed(found):
        if not _finite(value) or abs(float(value) - chance) > PLATEAU_TOLERANCE * chance:
            break
        run += 1
    at = progress(Facts(watch=watch))
    known = [s for s in steps if s is not None]
    step = max([s for s in (at.step if at else None, known[-1] if known else None) if s is not None], default=None)
    if step is None:
        return [
            skipped(
                cid,
                f"the last {run} losses sit at chance ({how}), but {where} gives no step numbers: "
                f"a plateau is called from step {PLATEAU_MIN_STEPS} on",
            )
        ]
    if step < PLATEAU_MIN_STEPS:
        return [
            skipped(
                cid,
                f"the loss is at chance ({how}) at step {step}, as a healthy run's is for its first steps: "
                f"a plateau is called from step {PLATEAU_MIN_STEPS} on",
            )
        ]
    state = trainer_state(watch)
    rates = [e.learning_rate for e in (state.log_history if state else []) if e.learning_rate is not None]
    lr = ""
    if rates and all(_finite(r) and float(r) == 0.0 for r in rates[-3:]):
        lr = "; the learning rate is 0"
    return [
        warn(
            cid,
            f"the last {run} losses{_steps_span(steps[-run:])} sit at {min(numbers):.3f}-{max(numbers):.3f}, "
            f"within {PLATEAU_TOLERANCE:.0%} of chance, {how}{two}: at step {step} the model still "
            f"gives each of the {k} classes the same probability, it has learned nothing{lr}",
            Fix(
                advice="look at the labels (all one class, shuffled apart from their inputs: "
                "`computefence dataset check FILE --input-column C --label-column L`), the learning "
                "rate (0, or so high it diverged) and whether the inputs reach the model; "
                f"the losses are in {where}"
            ),
        )
    ]


def check_loss_nan(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.loss-nan"
    found, where = losses(watch)
    if not found:
        return [skipped(cid, "no losses logged yet")]
    recent = found[-NAN_WINDOW:]
    bad = [v for v in recent if not _finite(v)]
    if not bad:
        return [passed(cid, f"the last {len(recent)} losses are numbers")]
    return [
        block(
            cid,
            f"{len(bad)} of the last {len(recent)} losses are {'/'.join(sorted({str(v) for v in bad}))} "
            f"(in {where}): the weights are being destroyed, every step from here is wasted",
            Fix(
                advice="stop the job and resume from the last checkpoint before the first NaN with a lower "
                "learning rate, gradient clipping (max_grad_norm) or bf16 instead of fp16"
            ),
        )
    ]


# A rank's state that holds its peers up: what it is, and why.
_HOLDING_STATES = {
    "T": ("stopped", "state T: a SIGSTOP or Ctrl-Z"),
    "t": ("held by a debugger", "state t"),
    "D": ("in uninterruptible sleep", "state D: a driver call or I/O that does not return"),
    "Z": ("a zombie", "state Z: it exited, its parent has not reaped it"),
    "X": ("gone", "it exited during the watch"),
}


def _rank_name(rank: RankProcess) -> str:
    which = f"rank {rank.rank}" if rank.rank is not None else f"local rank {rank.local_rank}"
    return f"{which} (pid {rank.pid})"


def odd_rank(job: TrainingProcess) -> tuple[RankProcess | None, str]:
    """The rank that holds the others up and the facts that single it out; or None and
    what the facts show instead."""
    ranks = sorted(job.ranks, key=lambda r: (r.rank if r.rank is not None else -1, r.pid))
    if not ranks:
        return None, "a hang (NCCL, a dead DataLoader worker, a full disk) or a step far slower than it should be"
    peers = "the other rank is" if len(ranks) == 2 else f"the other {len(ranks) - 1} ranks are"
    odd = [r for r in ranks if r.state in _HOLDING_STATES]
    if len(odd) == 1 and len(ranks) > 1:
        what, why = _HOLDING_STATES[odd[0].state or ""]
        states = "/".join(sorted({r.state or "?" for r in ranks if r is not odd[0]}))
        return odd[0], (
            f"{_rank_name(odd[0])} is {what} ({why}); {peers} in state {states}, waiting for it in the next collective"
        )
    expected = max((r.local_world_size or 0 for r in ranks), default=0)
    present = {r.local_rank for r in ranks if r.local_rank is not None}
    missing = sorted(set(range(expected)) - present) if expected else []
    if missing and present:
        names = ", ".join(str(m) for m in missing)
        return None, (
            f"local rank{'s' if len(missing) > 1 else ''} {names} of {expected} exited while "
            f"{'rank' if len(present) == 1 else 'ranks'} {', '.join(str(p) for p in sorted(present))} still run"
        )
    cores = [r.cpu_cores for r in ranks]
    if len(ranks) > 1 and all(c is not None for c in cores):
        busy = [r for r in ranks if (r.cpu_cores or 0) >= BUSY_CORES]
        idle = [r for r in ranks if (r.cpu_cores or 0) <= IDLE_CORES]
        if len(idle) == 1 and len(busy) == len(ranks) - 1:
            return idle[0], (
                f"{_rank_name(idle[0])} uses no CPU while {peers} spinning at "
                f"{', '.join(f'{r.cpu_cores:.1f}' for r in busy)} cores, waiting for it"
            )
        if len(busy) == 1 and len(idle) == len(ranks) - 1:
            return busy[0], (
                f"{_rank_name(busy[0])} keeps {busy[0].cpu_cores:.1f} CPU cores busy while {peers} waiting "
                "with none: it is still computing (a slow step, a loop) while they wait for it"
            )
    if len(ranks) == 1:
        return None, f"its one rank, {_rank_name(ranks[0])}, is in state {ranks[0].state or '?'}"
    summary = ", ".join(f"{_rank_name(r)} {r.state or '?'} at {r.cpu_cores or 0:.1f} cores" for r in ranks)
    return None, f"the facts do not single out one rank: {summary}"


def check_stalled(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.stalled"
    jobs = watch.processes.processes
    if not jobs:
        return [skipped(cid, "no training process to judge")]
    now = watch.outputs.now
    marks: list[tuple[float, str]] = []
    if watch.log is not None and watch.log.mtime is not None:
        marks.append((watch.log.mtime, watch.log.path))
    state = trainer_state(watch)
    if state is not None and state.mtime is not None:
        marks.append((state.mtime, state.path))
    if now is None or not marks:
        return [skipped(cid, "no log and no trainer_state.json to judge progress by: set job.log in computefence.yaml")]
    newest, path = max(marks)
    age = now - newest
    limit = settings.stall_minutes * 60
    if age <= limit:
        return [passed(cid, f"{path} was written {_duration(max(0.0, age))} ago")]
    job = jobs[0]
    odd, why = odd_rank(job)
    steps: list[FixStep] = []
    advice: list[str] = []
    target = odd.pid if odd is not None else (job.ranks[0].pid if job.ranks else job.pid)
    if odd is not None and odd.state == "T":
        advice.append(f"`kill -CONT {odd.pid}` resumes the stopped rank, if nobody stopped it on purpose")
    spy_steps, spy_advice = _py_spy(watch, target, "where that rank's Python waits")
    steps += spy_steps
    advice.append(spy_advice)
    if watch.log is not None and watch.log.exists:
        steps.append(FixStep.inspect(f"tail -n 50 {q(watch.log.path)}"))
    failed = settings.machine
    if failed is not None and failed.blocked_runs:
        checks = ", ".join(sorted(failed.checks, key=lambda c: -failed.checks[c])[:3])
        advice.append(
            f"the machine behind this pod ({failed.provider} {failed.machine_id}) failed {failed.blocked_runs} of "
            f"{failed.runs} fleet checks before ({checks}): give the pod back (`computefence fleet release`, or the "
            "provider's console) and resume from the last checkpoint on another machine"
        )
    if len(job.ranks) > 1:
        advice.append(
            f"for the next run, TORCH_NCCL_TRACE_BUFFER_SIZE={NCCL_TRACE_ENTRIES} TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
            "make NCCL dump each rank's last collectives when one times out"
        )
    return [
        warn(
            cid,
            f"{_job_name(job)} lives, but nothing it writes moved for {_duration(age)} "
            f"(newest: {path}; the limit is {settings.stall_minutes:g} min): {why}",
            Fix(steps=steps, advice="; ".join(advice)),
        )
    ]


def _as_path_facts(out: OutputDirFacts) -> PathFacts:
    return PathFacts(
        role="output_dir",
        path=out.path,
        resolved=out.resolved,
        exists=out.exists,
        mount_point=out.mount_point,
        fs_type=out.fs_type,
        mount_source=out.mount_source,
    )


def check_checkpoint_ephemeral(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.checkpoint-ephemeral"
    with_checkpoints = [d for d in watch.outputs.dirs if d.checkpoints]
    if not with_checkpoints:
        return [skipped(cid, "no checkpoints found yet" + ("" if watch.outputs.dirs else " (no output dir known)"))]
    out: list[Finding] = []
    for found in with_checkpoints:
        storage = ctx.storage.classify_path(_as_path_facts(found))
        where = found.resolved or found.path
        if storage is None or storage.level != Level.EPHEMERAL:
            kept = f" on the {storage.where}" if storage is not None else ""
            out.append(passed(cid, f"checkpoints in {where}{kept}", subject=where))
            continue
        volumes = ctx.storage.volumes(Level.INSTANCE)
        newest = found.checkpoints[0]
        if volumes:
            base = posixpath.join(volumes[0].mount.mount_point, posixpath.basename(where.rstrip("/")) or "outputs")
            fix = Fix(
                # The copy takes room on the volume while the job writes there: not a safe step.
                steps=[
                    FixStep.safe(f"mkdir -p {q(base)}"),
                    FixStep.disruptive(f"cp -a -- {q(newest.path)} {q(base)}/"),
                ],
                advice=f"copies the newest checkpoint now; restart the job with its output dir at {base} "
                f"(resume with --resume_from_checkpoint {base}/{newest.name})",
            )
        else:
            fix = Fix(advice=f"nothing here outlives a restart: {ctx.profile.advice.no_volume}")
        out.append(
            block(
                cid,
                f"{found.checkpoint_count} checkpoint{'s' if found.checkpoint_count != 1 else ''} "
                f"(newest {newest.name}) written to {where}, on the {storage.where}, {storage.fate}",
                fix,
                subject=where,
            )
        )
    return out


# Growth measured over less than this says more about one save than about the run.
GROWTH_MIN_S = 300.0


def _growth(found: OutputDirFacts, previous: WatchFacts | None, now: float | None) -> tuple[float, str] | None:
    """Bytes per second the volume fills at since the last pass (at least GROWTH_MIN_S ago).
    The probe's own few seconds are not used: checkpoint writes come in bursts."""
    if previous is None or now is None or previous.outputs.now is None:
        return None
    before = next((d for d in previous.outputs.dirs if d.path == found.path), None)
    elapsed = now - previous.outputs.now
    if before is None or before.free_bytes is None or found.free_bytes is None or elapsed < GROWTH_MIN_S:
        return None
    return (before.free_bytes - found.free_bytes) / elapsed, f"since the last watch {_duration(elapsed)} ago"


def check_disk_eta(watch: WatchFacts, settings: WatchSettings, ctx: Context) -> list[Finding]:
    cid = "run.disk-eta"
    dirs = [d for d in watch.outputs.dirs if d.free_bytes is not None]
    if not dirs:
        return [skipped(cid, "no output dir with a known volume")]
    out: list[Finding] = []
    state = trainer_state(watch)
    step_now = progress(Facts(watch=watch), settings.previous)
    for found in dirs:
        where = found.mount_point or found.resolved or found.path
        free = found.free_bytes or 0
        largest = found.largest_checkpoint if found.largest_checkpoint and found.largest_checkpoint.size_bytes else None
        size = largest.size_bytes if largest is not None else settings.checkpoint_bytes
        basis = largest.name if largest is not None else "the job budget, from job.params"
        # What takes the room, biggest last; deleting is the user's call, never a pasted command.
        survey = f"du -sh -- {q(found.resolved or found.path)}/* | sort -h"
        if size and free < size:
            out.append(
                block(
                    cid,
                    f"{_size(free)} free on {where}, but one checkpoint is {_size(size)} ({basis}): "
                    "the next save fails, and with it the job",
                    Fix(
                        steps=[FixStep.inspect(survey)],
                        advice=f"free room on {where} (older checkpoints), or set save_total_limit; "
                        f"{ctx.profile.advice.grow_volume or 'or grow the volume'}",
                    ),
                    subject=where,
                )
            )
            continue
        remaining = _checkpoints_to_come(state, found, step_now, settings)
        if size and remaining and free < remaining * size:
            fits = int(free // size)
            out.append(
                warn(
                    cid,
                    f"{remaining} more checkpoints of {_size(size)} ({basis}) need {_size(remaining * size)}; "
                    f"{_size(free)} free on {where} holds {fits}: it fills before max_steps "
                    "(unless save_total_limit deletes old ones)",
                    Fix(
                        advice=f"set save_total_limit to {max(1, fits)} or fewer, or free room on {where}; "
                        f"{ctx.profile.advice.grow_volume or 'or grow the volume'}"
                    ),
                    subject=where,
                )
            )
            continue
        growth = _growth(found, settings.previous, watch.outputs.now)
        left = _seconds_left(step_now)
        if growth is not None and growth[0] > 0 and left is not None and free / growth[0] < left:
            eta = free / growth[0]
            out.append(
                warn(
                    cid,
                    f"{where} fills at {_size(int(growth[0] * 3600))}/h {growth[1]}: its {_size(free)} free last "
                    f"{_duration(eta)}, the job needs {_duration(left)} more",
                    Fix(advice=f"free room on {where} or set save_total_limit"),
                    subject=where,
                )
            )
            continue
        each = f", one checkpoint is {_size(size)}" if size else ""
        out.append(passed(cid, f"{_size(free)} free on {where}{each}", subject=where))
    return out


def _checkpoints_to_come(
    state: TrainerState | None, found: OutputDirFacts, step_now: Progress | None, settings: WatchSettings
) -> int | None:
    """Checkpoints still to be written that need room of their own: with save_total_limit,
    only up to the limit (plus the one being saved before the oldest goes)."""
    max_steps = (step_now.max_steps if step_now is not None else None) or settings.job_max_steps
    if step_now is None or not max_steps or step_now.step is None:
        return None
    every = state.save_steps if state is not None and state.save_steps else None
    steps = sorted({c.step for c in found.checkpoints if c.step is not None})
    if every is None and len(steps) >= 2:
        every = steps[-1] - steps[-2]
    if not every or every <= 0:
        return None
    remaining = max(0, math.ceil((max_steps - step_now.step) / every))
    if settings.save_total_limit:
        remaining = min(remaining, max(0, settings.save_total_limit + 1 - found.checkpoint_count))
    return remaining


def _seconds_left(step_now: Progress | None) -> float | None:
    if step_now is None or not step_now.max_steps or not step_now.step or not step_now.seconds_per_step:
        return None
    return max(0.0, (step_now.max_steps - step_now.step) * step_now.seconds_per_step)


# Rules of a watch: (watch facts, settings, context) -> findings; evaluate_watch runs them.
# Judged only by `fleet watch` (evaluate_watch), from the watch probe's facts: its rules are
# WATCH_RULES, which a check's RULES must not run.
RULES: tuple[Rule, ...] = ()
WATCH_RULES = [
    check_no_job,
    check_gpu_idle,
    check_loss_plateau,
    check_loss_nan,
    check_stalled,
    check_checkpoint_ephemeral,
    check_disk_eta,
]


def evaluate_watch(
    facts: Facts, checks: CheckOptions, provider: ProviderInfo | None, settings: WatchSettings
) -> list[Finding]:
    """The run.* findings of one pod's watch facts, passes and skips included."""
    watch = facts.watch or WatchFacts()
    # The context's storage map and provider profile come from the watch's own identity and mounts.
    base = Facts(identity=watch.identity, storage=StorageFacts(mounts=watch.outputs.mounts))
    ctx = build_context(base, checks, provider)
    findings: list[Finding] = []
    for rule in WATCH_RULES:
        findings.extend(rule(watch, settings, ctx))
    return [_unknown_where_unanswered(f, facts) for f in findings]


# What a rule reads as absence (no job, idle or no GPUs) from the collectors it depends on.
_SILENCE_READ_AS_ABSENCE = {"run.no-job": ("processes", "gpu"), "run.gpu-idle": ("processes", "gpu")}


def _unknown_where_unanswered(finding: Finding, facts: Facts) -> Finding:
    """A finding that took a collector's silence for absence, where that collector ran past
    its time limit: a skip saying what is unknown and after how long, never a verdict."""
    if finding.severity is Severity.PASS:
        return finding
    for name in _SILENCE_READ_AS_ABSENCE.get(finding.check, ()):
        how = timed_out(facts, name)
        if how is not None:
            return skipped(finding.check, f"unknown: the watch's {name} collector ran out of time ({how})")
    return finding
