"""The watch probe's parts: nvidia-smi CSV as the driver prints it, training command lines
(and their secrets), the log's losses and progress bar, and the assembled script."""

from __future__ import annotations

import ast
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from computefence.connectors import payload
from computefence.errors import ProbeOutputError
from computefence.probe import assemble
from computefence.probe.assemble import WATCH_PARTS
from computefence.probe.core import _in_child
from computefence.probe.watch_files import (
    _describe_dir,
    _loss_patterns,
    _redact_line,
    _trainer_state,
    collect_watch_log,
)
from computefence.probe.watch_gpu import _parse_smi_csv
from computefence.probe.watch_jobs import _launch_kind, _output_dir_arg, _redact_argv

# Published outputs of the real driver for these queries (header with units, [N/A] per field).
UTILIZATION_CSV = "utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n95 %, 745 MiB, 6144 MiB\n"
APPS_CSV = "pid, used_gpu_memory [MiB]\n1584, [N/A]\n7500, [N/A]\n"
APPS_UUID_CSV = (
    "gpu_uuid, pid, used_gpu_memory [MiB]\n"
    "GPU-e82ab913-2d6b-1a55-89a8-9ad23a5a09cf, 1912379, 518 MiB\n"
    "GPU-f7c1496c-b7f5-b1d2-78ea-68826f778059, 3891903, 74698 MiB\n"
)
NO_APPS_CSV = "pid, used_gpu_memory [MiB]\n"


def test_nvidia_smi_csv_is_read_by_its_header():
    assert _parse_smi_csv(UTILIZATION_CSV) == [{"utilization.gpu": "95", "memory.used": "745", "memory.total": "6144"}]
    assert _parse_smi_csv(APPS_CSV) == [
        {"pid": "1584", "used_gpu_memory": None},
        {"pid": "7500", "used_gpu_memory": None},
    ]
    assert _parse_smi_csv(APPS_UUID_CSV)[1] == {
        "gpu_uuid": "GPU-f7c1496c-b7f5-b1d2-78ea-68826f778059",
        "pid": "3891903",
        "used_gpu_memory": "74698",
    }
    assert _parse_smi_csv(NO_APPS_CSV) == []


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc_per_node=8", "train.py"], "torchrun"),
        (["torchrun", "--standalone", "train.py"], "torchrun"),
        (["/opt/conda/bin/python", "/opt/conda/bin/accelerate", "launch", "train.py"], "accelerate"),
        (["/opt/conda/bin/python", "/opt/conda/bin/accelerate", "config"], None),
        (["deepspeed", "--num_gpus=8", "finetune.py"], "deepspeed"),
        (["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "x.py"], "torch"),
        (["python3.11", "-u", "scripts/train_lora.py", "--lr", "1e-4"], "python"),
        (["python", "-m", "myproject.train"], "python -m"),
        (["python3", "serve.py"], None),
        (["python3", "-c", "import train"], None),
        (["/usr/sbin/sshd", "-D"], None),
        ([], None),
    ],
)
def test_training_command_lines(argv, kind):
    assert _launch_kind(argv, None) == kind


def test_job_process_pattern_matches_any_command():
    import re

    assert _launch_kind(["./my-launcher", "--config", "run.yaml"], re.compile(r"my-launcher")) == "job.process"


def test_secrets_in_command_lines_are_replaced_on_the_pod():
    argv = [
        "python3",
        "train.py",
        "--hub_token",
        "hf_abcdefghijklmnopqrstuvwx",
        "--wandb_api_key=0123456789abcdef",
        "--report_to",
        "wandb",
        "--push_to_hub",
        "--dataset",
        "https://user:s3cr3t@data.example.com/train.jsonl",
        "ghp_abcdefghijklmnopqrstu",
    ]
    redacted = _redact_argv(argv)
    text = " ".join(redacted)
    for secret in ("hf_abcdefghijklmnopqrstuvwx", "0123456789abcdef", "s3cr3t", "ghp_abcdefghijklmnopqrstu"):
        assert secret not in text
    assert redacted[2:4] == ["--hub_token", "***"] and redacted[4] == "--wandb_api_key=***"
    assert redacted[5:8] == ["--report_to", "wandb", "--push_to_hub"]


