"""Simulated training runs on the demo pods, for `fleet watch --demo`.

Each job is a real process tree on this machine, as on a pod: `python3 .../torchrun
--nproc_per_node=1 train.py ...` and its worker `python3 -u train.py ...`, started in the
pod's folder with the pod's environment, its stdout (the job's log) a file in the pod's
workspace. They print what a Hugging Face Trainer (Transformers 5) under torchrun prints:
torchrun's warning head, tqdm redraws with carriage returns, and the log dicts with quoted
values. Each process links itself into the pod's simulated /proc, so the pod's watch probe
sees its own job and no other pod's. The first steps replay at once, so one watch pass has
enough of a log to judge; the run then goes on slowly until the demo ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from computefence.demo.fakes import GPU_ACTIVITY_FILE

# Steps replayed at once when a job starts: past step 200, where a loss at chance becomes a
# plateau (computefence.evaluate.checks.watch_checks.PLATEAU_MIN_STEPS), with 22 logged losses and
# four checkpoints.
FAST_STEPS = 220
_READY_TIMEOUT_S = 20.0


def write_job_files(bin_dir: Path, job_dir: Path) -> None:
    """torchrun on the pod's PATH and the job's train.py (one script plays both, as in
    tests/fleet/fake_trainer.py)."""
    (bin_dir / "torchrun").write_text(_TRAINER, encoding="utf-8")
    (bin_dir / "torchrun").chmod(0o755)
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "train.py").write_text(_TRAINER, encoding="utf-8")


def start_job(
    bin_dir: Path, job_dir: Path, proc_dir: Path, log: Path, env: Mapping[str, str], args: tuple[str, ...]
) -> subprocess.Popen[bytes]:
    """`cd JOB_DIR && torchrun --nproc_per_node=1 train.py ARGS > LOG 2>&1`, in its own session."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(bin_dir / "python3"), str(bin_dir / "torchrun"), "--nproc_per_node=1", "train.py", *args],
            cwd=job_dir,
            env={**env, "COMPUTEFENCE_DEMO_PROC": str(proc_dir), "COMPUTEFENCE_DEMO_GPU": str(bin_dir)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_until_ready(markers: list[Path], jobs: list[subprocess.Popen[bytes]]) -> None:
    """Until each job has replayed its first steps (its marker file exists), or a job died."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if all(marker.exists() for marker in markers):
            return
        if any(job.poll() is not None for job in jobs):
            return  # the watch will report the pod without a job
        time.sleep(0.05)


def stop_jobs(jobs: list[subprocess.Popen[bytes]]) -> None:
    for job in jobs:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            job.wait(5)
        except subprocess.TimeoutExpired:
            pass


# Standard library, Python 3.8: the pod's interpreter runs it.
_TRAINER = """#!/usr/bin/env python3
# A simulated Hugging Face Trainer run under torchrun (computefence.demo.jobs).
import argparse
import json
import math
import os
import subprocess
import sys
import time

FAST_STEPS = @FAST_STEPS@
TORCHRUN_HEAD = (
    "*****************************************",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed. ",
    "*****************************************",
)


def link_into_pod():
    proc = os.environ.get("COMPUTEFENCE_DEMO_PROC")
    if proc:
        try:
            os.symlink("/proc/%d" % os.getpid(), os.path.join(proc, str(os.getpid())))
        except OSError:
            pass


# The pace tqdm shows: what a real run at this step time would show, replayed steps included.
RATE = 2.41


def clock(seconds):
    minutes, seconds = divmod(int(seconds), 60)
    return "%02d:%02d" % (minutes, seconds)


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_steps", type=int, default=2000)
    parser.add_argument("--save_steps", type=int, default=50)
    parser.add_argument("--logging_steps", type=int, default=10)
    parser.add_argument("--loss", choices=("healthy", "plateau", "nan"), default="healthy")
    parser.add_argument("--utilization", type=float, default=97.0)
    parser.add_argument("--stall_after", type=int, default=None)
    parser.add_argument("--ready", default=None)
    return parser.parse_args(argv)


def loss_at(mode, step):
    if mode == "plateau":
        return math.log(2) + 0.0015 * math.sin(step)
    if mode == "nan" and step >= 40:
        return float("nan")
    return 0.02 + 1.3 * math.exp(-step / 25.0)


def quoted(value):
    # Transformers 5 logs each value as a string of 4 significant digits.
    return "nan" if value != value else "%.4g" % value


def save(args, step, history):
    folder = os.path.join(args.output_dir, "checkpoint-%d" % step)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.safetensors"), "wb") as handle:
        handle.write(b"\\0" * 65536)
    state = {
        "global_step": step,
        "max_steps": args.max_steps,
        "logging_steps": args.logging_steps,
        "save_steps": args.save_steps,
        "train_batch_size": 16,
        "num_train_epochs": 3,
        "epoch": round(step / 128.0, 5),
        "log_history": history,
    }
    with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
        json.dump(state, handle, indent=2)


def gpu_busy(utilization):
    folder = os.environ.get("COMPUTEFENCE_DEMO_GPU")
    if folder:
        document = {
            "utilization": [utilization],
            "memory_used_mib": [71000 if utilization else 900],
            "apps": [{"pid": os.getpid(), "gpu": 0, "used_memory_mib": 70950 if utilization else 850}],
        }
        with open(os.path.join(folder, "@ACTIVITY@"), "w") as handle:
            json.dump(document, handle)


def age(args, seconds):
    past = time.time() - seconds
    for root, dirs, files in os.walk(args.output_dir):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (past, past))
    os.utime(sys.stdout.fileno(), (past, past))


def train(args):
    gpu_busy(args.utilization)
    history = []
    for step in range(1, args.max_steps + 1):
        if step > FAST_STEPS:
            time.sleep(1.0 / RATE)
        left = (args.max_steps - step) / RATE
        sys.stdout.write(
            "\\r%3d%%|          | %d/%d [%s<%s, %.2fit/s]"
            % (100 * step // args.max_steps, step, args.max_steps, clock(step / RATE), clock(left), RATE)
        )
        if step % args.logging_steps == 0:
            loss = loss_at(args.loss, step)
            entry = {"loss": loss, "grad_norm": 0.3631, "learning_rate": 0.004775, "epoch": round(step / 128.0, 5)}
            sys.stdout.write("\\r" + " " * 47 + "\\r")
            sys.stdout.write(repr({k: quoted(v) for k, v in entry.items()}) + "\\n")
            history.append(dict(entry, loss=loss if loss == loss else None, step=step))
        sys.stdout.flush()
        if step % args.save_steps == 0:
            save(args, step, history)
        if step == FAST_STEPS and args.ready:
            open(args.ready, "w").close()
        if args.stall_after is not None and step >= args.stall_after:
            age(args, 1200)
            if args.ready:
                open(args.ready, "w").close()
            while True:
                time.sleep(3600)


def main(argv):
    link_into_pod()
    if os.path.basename(sys.argv[0]) == "torchrun":
        for line in TORCHRUN_HEAD:
            sys.stderr.write("W1207 02:44:09.890000 %d site-packages/torch/distributed/run.py:874] %s\\n" % (os.getpid(), line))
        sys.stderr.flush()
        rest = [a for a in argv if not a.startswith("--nproc_per_node")]
        return subprocess.call([sys.executable, "-u"] + rest)
    train(parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
""".replace("@FAST_STEPS@", str(FAST_STEPS)).replace("@ACTIVITY@", GPU_ACTIVITY_FILE)
