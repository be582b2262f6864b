"""storage.budget, storage.model-download and gpu.memory-budget: the estimates against real
published sizes (errors stated), the arithmetic in each message, and the skips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evaluate_builders import GB, mount, only, path, runpod_pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_cache import FIXTURES
from pydantic import ValidationError

from computefence.evaluate import evaluate_host
from computefence.evaluate.checks.job import (
    ModelSize,
    adapter_params,
    budget_bytes,
    checkpoint_estimate,
    checkpoints_on_disk,
    config_params,
    gpu_estimate,
    load_training_memory,
    model_shape,
)
from computefence.models import CheckOptions, ModelFacts, ModelVolume, SafetensorsIndex, Severity, ShardFacts
from computefence.policy import Job, Lora, parse_policy_text

TABLE = load_training_memory()
GIB = 2**30

# meta-llama/Llama-3.1-8B(-Instruct)'s config.json sizes, and its index's total_size as the
# Hugging Face Hub docs print it (hub-docs, transformers.md: "total_size": 16060522496).
LLAMA_31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "torch_dtype": "bfloat16",
}
LLAMA_31_8B_TOTAL_SIZE = 16060522496


def _fixture(name: str) -> tuple[dict, dict]:
    folder = FIXTURES / name
    return (
        json.loads((folder / "config.json").read_text()),
        json.loads((folder / "model.safetensors.index.json").read_text()),
    )


@pytest.mark.parametrize("name", ["cogito-v1-preview-qwen-14B", "granite-3b-code-instruct-128k"])
def test_parameters_from_a_real_config_match_its_published_index_exactly(name):
    config, index = _fixture(name)
    # bf16 checkpoints: 2 bytes a parameter. Measured error: 0 parameters for both.
    assert config_params(config) * 2 == index["metadata"]["total_size"]


def test_llama_31_8b_parameters_match_the_published_index():
    assert config_params(LLAMA_31_8B) == 8_030_261_248 == LLAMA_31_8B_TOTAL_SIZE // 2


def test_deepspeed_zero2_8b_checkpoint_files_match_the_reported_sizes():
    # deepspeedai/DeepSpeed#6598: Llama 3.1 8B, ZeRO-2, bf16, one GPU; `du -h` of global_stepN:
    # 90G bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt, 15G mp_rank_00_model_states.pt.
    params = LLAMA_31_8B_TOTAL_SIZE // 2
    sharded = TABLE.precision["bf16"].sharded
    optim = params * (TABLE.optimizer_bytes("adamw", "bf16") + sharded.master)
    model_states = params * sharded.weights
    # du -h rounds up to whole GiB: 89.75 GiB shows as 90G (-0.28%), 14.96 GiB as 15G (-0.27%).
    assert 89 * GIB < optim <= 90 * GIB and abs(optim / (90 * GIB) - 1) < 0.003
    assert 14 * GIB < model_states <= 15 * GIB and abs(model_states / (15 * GIB) - 1) < 0.003
    # The whole HF Trainer checkpoint adds the 16-bit model.safetensors: 16 bytes a parameter.
    estimate = checkpoint_estimate(ModelSize(params, "index total_size", 2.0), Job(sharding="zero2"), TABLE)
    assert estimate.per_checkpoint == optim + model_states + params * 2


def test_an_hf_trainer_8b_full_checkpoint_is_12_bytes_a_parameter_and_lora_a_sliver():
    size = ModelSize(8_030_261_248, "index total_size", 2.0, LLAMA_31_8B)
    full = checkpoint_estimate(size, Job(), TABLE)
    assert full.per_checkpoint == 12 * size.params and full.makeup == "model 4 B + optimizer 8 B"
    assert checkpoint_estimate(size, Job(save_only_model=True), TABLE).per_checkpoint == 4 * size.params
    lora = Lora(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    # PEFT's print_trainable_parameters for this LoRA on Llama-3(.1)-8B: 13,631,488.
    assert adapter_params(model_shape(LLAMA_31_8B), lora) == 13_631_488
    adapter = checkpoint_estimate(size, Job(method="lora", lora=lora), TABLE)
    assert adapter.per_checkpoint == 13_631_488 * 12 and adapter.final == 13_631_488 * 4


def test_model_states_of_a_full_8b_fine_tune_per_gpu():
    size = ModelSize(8_030_261_248, "index total_size", 2.0, LLAMA_31_8B)
    # HF anatomy: 18 bytes a parameter on one GPU; ZeRO-3 over 8: 16 / 8.
    assert gpu_estimate(size, Job(), 1, TABLE).per_gpu == 18 * size.params
    assert gpu_estimate(size, Job(sharding="zero3"), 8, TABLE).per_gpu == 2 * size.params
    qlora = gpu_estimate(size, Job(method="qlora", lora=Lora(r=16)), 1, TABLE)
    assert 4 * GB < qlora.per_gpu < 5 * GB


# Generation slows on a loaded machine; what is checked is the property, not the speed.
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=50),
    save_steps=st.integers(min_value=1, max_value=5000),
    max_steps=st.one_of(st.none(), st.integers(min_value=1, max_value=100_000)),
    params=st.integers(min_value=10**6, max_value=10**12),
    method=st.sampled_from(["full", "lora"]),
    sharding=st.sampled_from(["none", "zero1", "zero2", "zero3", "fsdp"]),
    only_model=st.booleans(),
)
def test_the_budget_grows_with_save_total_limit_and_never_drops_below_one_checkpoint(
    limit, save_steps, max_steps, params, method, sharding, only_model
):
    size = ModelSize(params, "job.params", 2.0, LLAMA_31_8B)
    base = dict(
        save_steps=save_steps, max_steps=max_steps, method=method, sharding=sharding, save_only_model=only_model
    )
    low, high = Job(save_total_limit=limit, **base), Job(save_total_limit=limit + 1, **base)
    estimate = checkpoint_estimate(size, low, TABLE)
    assert checkpoints_on_disk(low) >= 1
    assert budget_bytes(estimate, checkpoints_on_disk(low)) >= estimate.per_checkpoint + estimate.final
    assert budget_bytes(estimate, checkpoints_on_disk(high)) >= budget_bytes(estimate, checkpoints_on_disk(low))


# ---------------------------------------------------------------- findings


def _facts(*, volume_free: float, gpus: int = 1, model: ModelFacts | None = None):
    facts = runpod_pod(n_gpus=gpus, volume_free=volume_free)
    workspace = mount("/workspace", "ext4", "/dev/sdb")
    paths = [*facts.storage.paths, path("output_dir", "/workspace/out", workspace, free=volume_free, total=200 * GB)]
    return facts.model_copy(update={"storage": facts.storage.model_copy(update={"paths": paths}), "model": model})


def _cogito(found_shards: int = 0, cache_free: float = 150 * GB) -> ModelFacts:
    config, index = _fixture("cogito-v1-preview-qwen-14B")
    shards = sorted(set(index["weight_map"].values()))
    return ModelFacts(
        ref="deepcogito/cogito-v1-preview-qwen-14B",
        source="hf_cache",
        found=True,
        config=config,
        index=SafetensorsIndex(
            total_size=index["metadata"]["total_size"], tensors=len(index["weight_map"]), shards=shards
        ),
        shards=[
            ShardFacts(name=name, present=i < found_shards, data_bytes=5 * GB if i < found_shards else None)
            for i, name in enumerate(shards)
        ],
        cache=ModelVolume(path="/workspace/hf/hub", free_bytes=int(cache_free), mount_point="/workspace", exists=True),
    )


def _judge(policy_text: str, facts, output_dir: str | None = "/workspace/out"):
    policy = parse_policy_text(policy_text, "computefence.yaml").for_target("pod", [])
    return evaluate_host(facts, CheckOptions(output_dir=output_dir), policy=policy)


def test_a_full_fine_tune_on_a_200_gb_volume_blocks_with_its_arithmetic():
    findings = _judge(
        "job: {model: deepcogito/cogito-v1-preview-qwen-14B, save_total_limit: 3}\n",
        _facts(volume_free=180 * GB, model=_cogito()),
    )
    budget = only(findings, "storage.budget")
    assert budget.severity is Severity.BLOCK
    # 14.77B params × 12 B = 177 GB a checkpoint; 4 at once + the 59 GB fp32 final model.
    assert budget.message.startswith(
        "needs 4 × 177 GB checkpoints + 59.1 GB final model = 768 GB (model 4 B + optimizer 8 B"
    )
    assert (
        "14.77B params from index total_size); 180 GB free on /workspace (29.5 GB of it for the model download"
        in budget.message
    )
    assert budget.fix.commands == ["df -h /workspace"]
    assert "save_total_limit: 1 needs 413 GB (saves 354 GB, still over)" in budget.fix.advice
    assert "method: lora needs" in budget.fix.advice and "saves 768 GB, fits)" in budget.fix.advice


def test_the_same_pod_under_lora_passes():
    findings = _judge(
        "job: {model: deepcogito/cogito-v1-preview-qwen-14B, save_total_limit: 3, method: lora, lora: {r: 16}}\n",
        _facts(volume_free=180 * GB, model=_cogito()),
    )
    budget = only(findings, "storage.budget")
    assert budget.severity is Severity.PASS, budget.message
    # r=16 on q_proj and v_proj (PEFT's default): 48 layers × 16 × (5120+5120 + 5120+1024) = 12.6M.
    assert budget.message.startswith(
        "needs 4 × 151 MB checkpoints + 50 MB adapter = 654 MB (adapter 4 B + optimizer 8 B per param, "
        "12.6M adapter params on 14.77B from index total_size); 180 GB free on /workspace"
    )
    unbounded = only(
        _judge(
            "job: {model: deepcogito/cogito-v1-preview-qwen-14B, method: lora}\n",
            _facts(volume_free=180 * GB, model=_cogito()),
        ),
        "storage.budget",
    )
    assert unbounded.severity is Severity.PASS and "holds 1992 checkpoints + the 25 MB adapter" in unbounded.message


def test_within_20_percent_of_the_need_warns():
    job = "job: {params: 1B, save_total_limit: 1, max_steps: 1000, save_steps: 100}\n"
    # 1B × 12 B = 12 GB a checkpoint, 2 at once + 4 GB final = 28 GB.
    assert only(_judge(job, _facts(volume_free=30 * GB)), "storage.budget").severity is Severity.WARN
    assert only(_judge(job, _facts(volume_free=34 * GB)), "storage.budget").severity is Severity.PASS
    assert only(_judge(job, _facts(volume_free=27 * GB)), "storage.budget").severity is Severity.BLOCK


def test_every_checkpoint_kept_with_no_max_steps_warns_with_how_many_fit():
    budget = only(_judge("job: {params: 8B}\n", _facts(volume_free=180 * GB)), "storage.budget")
    assert budget.severity is Severity.WARN
    assert (
        "every checkpoint is kept; each is 96.0 GB" in budget.message
        and "holds 1 checkpoint + the 32.0 GB final model" in budget.message
    )


def test_a_model_not_downloaded_with_too_little_cache_space_blocks():
    model = _cogito(found_shards=2, cache_free=15 * GB)
    download = only(
        _judge("job: {model: deepcogito/cogito-v1-preview-qwen-14B}\n", _facts(volume_free=15 * GB, model=model)),
        "storage.model-download",
    )
    assert download.severity is Severity.BLOCK
    assert download.message == (
        "deepcogito/cogito-v1-preview-qwen-14B: 10.0 GB of 29.5 GB (its index) downloaded, "
        "19.5 GB still to download; 15.0 GB free on /workspace"
    )
    assert download.fix.commands[0] == "huggingface-cli delete-cache"
    room = only(
        _judge("job: {model: deepcogito/cogito-v1-preview-qwen-14B}\n", _facts(volume_free=150 * GB, model=_cogito(2))),
        "storage.model-download",
    )
    assert room.severity is Severity.PASS


def test_a_model_nowhere_on_the_pod_is_sized_from_job_params():
    model = ModelFacts(
        ref="meta-llama/Llama-3.1-8B",
        source="hf_cache",
        found=False,
        cache=ModelVolume(path="/root/.cache/huggingface/hub", free_bytes=10 * GB, mount_point="/"),
    )
    findings = _judge(
        "job: {model: meta-llama/Llama-3.1-8B, params: 8.03e9}\n", _facts(volume_free=500 * GB, model=model)
    )
    download = only(findings, "storage.model-download")
    assert download.severity is Severity.BLOCK and "16.1 GB still to download; 10.0 GB free on /" in download.message
    assert "8.03B params × 2 B (job.params)" in download.message


def test_a_full_8b_fine_tune_on_one_80_gb_gpu_warns_and_never_blocks():
    memory = only(_judge("job: {params: 8.03e9}\n", _facts(volume_free=500 * GB)), "gpu.memory-budget")
    assert memory.severity is Severity.WARN
    assert memory.message.startswith(
        "model states need 145 GB per GPU (8.03B params × (6 weights + 4 grads + 8 adamw) B) of 85.5 GB"
    )
    assert "activations, which come on top" in memory.message
    assert "method: qlora: 4.1 GB of frozen weights per GPU + the adapter's states" in memory.fix.advice
    sharded = only(
        _judge("job: {params: 8.03e9, sharding: zero3}\n", _facts(volume_free=500 * GB, gpus=8)), "gpu.memory-budget"
    )
    assert sharded.severity is Severity.PASS and "/ 8 GPUs" in sharded.message


def test_without_a_model_or_params_every_sizing_check_skips_with_the_reason():
    findings = _judge("job: {method: full}\n", _facts(volume_free=100 * GB))
    for check in ("storage.budget", "storage.model-download", "gpu.memory-budget"):
        finding = only(findings, check)
        assert finding.severity is Severity.SKIP and "job." in finding.message
    # No `job:` at all: no run is described, so these checks say nothing.
    no_policy = evaluate_host(_facts(volume_free=100 * GB), CheckOptions())
    assert not [f for f in no_policy if f.check in ("storage.budget", "storage.model-download", "gpu.memory-budget")]


def test_a_download_still_to_come_on_the_same_volume_takes_its_room_first():
    # 1.5B × 12 B = 18 GB a checkpoint, 2 on disk + 6 GB final = 42 GB; 52 GB free passes alone.
    job = "job: {model: org/not-cached, params: 1.5B, save_total_limit: 1, max_steps: 5000}\n"

    def nowhere(mount_point: str) -> ModelFacts:
        cache = ModelVolume(path=f"{mount_point}/hf/hub", free_bytes=52 * GB, mount_point=mount_point)
        return ModelFacts(ref="org/not-cached", source="hf_cache", found=False, cache=cache)

    elsewhere = only(_judge(job, _facts(volume_free=52 * GB, model=nowhere("/"))), "storage.budget")
    assert elsewhere.severity is Severity.PASS and elsewhere.message.endswith("52.0 GB free on /workspace")
    # The same 3 GB download (1.5B × 2 B) into a cache on /workspace leaves 49 GB: within 20% of 42.
    shared = only(_judge(job, _facts(volume_free=52 * GB, model=nowhere("/workspace"))), "storage.budget")
    assert shared.severity is Severity.WARN
    assert shared.message.endswith(
        "52.0 GB free on /workspace (3.0 GB of it for the model download still to come): within 20% of the need"
    )


def test_a_broken_formula_file_is_a_one_line_error_naming_it(tmp_path):
    from computefence.errors import ConfigError

    broken = tmp_path / "training-memory.yaml"
    text = (Path(__file__).resolve().parents[2] / "providers" / "hardware" / "training-memory.yaml").read_text()
    broken.write_text(text.replace("source: [hf_anatomy, zero_paper]", "source: [hf_anatomy, a_paper_nobody_named]", 1))
    with pytest.raises(
        ConfigError, match=r"training-memory.yaml: source 'a_paper_nobody_named' is not under `sources`"
    ):
        load_training_memory(broken)
    broken.write_text(text.replace("gpu_warn_share: 0.9", "gpu_warn_share: lots"))
    with pytest.raises(ConfigError, match=r"training memory data .*: gpu_warn_share: "):
        load_training_memory(broken)


def test_every_formula_row_names_a_source_the_file_spells_out():
    named = {s for row in TABLE.precision.values() for s in row.source}
    named |= {row.source for row in TABLE.optimizer.values()} | {row.source for row in TABLE.sharding.values()}
    assert named <= set(TABLE.sources) and all(len(TABLE.sources[s]) > 60 for s in named)


@pytest.mark.parametrize(
    "model",
    [
        {"index": {"total_size": 10**400}},
        {"index": {"total_size": -5}},
        {"shards": [{"name": "a.safetensors", "present": True, "params": 10**400, "data_bytes": -1}]},
        {"shards": [{"name": "a.safetensors", "present": True, "params": 0, "data_bytes": 0}]},
        {"config": {"model_type": "llama", "hidden_size": 10**400, "intermediate_size": 1, "num_hidden_layers": 10**400,
                    "num_attention_heads": 0, "vocab_size": 1.5}},
        {"incomplete_bytes": 10**400},
        {"cache": {"path": "/c", "free_bytes": 10**30, "mount_point": "/workspace"}},
    ],
)  # fmt: skip
def test_counts_no_pod_could_report_never_crash_the_checks(model):
    # A broken or hostile probe answer: every check still gives one line, none raises.
    try:
        parsed = ModelFacts.model_validate({"ref": "o/m", "source": "hf_cache", "found": True, **model})
    except ValidationError as exc:
        # Beyond 2**63 no answer reaches the checks: the pod is probe_failed, the field named.
        assert exc.errors()[0]["type"] in ("less_than_equal", "greater_than_equal")
        return
    facts = _facts(volume_free=180 * GB, model=parsed)
    for method in ("full", "lora"):
        findings = _judge(f"job: {{model: o/m, params: 8B, method: {method}, save_total_limit: 2}}\n", facts)
        sized = [f for f in findings if f.check in ("storage.budget", "storage.model-download", "gpu.memory-budget")]
        assert len(sized) == 3 and all("\n" not in f.message for f in sized)


@pytest.mark.parametrize(
    "sharding,published_gb,error",
    # ZeRO paper (arXiv:1910.02054) figure 1: Ψ = 7.5B, K = 12, Nd = 64, per-GPU model states.
    [("zero1", 31.4, 0.0002), ("zero2", 16.6, 0.0024), ("zero3", 1.9, -0.0132)],
)
def test_model_states_per_gpu_match_the_zero_papers_figure_1(sharding, published_gb, error):
    per_gpu = gpu_estimate(ModelSize(7_500_000_000, "job.params", 2.0), Job(sharding=sharding), 64, TABLE).per_gpu
    # The paper rounds to 0.1 GB: 31.41 (+0.02%), 16.64 (+0.24%), 1.875 (-1.3%).
    assert round(per_gpu / (published_gb * GB) - 1, 4) == error


def test_unsharded_model_states_follow_hf_anatomy_not_the_zero_baseline():
    # ZeRO's DDP baseline is (2 + 2 + 12)Ψ = 120 GB for 7.5B; PyTorch AMP under HF Trainer keeps
    # fp32 weights and gradients plus the half copy, 18 B a parameter: 135 GB (+12.5%).
    per_gpu = gpu_estimate(ModelSize(7_500_000_000, "job.params", 2.0), Job(), 64, TABLE).per_gpu
    assert per_gpu == 135 * GB and round(per_gpu / (120 * GB) - 1, 3) == 0.125