def test_secrets_in_log_lines_are_replaced_on_the_pod():
    line = "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx {'hub_token': 'hf_zyxwvutsrqponmlkjihgfedc', 'loss': 0.5} Bearer eyJhbGciOi.eyJzdWIi.c2ln"
    redacted = _redact_line(line)
    assert "hf_" not in redacted and "eyJ" not in redacted and "'loss': 0.5" in redacted


def test_output_dir_from_the_command_line():
    assert _output_dir_arg(["python", "train.py", "--output_dir", "out"], "/workspace/job") == "/workspace/job/out"
    assert _output_dir_arg(["python", "train.py", "--output-dir=/ckpt"], "/") == "/ckpt"
    assert _output_dir_arg(["python", "train.py", "--default_root_dir", "/lt"], "/") == "/lt"
    assert _output_dir_arg(["python", "train.py"], "/") is None


HF_LOG = (
    " 10%|█         | 100/1000 [00:50<07:30,  2.00it/s]\r"
    " 10%|█         | 101/1000 [00:50<07:30,  2.00it/s]\n"
    "{'loss': 0.6931, 'grad_norm': 0.51, 'learning_rate': 4.9e-05, 'epoch': 0.1}\n"
    "{'eval_loss': 0.7, 'eval_runtime': 3.2, 'epoch': 0.1}\n"
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.2}\n"
    " 20%|██        | 200/1000 [08:00<5:20:00, 24.10s/it]\n"
)
LIGHTNING_LOG = (
    "Epoch 0:  10%|█         | 10/100 [00:01<00:09,  9.80it/s, v_num=0, train_loss=0.693]\r"
    "Epoch 0:  11%|█         | 11/100 [00:01<00:09,  9.80it/s, v_num=0, train_loss_step=0.690]\r"
)


def _log(tmp_path, text, **params):
    path = tmp_path / "train.log"
    path.write_text(text)
    return collect_watch_log({"job_log": str(path), "roots": {"proc": "/nonexistent"}, **params})


def test_hugging_face_log_losses_and_progress(tmp_path):
    facts = _log(tmp_path, HF_LOG)
    assert facts["losses"] == [0.6931, "nan"]
    assert facts["progress"] == {"step": 200, "total": 1000, "seconds_per_step": 24.1}
    assert facts["origin"] == "job.log" and facts["tail"][-1].startswith("20%")


def test_lightning_progress_bar_losses(tmp_path):
    facts = _log(tmp_path, LIGHTNING_LOG)
    assert facts["losses"] == [0.693, 0.69]
    assert facts["progress"]["step"] == 11 and abs(facts["progress"]["seconds_per_step"] - 1 / 9.8) < 1e-9


def test_a_custom_loss_regex(tmp_path):
    facts = _log(tmp_path, "step 5 | train/loss 1.25\nstep 6 | train/loss 1.20\n", loss_regex=r"train/loss ([0-9.]+)")
    assert facts["losses"] == [1.25, 1.2]


def test_default_patterns_leave_eval_loss_and_train_loss_summaries_alone():
    patterns, _ = _loss_patterns({})
    line = "{'eval_loss': 0.7, 'train_loss': 0.5}"
    assert not any(p.search(line) for p in patterns)


def test_the_watch_probe_is_one_python_3_8_script_that_answers_with_a_watch_section():
    source = assemble.probe_source(assemble.probe_parts({}, WATCH_PARTS))
    ast.parse(source, feature_version=(3, 8))
    assert "collect_watch_gpu" in source and "collect_torch" not in source
    script = assemble.probe_payload({"gpu_window_s": 0.2, "cpu_window_s": 0.1}, "watch")
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=60)
    facts = payload.parse_probe_output(done.stdout, "watch")
    assert facts.watch is not None and facts.watch.identity.hostname
    assert set(json.loads(done.stdout)["collectors"]) == {"identity", "gpu", "processes", "outputs", "log"}


