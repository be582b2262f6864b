"""run.*: watch facts in, findings out. Each case is data: what the pod showed, the
severity expected and words the message must carry."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from computefence.evaluate import evaluate_watch
from computefence.evaluate.checks.watch_checks import WatchSettings, progress, settings_for
from computefence.models import CheckOptions, CollectorStatus, Facts, LedgerMachine, ProviderInfo, WatchFacts
from computefence.policy import Job
from computefence.probe.watch_files import _trainer_state

NOW = 1_800_000_000.0
FIXTURE = Path(__file__).parents[1] / "fixtures" / "watch" / "trainer_state.imdb-distilbert-lora.json"
MOUNTS = [
    {"mount_point": "/", "fs_type": "overlay", "source": "overlay"},
    {"mount_point": "/workspace", "fs_type": "ext4", "source": "/dev/sdb"},
    {"mount_point": "/dev/shm", "fs_type": "tmpfs", "source": "shm"},
]
JOB = {
    "pid": 41,
    "matched_by": "torchrun",
    "argv": ["/usr/bin/python3", "/usr/local/bin/torchrun", "train.py"],
    "elapsed_s": 600,
    "cpu_cores": 1.0,
}


def watch(
    *,
    job: dict | None = JOB,
    util: float | None = 95.0,
    losses: list | None = None,
    log_age_s: float = 10.0,
    out: str = "/workspace/out",
    free: int = 500 * 10**9,
    checkpoints: list[tuple[str, int, int]] = (("checkpoint-500", 500, 16 * 10**9),),
    state: dict | None = None,
    step: int | None = 500,
    loss_steps: list | None = None,
    py_spy: str | None = None,
) -> WatchFacts:
    """A pod's watch facts: one GPU at `util`, one job, a log (its progress bar at `step`),
    checkpoints (name, step, bytes)."""
    ckpts = [
        {"path": f"{out}/{name}", "name": name, "mtime": NOW - 60 * i, "size_bytes": size, "step": step}
        for i, (name, step, size) in enumerate(checkpoints)
    ]
    directory = {
        "path": out,
        "resolved": out,
        "exists": True,
        "free_bytes": free,
        "checkpoints": ckpts,
        "checkpoint_count": len(ckpts),
        "largest_checkpoint": max(ckpts, key=lambda c: c["size_bytes"]) if ckpts else None,
    }
    if state is not None:
        directory["trainer_state"] = state
    document = {
        "gpu": {
            "nvidia_smi_found": True,
            "window_s": 3.0,
            "samples": [{"t": t, "gpus": [{"index": 0, "utilization_pct": util}]} for t in (0, 1, 2, 3)],
        },
        "processes": {"processes": [job] if job else [], "py_spy": py_spy},
        "outputs": {"now": NOW, "dirs": [directory], "mounts": MOUNTS},
        "log": {
            "path": "/workspace/train.log",
            "exists": True,
            "mtime": NOW - log_age_s,
            "losses": losses or [],
            "loss_steps": loss_steps or [],
            "progress": {"step": step, "total": 1000} if step is not None else None,
        },
    }
    return WatchFacts.model_validate(document)


def judged(facts: WatchFacts, check: str, settings: WatchSettings = WatchSettings(), provider=None) -> list:
    found = evaluate_watch(Facts(watch=facts), CheckOptions(), provider, settings)
    return [f for f in found if f.check == check]


def one(facts: WatchFacts, check: str, **kwargs):
    found = judged(facts, check, **kwargs)
    assert len(found) == 1, found
    return found[0]


LN2 = math.log(2)
FALLING = [round(2.3 - 0.1 * i, 3) for i in range(15)]

CASES = [
    # (id, facts, check, severity, words in the message)
    ("healthy", watch(losses=FALLING), "run.loss-plateau", "pass", []),
    ("plateau-ln2", watch(losses=[LN2 + 0.003 * (-1) ** i for i in range(12)]), "run.loss-plateau", "warn", ["0.693"]),
    ("nine-losses", watch(losses=[LN2] * 9), "run.loss-plateau", "skip", ["10"]),
    # A healthy run sits at ln 2 for its first hundred steps or so.
    ("at-chance-early", watch(losses=[LN2] * 12, step=120), "run.loss-plateau", "skip", ["step 120", "200"]),
    ("no-step-numbers", watch(losses=[LN2] * 12, step=None), "run.loss-plateau", "skip", ["no step numbers"]),
    (
        "steps-watched",
        watch(losses=[LN2] * 30, step=None, loss_steps=list(range(10, 310, 10))),
        "run.loss-plateau",
        "warn",
        ["last 30 losses, logged over steps 10-300 (290 steps watched)", "at step 300"],
    ),
    ("just-outside-2pct", watch(losses=[LN2 * 1.021] * 12), "run.loss-plateau", "pass", []),
    ("nan", watch(losses=[*FALLING, "nan"]), "run.loss-nan", "block", ["nan"]),
    ("inf", watch(losses=[*FALLING, "inf", 0.4]), "run.loss-nan", "block", ["inf"]),
    ("numbers", watch(losses=FALLING), "run.loss-nan", "pass", []),
    ("no-job", watch(job=None, util=0.0), "run.no-job", "warn", ["no training process"]),
    ("unknown-job-busy", watch(job=None, util=80.0), "run.no-job", "pass", ["job.process"]),
    ("idle-cpu-fallback", watch(job=dict(JOB, cpu_cores=7.5), util=0.0), "run.gpu-idle", "warn", ["on the CPU"]),
    ("idle-waiting", watch(job=dict(JOB, cpu_cores=0.05), util=3.0), "run.gpu-idle", "warn", ["DataLoader"]),
    ("busy", watch(util=99.0), "run.gpu-idle", "pass", []),
    ("util-na", watch(util=None), "run.gpu-idle", "skip", []),
    ("stalled", watch(log_age_s=40 * 60), "run.stalled", "warn", ["40 min"]),
    ("moving", watch(log_age_s=30), "run.stalled", "pass", []),
    ("overlay", watch(out="/root/out"), "run.checkpoint-ephemeral", "block", ["/root/out", "overlay"]),
    ("tmpfs", watch(out="/dev/shm/out"), "run.checkpoint-ephemeral", "block", ["tmpfs"]),
    ("volume", watch(), "run.checkpoint-ephemeral", "pass", ["/workspace/out"]),
    ("next-save-fails", watch(free=10 * 10**9), "run.disk-eta", "block", ["10.0 GB free", "16.0 GB"]),
]


@pytest.mark.parametrize(("facts", "check", "severity", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_case(facts, check, severity, words):
    finding = one(facts, check)
    assert finding.severity.value == severity, finding.message
    for word in words:
        assert word in finding.message
    if severity in ("warn", "block"):
        assert finding.fix, "every problem comes with a fix or advice"


def test_no_job_says_the_same_on_pods_of_any_price():
    # A price in the message would make one group per price; the money line sums the $/h.
    cheap, dear = (ProviderInfo(provider="runpod", pod_id="abc", cost_per_hour=c) for c in (0.69, 2.49))
    first = one(watch(job=None, util=0.0), "run.no-job", provider=cheap).message
    assert first == one(watch(job=None, util=0.0), "run.no-job", provider=dear).message
    assert "$" not in first and "bills for nothing" in first


def test_plateau_uses_the_jobs_label_count():
    three = [math.log(3)] * 12
    assert one(watch(losses=three), "run.loss-plateau", settings=WatchSettings(num_labels=3)).severity.value == "warn"
    # The same losses are no plateau for two classes, and ln 2 is no plateau for three.
    assert one(watch(losses=three), "run.loss-plateau").severity.value == "pass"
    ln2 = one(watch(losses=[LN2] * 12), "run.loss-plateau", settings=WatchSettings(num_labels=3))
    assert ln2.severity.value == "pass"
    counted = one(watch(losses=three), "run.loss-plateau", settings=WatchSettings(dataset_labels=3))
    assert counted.severity.value == "warn" and "dataset" in counted.message


def test_stalled_is_judged_by_the_pods_clock_and_the_stall_minutes():
    # The facts' clock is NOW, years from the laptop's: only the difference on the pod counts.
    assert one(watch(log_age_s=20 * 60), "run.stalled").severity.value == "warn"
    relaxed = WatchSettings(stall_minutes=30)
    assert one(watch(log_age_s=20 * 60), "run.stalled", settings=relaxed).severity.value == "pass"


def test_disk_eta_warns_with_the_numbers_before_max_steps():
    state = {"path": "/workspace/out/checkpoint-500/trainer_state.json", "global_step": 500, "max_steps": 5000}
    state.update(save_steps=500, mtime=NOW)
    finding = one(watch(free=100 * 10**9, state=state), "run.disk-eta")
    assert finding.severity.value == "warn"
    # 9 checkpoints to come of 16 GB each: 144 GB against 100 GB free, room for 6.
    assert "9 more checkpoints of 16.0 GB" in finding.message and "holds 6" in finding.message
    assert "save_total_limit to 6" in finding.fix.advice
    # save_total_limit 3 keeps at most 4 on disk at once: one is there, 3 more fit.
    bounded = one(watch(free=100 * 10**9, state=state), "run.disk-eta", settings=WatchSettings(save_total_limit=3))
    assert bounded.severity.value == "pass"


def test_disk_eta_uses_the_growth_since_the_last_pass():
    state = {"path": "/workspace/out/checkpoint-500/trainer_state.json", "global_step": 500, "max_steps": 50000}
    state.update(mtime=NOW)
    earlier = watch(free=400 * 10**9, state=state, checkpoints=())
    earlier.outputs.now = NOW - 3600
    now = watch(free=300 * 10**9, state=state, checkpoints=())
    now.log.progress = {"step": 1000, "total": 50000, "seconds_per_step": 2.0}
    finding = one(now, "run.disk-eta", settings=WatchSettings(previous=earlier))
    # 100 GB an hour, 300 GB free: 3 h; 49,000 steps at 2 s: 27 h.
    assert finding.severity.value == "warn" and "3.0 h" in finding.message and "27.2 h" in finding.message


def test_a_real_trainer_state_reads_and_judges_as_a_run_that_learned():
    state = _trainer_state(str(FIXTURE))
    assert state["global_step"] == 375 and state["max_steps"] == 375 and state["save_steps"] == 500
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert losses[0] == 0.6899 and len(losses) == 18
    facts = watch(state=dict(state, mtime=NOW))
    facts.log = None
    assert one(facts, "run.loss-plateau").severity.value == "pass"
    assert one(facts, "run.loss-nan").severity.value == "pass"
    found = progress(Facts(watch=facts))
    assert found.step == 375 and found.max_steps == 375 and found.last_loss == 0.349


def test_nan_in_trainer_state_travels_as_text(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text('{"global_step": 40, "log_history": [{"loss": NaN, "step": 40}, {"loss": Infinity, "step": 45}]}')
    state = _trainer_state(str(path))
    assert [e["loss"] for e in state["log_history"]] == ["nan", "inf"]
    facts = watch(state=dict(state, mtime=NOW))
    facts.log = None
    assert one(facts, "run.loss-nan").severity.value == "block"


def test_only_run_checks_judge_a_watch():
    found = evaluate_watch(Facts(watch=watch(util=0.0)), CheckOptions(), None, WatchSettings())
    assert found and all(f.check.startswith("run.") for f in found)


def test_before_the_first_checkpoint_the_job_budget_sizes_one():
    job = Job.model_validate({"params": "1B", "max_steps": 1000, "save_steps": 100, "num_labels": 5})
    settings = settings_for(job)
    # storage.budget's arithmetic for a full bf16 AdamW run: about 14 bytes a parameter.
    assert 10 * 10**9 < settings.checkpoint_bytes < 20 * 10**9
    assert settings.num_labels == 5 and settings.job_max_steps == 1000
    finding = one(watch(free=5 * 10**9, checkpoints=()), "run.disk-eta", settings=settings)
    assert finding.severity.value == "block" and "job budget" in finding.message
    # Once a checkpoint is written, its size counts instead.
    written = one(
        watch(free=5 * 10**9, checkpoints=(("checkpoint-100", 100, 10**9),)), "run.disk-eta", settings=settings
    )
    assert written.severity.value != "block"


def ranked(*ranks: tuple[str, float], versions: dict | None = None) -> dict:
    """The job with one rank per (state, CPU cores), ranks 0.. in order, as torchrun starts them."""
    return dict(
        JOB,
        ranks=[
            {"pid": 100 + i, "rank": i, "local_rank": i, "world_size": len(ranks), "local_world_size": len(ranks)}
            | {"state": state, "cpu_cores": cores, "cpu_s": 30.0}
            for i, (state, cores) in enumerate(ranks)
        ],
        versions=versions or {},
    )


def test_transformers_5_under_ddp_is_judged_against_the_loss_it_logs():
    # Transformers 5 logs the loss summed over the ranks: 2 ranks at chance log 2 x ln 2 = 1.386.
    v5 = ranked(("S", 1.0), ("S", 1.0), versions={"torch": "2.13.0", "transformers": "5.25.0"})
    logged = [1.388, 1.391, 1.387, 1.388, 1.387, 1.386, 1.386, 1.387, 1.386, 1.388]
    plateau = one(watch(job=v5, losses=logged), "run.loss-plateau")
    assert plateau.severity.value == "warn" and "2 x ln(2) = 1.386" in plateau.message
    assert "Transformers 5.25.0" in plateau.message
    # Single-rank ln 2 from the same job is no plateau (it is half the chance it logs) ...
    assert one(watch(job=v5, losses=[LN2] * 12), "run.loss-plateau").severity.value == "pass"
    # ... and without Transformers 5 the ranks do not scale it.
    v4 = ranked(("S", 1.0), ("S", 1.0), versions={"transformers": "4.46.3"})
    assert one(watch(job=v4, losses=[LN2] * 12), "run.loss-plateau").severity.value == "warn"
    assert one(watch(job=v4, losses=logged), "run.loss-plateau").severity.value == "pass"


@pytest.mark.parametrize(
    ("ranks", "odd_pid", "words"),
    [
        ((("S", 0.2), ("T", 0.0)), 101, ["rank 1 (pid 101) is stopped", "state T", "other rank is in state S"]),
        ((("D", 0.0), ("S", 0.0), ("S", 0.0)), 100, ["rank 0 (pid 100) is in uninterruptible sleep"]),
        ((("S", 0.0), ("Z", 0.0)), 101, ["rank 1 (pid 101) is a zombie"]),
        ((("R", 1.0), ("S", 0.0), ("R", 1.0)), 101, ["rank 1 (pid 101) uses no CPU while the other 2 ranks are"]),
        ((("R", 1.0), ("S", 0.0), ("S", 0.01)), 100, ["rank 0 (pid 100) keeps 1.0 CPU cores busy"]),
        ((("S", 0.0), ("S", 0.0)), None, ["do not single out one rank", "rank 0 (pid 100) S", "rank 1 (pid 101) S"]),
    ],
)
def test_a_stall_names_the_rank_that_holds_the_others_up(ranks, odd_pid, words):
    found = one(watch(job=ranked(*ranks), log_age_s=40 * 60, py_spy="/usr/local/bin/py-spy"), "run.stalled")
    assert found.severity.value == "warn"
    for word in words:
        assert word in found.message, found.message
    dump = found.fix.commands[0]
    assert dump == f"py-spy dump --pid {odd_pid if odd_pid is not None else 100}"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1" in found.fix.advice


def test_a_rank_that_exited_while_the_others_run():
    job = ranked(("S", 0.0), ("S", 0.0))
    job["ranks"] = job["ranks"][:1]
    found = one(watch(job=job, log_age_s=40 * 60), "run.stalled")
    assert "local rank 1 of 2 exited while rank 0 still run" in found.message
    # Without py-spy on the pod the fix says how to get it, and runs nothing that is not there.
    assert not any(c.startswith("py-spy") for c in found.fix.commands)
    assert "pip install py-spy" in found.fix.advice


def test_a_stopped_rank_is_resumed_by_hand_only():
    found = one(watch(job=ranked(("S", 0.0), ("T", 0.0)), log_age_s=40 * 60), "run.stalled")
    assert "`kill -CONT 101`" in found.fix.advice
    assert not any("kill" in c for c in found.fix.commands)


def test_a_single_process_job_keeps_the_plain_stall_words():
    found = one(watch(log_age_s=40 * 60), "run.stalled")
    assert "a hang (NCCL" in found.message and "pip install py-spy" in found.fix.advice


def test_a_stall_on_a_machine_that_failed_before_says_to_give_the_pod_back():
    machine = LedgerMachine(provider="runpod", machine_id="m-7", runs=5, blocked_runs=3, checks={"gpu.xid": 3})
    stalled = watch(job=ranked(("S", 0.0), ("S", 0.0)), log_age_s=40 * 60)
    found = one(stalled, "run.stalled", settings=WatchSettings(machine=machine))
    assert "the machine behind this pod (runpod m-7) failed 3 of 5 fleet checks before (gpu.xid)" in found.fix.advice
    assert "give the pod back" in found.fix.advice
    # A machine the history saw pass every time changes nothing.
    clean = LedgerMachine(provider="runpod", machine_id="m-8", runs=5)
    assert "give the pod back" not in one(stalled, "run.stalled", settings=WatchSettings(machine=clean)).fix.advice


def test_an_idle_gpus_fix_runs_py_spy_only_where_the_pod_has_it():
    idle = watch(job=dict(JOB, cpu_cores=7.5), util=0.0)
    without = one(idle, "run.gpu-idle")
    assert without.fix.commands == []
    assert f"`pip install py-spy` on the pod, then `py-spy dump --pid {JOB['pid']}`" in without.fix.advice
    installed = one(
        idle.model_copy(update={"processes": idle.processes.model_copy(update={"py_spy": "/usr/bin/py-spy"})}),
        "run.gpu-idle",
    )
    assert installed.fix.commands == [f"py-spy dump --pid {JOB['pid']}"]
    assert "pip install" not in installed.fix.advice


@pytest.mark.parametrize("collector", ["processes", "gpu"])
def test_a_watch_collector_past_its_limit_is_unknown_never_no_job_or_idle(collector):
    # What a timed-out collector leaves: no process listed, no GPU sample.
    silent = watch(job=None, util=None)
    status = CollectorStatus(ok=False, timed_out=True, error="timed out after 8.0s", duration_s=8.0)
    facts = Facts(watch=silent, collectors={collector: status})
    found = {f.check: f for f in evaluate_watch(facts, CheckOptions(), None, WatchSettings())}
    no_job = found["run.no-job"]
    assert no_job.severity.value == "skip"
    assert no_job.message == f"unknown: the watch's {collector} collector ran out of time (timed out after 8.0s)"
    # Answered in time, the same silence is a verdict.
    assert one(silent, "run.no-job").severity.value == "warn"


def test_no_job_is_not_claimed_when_job_process_ran_past_its_time():
    facts = watch(job=None, util=0.0)
    error = "job.process stopped after 2.0s; training processes recognised by name only"
    facts = facts.model_copy(update={"processes": facts.processes.model_copy(update={"job_process_error": error})})
    found = one(facts, "run.no-job")
    assert found.severity.value == "skip" and "simplify job.process" in found.message
