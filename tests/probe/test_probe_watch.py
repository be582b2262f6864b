"""The watch probe's parts: nvidia-smi CSV as the driver prints it, training command lines
(and their secrets), the log's losses and progress bar, and the assembled script."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time

import pytest

from computefence.connectors import payload
from computefence.errors import ProbeOutputError
from computefence.probe import WATCH_PARTS
from computefence.probe.watch_files import _loss_patterns, _redact_line, _trainer_state, collect_watch_log
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
    source = payload.probe_source(payload.probe_parts({}, WATCH_PARTS))
    ast.parse(source, feature_version=(3, 8))
    assert "collect_watch_gpu" in source and "collect_torch" not in source
    script = payload.probe_payload({"gpu_window_s": 0.2, "cpu_window_s": 0.1}, "watch")
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