def test_a_watch_answer_must_carry_its_watch_section():
    with pytest.raises(ProbeOutputError):
        payload.parse_probe_output('{"probe_schema_version": 1}', "watch")
    # A check probe's answer is not a watch answer either.
    check_answer = json.dumps({"probe_schema_version": 1, "identity": {}, "storage": {}, "gpu": {}})
    with pytest.raises(ProbeOutputError):
        payload.parse_probe_output(check_answer, "watch")


def test_a_fifo_where_the_log_or_trainer_state_belongs_is_not_read(tmp_path):
    # A FIFO would block the read for good: the collector says so and answers at once.
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    started = time.monotonic()
    facts = collect_watch_log({"job_log": str(fifo), "roots": {"proc": "/nonexistent"}})
    assert facts["error"] == "not a regular file" and facts["losses"] == []
    state = tmp_path / "trainer_state.json"
    os.mkfifo(state)
    assert _trainer_state(str(state))["error"].endswith("not a regular file")
    assert time.monotonic() - started < 2


# ---------------------------------------------------------------- real logs, hostile logs

REAL_LOG = Path(__file__).parents[1] / "fixtures" / "watch" / "hf-trainer-2rank-uninformative.log"
# Lines the probe's patterns could once take quadratic (or worse) time over: one run of
# word characters, and runs shaped to restart a pattern at every character.
LONG_LINES = {
    "word characters": "a" * (1 << 20),
    "assignments": "x=" * (1 << 19),
    "schemes": "a://" * (1 << 18),
    "bare credentials": ",a:" * 349525,
    "progress bars": "1/1 [" * 209715,
    "digits": "1" * (1 << 20),
}


def test_a_real_trainer_log_gives_its_losses_steps_and_bar(tmp_path):
    # Transformers 5, torchrun with 2 ranks, labels that carry no information: tqdm's \r
    # redraws, quoted values, the loss logged as 2 x ln 2.
    raw = REAL_LOG.read_bytes()
    assert b"\r" in raw and b"{'loss': '1.3" in raw
    facts = _log(tmp_path, raw.decode())
    assert len(facts["losses"]) == 25 and all(abs(v - 2 * math.log(2)) < 0.01 for v in facts["losses"])
    # Each loss carries the step of the progress bar drawn before it (logging_steps=10).
    assert facts["loss_steps"][-1] >= 240 and facts["loss_steps"] == sorted(facts["loss_steps"])
    assert facts["progress"]["step"] == 250 and facts["progress"]["total"] == 250
    assert facts["lines_cut"] == 0


@pytest.mark.parametrize("shape", list(LONG_LINES))
def test_a_one_mebibyte_line_is_cut_and_the_losses_after_it_still_read(tmp_path, shape):
    text = LONG_LINES[shape] + "\n" + "{'loss': '0.5012', 'epoch': '0.1'}\n" * 3
    facts = _log(tmp_path, text, _deadline=time.time() + 20)
    assert facts.get("error") is None, facts.get("error")
    assert facts["losses"] == [0.5012] * 3 and facts["lines_cut"] == 1
    assert all(len(line) <= 300 + len("...[truncated]") for line in facts["tail"])


@pytest.mark.parametrize("shape", list(LONG_LINES))
def test_redaction_is_linear_in_the_line(shape):
    # Run where the probe runs its log work: in a child stopped at its deadline. The old
    # redaction took 42 s for 32 KB of word characters; this is 1 MiB.
    found, why = _in_child(lambda: len(_redact_line(LONG_LINES[shape])), 20.0)
    assert why is None and found >= len(LONG_LINES[shape]) // 2


