"""A stand-in for a Hugging Face Trainer run, for the `fleet watch` tests on sshd pods.

Installed in a pod twice: as /usr/local/bin/torchrun (which, like the real console script,
runs as `python3 /usr/local/bin/torchrun ... train.py ...` and starts the script as its
worker) and as /opt/job/train.py. It writes what the Trainer writes as it goes: log lines
on stdout (`{'loss': ..., 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}` and a tqdm
bar), and every --save_steps a checkpoint-N/ folder with model.safetensors and a
trainer_state.json shaped like tests/fixtures/watch/trainer_state.imdb-distilbert-lora.json.

It also stands in for what the driver sees of a CUDA process: with --gpu-activity FILE it
writes the fake nvidia-smi's activity file (utilisation, its own pid holding memory).

Standard library only, Python 3.8: it runs on the pod's own interpreter.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_steps", type=int, default=100000)
    parser.add_argument("--save_steps", type=int, default=50)
    parser.add_argument("--logging_steps", type=int, default=5)
    parser.add_argument("--steps_per_second", type=float, default=50.0)
    # healthy: falls from 2.3 toward 0.3; plateau: sits at ln 2; nan: NaN from step 40 on.
    parser.add_argument("--loss", choices=("healthy", "plateau", "nan"), default="healthy")
    parser.add_argument("--checkpoint_bytes", type=int, default=1 << 20)
    # Stop writing after this step but stay alive, with files last touched this long ago.
    parser.add_argument("--stall_after", type=int, default=None)
    parser.add_argument("--stall_age_s", type=float, default=1200.0)
    # Keep a CPU core busy (a job computing on the CPU).
    parser.add_argument("--burn_cpu", action="store_true")
    parser.add_argument("--gpu-activity", dest="gpu_activity", default=None)
    parser.add_argument("--utilization", type=float, default=95.0)
    parser.add_argument("--hub_token", default=None)
    return parser.parse_args(argv)


def loss_at(mode, step):
    if mode == "plateau":
        return round(math.log(2) + 0.002 * math.sin(step), 4)
    if mode == "nan" and step >= 40:
        return float("nan")
    return round(0.3 + 2.0 * math.exp(-step / 200.0), 4)


def save(args, step, history):
    folder = os.path.join(args.output_dir, "checkpoint-%d" % step)
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "model.safetensors"), "wb") as handle:
            handle.write(os.urandom(args.checkpoint_bytes))
        state = {
            "best_global_step": None,
            "best_metric": None,
            "best_model_checkpoint": None,
            "epoch": round(step / 1000.0, 4),
            "eval_steps": 500,
            "global_step": step,
            "is_hyper_param_search": False,
            "is_local_process_zero": True,
            "is_world_process_zero": True,
            "log_history": history,
            "logging_steps": args.logging_steps,
            "max_steps": args.max_steps,
            "num_input_tokens_seen": 0,
            "num_train_epochs": 3,
            "save_steps": args.save_steps,
            "total_flos": 0.0,
            "train_batch_size": 16,
            "trial_name": None,
            "trial_params": None,
        }
        with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
            json.dump(state, handle, indent=2)
    except OSError as exc:  # a full disk: the real Trainer dies here; keep going for the test
        print("OSError: %s" % exc, flush=True)


def write_activity(args):
    if args.gpu_activity:
        document = {
            "utilization": [args.utilization],
            "memory_used_mib": [71000],
            "apps": [{"pid": os.getpid(), "gpu": 0, "used_memory_mib": 70950}],
        }
        with open(args.gpu_activity, "w") as handle:
            json.dump(document, handle)


def burn():
    while True:
        sum(i * i for i in range(10000))


def age_everything(args, age):
    past = time.time() - age
    for root, dirs, files in os.walk(args.output_dir):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (past, past))
    # The log is our stdout (torchrun's, redirected to a file).
    os.utime(sys.stdout.fileno(), (past, past))


def train(args):
    write_activity(args)
    if args.burn_cpu:
        threading.Thread(target=burn, daemon=True).start()
    history = []
    started = time.time()
    for step in range(1, args.max_steps + 1):
        time.sleep(1.0 / args.steps_per_second)
        if step % args.logging_steps == 0:
            loss = loss_at(args.loss, step)
            entry = {"epoch": round(step / 1000.0, 4), "grad_norm": 1.0, "learning_rate": 5e-05, "loss": loss}
            print(repr(entry), flush=True)
            history.append(dict(entry, step=step))
            rate = step / (time.time() - started)
            sys.stdout.write(
                "\r%3d%%| | %d/%d [00:00<00:00, %.2fit/s]" % (100 * step // args.max_steps, step, args.max_steps, rate)
            )
            sys.stdout.flush()
        if step % args.save_steps == 0:
            save(args, step, history)
        if args.stall_after is not None and step >= args.stall_after:
            age_everything(args, args.stall_age_s)
            while True:
                time.sleep(3600)


def main(argv):
    if os.path.basename(sys.argv[0]) == "torchrun":
        # torchrun [--nproc_per_node=N] SCRIPT ARGS: the worker is `python3 -u SCRIPT ARGS`.
        rest = [a for a in argv if not a.startswith("--nproc_per_node")]
        return subprocess.call([sys.executable, "-u", *rest])
    train(parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
