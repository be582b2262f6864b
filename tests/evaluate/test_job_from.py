"""job: {from: ...}: the fields that map one to one, read from real axolotl and LLaMA-Factory
example configs; the policy's own keys win; an unreadable file is said, not guessed around."""

from __future__ import annotations

from pathlib import Path

import pytest

from computefence.evaluate.checks.job import host_job
from computefence.evaluate.job_from import fields_from_config, job_with_file
from computefence.models import Facts, JobFromFile, ModelFacts
from computefence.policy import parse_policy_text
from computefence.yaml_lines import load_yaml_document

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "training-configs"


def _fields(name: str) -> dict:
    document, _ = load_yaml_document(CONFIGS / name, "training config")
    return fields_from_config(document)


@pytest.mark.parametrize(
    "name,expected",
    [
        (
            "axolotl-lora-8b.yml",
            {"model": "NousResearch/Meta-Llama-3-8B", "method": "lora", "precision": "bf16", "optimizer": "adamw-8bit",
             "lora": {"r": 32, "target_modules": "all-linear", "modules_to_save": ["embed_tokens", "lm_head"]}},
        ),
        (
            "axolotl-fft-8b.yaml",
            {"model": "NousResearch/Meta-Llama-3.1-8B", "precision": "bf16", "optimizer": "adamw-8bit"},
        ),
        (
            "axolotl-qlora-fsdp-70b.yaml",
            {"model": "casperhansen/llama-3-70b-fp16", "method": "qlora", "precision": "bf16", "optimizer": "adamw",
             "sharding": "fsdp", "lora": {"r": 8, "target_modules": "all-linear"}},
        ),
        (
            "llamafactory-qwen3_full_sft.yaml",
            {"model": "Qwen/Qwen3-4B-Instruct-2507", "method": "full", "precision": "bf16", "sharding": "zero3",
             "save_steps": 500, "save_only_model": False},
        ),
        (
            "llamafactory-qwen3_lora_sft_ds3.yaml",
            {"model": "Qwen/Qwen3-4B-Instruct-2507", "method": "lora", "precision": "bf16", "sharding": "zero3",
             "lora": {"r": 8, "target_modules": "all-linear"}, "save_steps": 500, "save_only_model": False},
        ),
    ],
)  # fmt: skip
def test_real_example_configs_map_the_fields_they_state(name, expected):
    assert _fields(name) == expected


def test_the_policys_own_keys_win_over_the_file():
    text = (CONFIGS / "axolotl-lora-8b.yml").read_text()
    job = parse_policy_text("job: {from: /w/lora-8b.yml, optimizer: adamw, save_total_limit: 2}", "c").job
    merged, problem = job_with_file(job, JobFromFile(path="/w/lora-8b.yml", text=text))
    assert problem is None
    assert (merged.model, merged.method, merged.optimizer, merged.save_total_limit, merged.lora.r) == (
        "NousResearch/Meta-Llama-3-8B", "lora", "adamw", 2, 32,
    )  # fmt: skip


@pytest.mark.parametrize(
    "from_file,words",
    [
        (JobFromFile(path="/w/x.yaml", error="/w/x.yaml: No such file or directory"), "No such file"),
        (JobFromFile(path="/w/x.yaml", text="a: [1\n"), "YAML syntax error"),
        (JobFromFile(path="/w/x.yaml", text="- just\n- a list\n"), "not a mapping of keys"),
        (JobFromFile(path="/w/x.yaml", text="lora_r: 0\nadapter: lora\nsave_steps: -3\nbase_model: 'a b'\n"), "neither a Hugging Face repo id"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_used_is_said_and_the_policy_alone_applies(from_file, words):
    job = parse_policy_text("job: {from: /w/x.yaml, params: 1B}", "c").job
    facts = Facts(model=ModelFacts(ref="", from_file=from_file))
    merged, problem = host_job(job, facts)
    assert merged == job and words in problem and problem.startswith("job.from")


def test_a_from_file_sizes_the_run_end_to_end():
    from evaluate_builders import GB, mount, only, path, runpod_pod

    from computefence.evaluate import evaluate_host
    from computefence.models import CheckOptions, Severity

    text = (CONFIGS / "llamafactory-qwen3_full_sft.yaml").read_text()
    facts = runpod_pod(volume_free=100 * GB)
    out = path("output_dir", "/workspace/out", mount("/workspace", "ext4", "/dev/sdb"), free=100 * GB)
    facts = facts.model_copy(
        update={
            "storage": facts.storage.model_copy(update={"paths": [*facts.storage.paths, out]}),
            "model": ModelFacts(
                ref="Qwen/Qwen3-4B-Instruct-2507", from_file=JobFromFile(path="/w/sft.yaml", text=text)
            ),
        }
    )
    policy = parse_policy_text("job: {from: /w/sft.yaml, params: 4.02e9, save_total_limit: 2}", "c").for_target("p", [])
    budget = only(evaluate_host(facts, CheckOptions(output_dir="/workspace/out"), policy=policy), "storage.budget")
    # zero3 from the file's deepspeed: 16-bit model.safetensors 2 B + fp32 master and AdamW 12 B.
    assert budget.severity is Severity.BLOCK and budget.message.startswith(
        "needs 3 × 56.3 GB checkpoints + 8.0 GB final model"
    )