def test_millions_of_lines_cost_only_the_tail(tmp_path):
    path = tmp_path / "train.log"
    with open(path, "w") as handle:
        for block in range(40):
            handle.write("".join("{'loss': '%d.%05d'}\n" % (block, i) for i in range(50000)))
    facts = collect_watch_log({"job_log": str(path), "roots": {"proc": "/nonexistent"}, "_deadline": time.time() + 20})
    assert facts["size_bytes"] > 30 << 20
    assert len(facts["losses"]) == 200 and facts["losses"][-1] == 39.49999


def test_binary_garbage_in_the_log(tmp_path):
    path = tmp_path / "train.log"
    garbage = bytes(random.Random(0).randrange(256) for _ in range(200_000))
    path.write_bytes(garbage + b"\n\x00\xff{'loss': 'nan'}\r step 7 | loss=0.25\n" + garbage[:1000])
    facts = collect_watch_log({"job_log": str(path), "roots": {"proc": "/nonexistent"}})
    assert facts.get("error") is None
    assert facts["losses"][-2:] == ["nan", 0.25] and facts["loss_steps"][-1] == 7
    json.dumps(facts, ensure_ascii=False).encode("utf-8")


def test_a_collector_that_overruns_is_stopped_and_the_pod_still_answers(tmp_path):
    # A job.loss_regex that backtracks exponentially on the log's one line: its child is
    # killed at the deadline, the log collector says so, the other collectors answer.
    log = tmp_path / "train.log"
    log.write_text("a" * 64 + "!\n")
    script = assemble.probe_payload(
        {
            "gpu_window_s": 0.2,
            "cpu_window_s": 0.1,
            "job_log": str(log),
            "loss_regex": r"(a|aa)+$",
            "timeouts": {"log": 3.0},
        },
        "watch",
    )
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=30)
    document = json.loads(done.stdout)
    assert document["watch"]["log"]["error"].startswith("reading its last 0 KiB stopped after")
    assert document["collectors"]["log"]["ok"] and document["collectors"]["identity"]["ok"]
    # subprocess.run returned: no child of the probe still holds its stdout open.


def test_a_checkpoint_is_described_once_under_the_dir_the_job_writes_it(tmp_path):
    # The job runs in /root and writes to /root/out: its cwd holds the output dir.
    out = tmp_path / "out" / "checkpoint-50"
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"x" * 100)
    deadline = time.time() + 10
    first = _describe_dir(str(tmp_path / "out"), "--output_dir of pid 7", [], deadline)
    assert [c["name"] for c in first["checkpoints"]] == ["checkpoint-50"]
    again = _describe_dir(str(tmp_path), "cwd of pid 7", [], deadline, {str(tmp_path / "out")})
    assert again["checkpoints"] == [] and again["checkpoint_count"] == 0


def test_a_progress_bar_whose_rate_is_no_number(tmp_path):
    facts = _log(tmp_path, " 5%|▌ | 10/200 [00:01<00:05, .it/s]\n{'loss': '0.7'}\n")
    assert facts.get("error") is None and facts["progress"] == {"step": 10, "total": 200, "seconds_per_step": None}
    assert facts["losses"] == [0.7] and facts["loss_steps"] == [10]


def test_a_job_process_pattern_that_never_ends_costs_the_pattern_not_the_answer(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import time\ntime.sleep(60)\n")
    job = subprocess.Popen([sys.executable, str(script), "a" * 64 + "!"])
    try:
        probe = assemble.probe_payload(
            {"gpu_window_s": 0.2, "cpu_window_s": 0.1, "job_process": r"(a|aa)+$", "timeouts": {"processes": 8.0}},
            "watch",
        )
        done = subprocess.run([sys.executable, "-"], input=probe, capture_output=True, text=True, timeout=30)
    finally:
        job.kill()
        job.wait()
    facts = json.loads(done.stdout)["watch"]["processes"]
    assert facts["job_process_error"].startswith("job.process stopped after 2.0s")
    # Recognised by its script's name instead.
    assert [p["matched_by"] for p in facts["processes"] if p["pid"] == job.pid] == ["python"]
