"""The job's own size (policy `job:`): what its checkpoints will write, what is left to
download, and the model states each GPU holds. Formulas and their sources are data, in
providers/hardware/training-memory.yaml; this module only applies them.

Sizes of the model come from the pod where they can (safetensors headers, the index's
total_size, config.json), else from the policy's job.params; with neither, the checks skip.
Without a `job:` section they say nothing: the run they would size is not described.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from computefence.errors import ConfigError
from computefence.evaluate.context import Context, block, collector_error, first_path, passed, q, skipped, warn
from computefence.evaluate.context import gb as _gb
from computefence.evaluate.profiles import profiles_dir, read_data_file
from computefence.evaluate.spec import CheckSpec
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep, ModelFacts, Remedy
from computefence.policy import Job, Lora
from computefence.text import one_line, plural

CHECKS: dict[str, CheckSpec] = {
    "storage.budget": CheckSpec(
        "free space where checkpoints go holds every checkpoint the job keeps, plus its final model", Remedy.CONFIG
    ),
    "storage.model-download": CheckSpec(
        "the job's model is in the HF cache, or its filesystem has room for what is left to download", Remedy.FIX
    ),
    "gpu.memory-budget": CheckSpec(
        "the job's model states (weights, gradients, optimizer) fit each GPU's memory", Remedy.CONFIG
    ),
}

# ---------------------------------------------------------------- the formulas, as data


class _Strict(BaseModel):
    # Built when its data file is first read (--perf, a policy's job): most checks never read it.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class StateBytes(_Strict):
    weights: float
    grads: float
    master: float


class PrecisionRow(_Strict):
    none: StateBytes
    sharded: StateBytes
    state_bytes: float
    source: list[str]


class OptimizerRow(_Strict):
    states: int | None = None
    bytes: float | None = None
    source: str


class ShardingRow(_Strict):
    divides: list[Literal["optimizer", "grads", "weights"]]
    # The key under `checkpoint` whose layout this sharding's runs write.
    checkpoint: str
    source: str


class CheckpointRow(_Strict):
    weights: float | Literal["model"]
    optimizer: Literal["states", "master"]
    source: str | list[str]


class CheckpointWriter(_Strict):
    full: CheckpointRow
    final: float | Literal["model"]


class AdapterCheckpoint(_Strict):
    weights: float
    source: list[str]


class TrainingMemory(_Strict):
    sources: dict[str, str]
    dtype_bytes: dict[str, float]
    precision: dict[str, PrecisionRow]
    optimizer: dict[str, OptimizerRow]
    sharding: dict[str, ShardingRow]
    frozen_weights: dict[str, dict[str, float | str]]
    adapter_precision: str
    saved_weights: dict[str, float]
    checkpoint: dict[str, CheckpointWriter]
    adapter_checkpoint: AdapterCheckpoint
    budget_warn_margin: float
    gpu_warn_share: float
    unbounded_warn_below: int
    download_default_dtype_bytes: float

    def optimizer_bytes(self, optimizer: str, precision: str) -> float:
        row = self.optimizer[optimizer]
        return row.bytes if row.bytes is not None else (row.states or 0) * self.precision[precision].state_bytes


@cache
def load_training_memory(path: Path | None = None) -> TrainingMemory:
    path = path or profiles_dir() / "hardware" / "training-memory.yaml"
    data = read_data_file(path, TrainingMemory, "training memory data")
    named = [s for row in data.precision.values() for s in row.source]
    named += [row.source for row in data.optimizer.values()] + [row.source for row in data.sharding.values()]
    layouts = sorted({row.checkpoint for row in data.sharding.values()} - set(data.checkpoint))
    if layouts:
        raise ConfigError(f"training memory data {path}: checkpoint layout {layouts[0]!r} is not under `checkpoint`")
    unknown = sorted({s for s in named if s not in data.sources})
    if unknown:
        raise ConfigError(f"training memory data {path}: source {unknown[0]!r} is not under `sources`")
    return data


# ---------------------------------------------------------------- the model's size


@dataclass(frozen=True)
class ModelSize:
    params: int
    # How the count was found: "safetensors headers", "index total_size", "config.json", "job.params".
    basis: str
    # Bytes per parameter of the published weights (what a download writes).
    dtype_bytes: float
    config: dict[str, Any] | None = None


def _config_dtype(config: dict[str, Any] | None, table: TrainingMemory) -> float | None:
    if not config:
        return None
    for key in ("torch_dtype", "dtype"):
        value = config.get(key)
        if isinstance(value, str) and value.removeprefix("torch.") in table.dtype_bytes:
            return table.dtype_bytes[value.removeprefix("torch.")]
    return None


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "llm_config", "language_config"):
        nested = config.get(key)
        if isinstance(nested, dict) and "hidden_size" in nested:
            return {
                **nested,
                "tie_word_embeddings": config.get("tie_word_embeddings", nested.get("tie_word_embeddings")),
            }
    return config


# No real config dimension comes near this; a pod's config.json with 10**400 layers must not
# overflow a float in the arithmetic.
MAX_DIMENSION = 10**9
# Nor does any checkpoint come near 10 PB: byte counts past it are not credible.
MAX_BYTES = 10**16


def _int(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if type(value) is int and 0 < value <= MAX_DIMENSION else None


def credible(model: ModelFacts | None) -> ModelFacts | None:
    """The pod's model facts with every count it could not have (negative, past 10 PB) dropped:
    a shard so reported counts as unread, an index total as absent."""
    if model is None:
        return None

    def fits(value: int | None) -> bool:
        return value is None or 0 <= value <= MAX_BYTES

    index = model.index
    if index is not None and not fits(index.total_size):
        index = index.model_copy(update={"total_size": None})
    shards = [
        s if fits(s.params) and fits(s.data_bytes) else s.model_copy(update={"params": None, "error": "not credible"})
        for s in model.shards
    ]
    partial = model.incomplete_bytes if fits(model.incomplete_bytes) else 0
    return model.model_copy(update={"index": index, "shards": shards, "incomplete_bytes": partial})


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer's sizes, from config.json (llama, mistral, qwen2/3, gemma, mixtral)."""

    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    experts: int

    @property
    def q_out(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_out(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection in one layer, by PEFT's module names."""
        return {
            "q_proj": (self.hidden, self.q_out),
            "k_proj": (self.hidden, self.kv_out),
            "v_proj": (self.hidden, self.kv_out),
            "o_proj": (self.q_out, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }


_DENSE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "mixtral", "granite"}


def model_shape(config: dict[str, Any] | None) -> Shape | None:
    if not config:
        return None
    text = _text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    sizes = {
        k: _int(text, k)
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    }
    if model_type not in _DENSE_TYPES or any(v is None for v in sizes.values()):
        return None
    heads = sizes["num_attention_heads"] or 1
    hidden = sizes["hidden_size"] or 0
    return Shape(
        model_type=model_type,
        hidden=hidden,
        intermediate=sizes["intermediate_size"] or 0,
        layers=sizes["num_hidden_layers"] or 0,
        heads=heads,
        kv_heads=_int(text, "num_key_value_heads") or heads,
        head_dim=_int(text, "head_dim") or hidden // heads,
        vocab=sizes["vocab_size"] or 0,
        tied=bool(text.get("tie_word_embeddings", model_type.startswith("gemma"))),
        experts=_int(text, "num_local_experts") or 1,
    )


def config_params(config: dict[str, Any] | None) -> int | None:
    """The parameter count config.json implies, for the architectures model_shape knows."""
    shape = model_shape(config)
    if shape is None or config is None:
        return None
    text = _text_config(config)
    h = shape.hidden
    attention = h * shape.q_out + 2 * h * shape.kv_out + shape.q_out * h
    if shape.model_type == "qwen2":
        attention += shape.q_out + 2 * shape.kv_out  # q, k and v have biases; o has none
    elif text.get("attention_bias"):
        attention += shape.q_out + 2 * shape.kv_out + h
    if shape.model_type == "qwen3":
        attention += 2 * shape.head_dim  # q_norm and k_norm
    mlp = 3 * h * shape.intermediate + (2 * shape.intermediate + h if text.get("mlp_bias") else 0)
    mlp = mlp * shape.experts + (h * shape.experts if shape.experts > 1 else 0)
    norms = (4 if shape.model_type == "gemma2" else 2) * h
    embeddings = shape.vocab * h * (1 if shape.tied else 2)
    return shape.layers * (attention + mlp + norms) + h + embeddings


def model_size(model: ModelFacts | None, job: Job, table: TrainingMemory) -> ModelSize | None:
    """The model's parameter count from the best source there is, or None."""
    config = model.config if model is not None else None
    dtype = _config_dtype(config, table)
    if model is not None and model.found and model.shards:
        read = [s for s in model.shards if s.present and s.params is not None and not s.error]
        params = sum(s.params or 0 for s in read)
        if read and len(read) == len(model.shards) and params > 0:
            data = sum(s.data_bytes or 0 for s in read)
            return ModelSize(params, "safetensors headers", data / params, config)
    if model is not None and model.index is not None and model.index.total_size:
        per = dtype or _shard_dtype(model, table) or table.download_default_dtype_bytes
        return ModelSize(round(model.index.total_size / per), "index total_size", per, config)
    counted = config_params(config)
    if counted:
        return ModelSize(counted, "config.json", dtype or table.download_default_dtype_bytes, config)
    if job.params:
        return ModelSize(job.params, "job.params", dtype or table.download_default_dtype_bytes, config)
    return None


def _shard_dtype(model: ModelFacts, table: TrainingMemory) -> float | None:
    for shard in model.shards:
        if shard.params and shard.data_bytes:
            return shard.data_bytes / shard.params
    return None


def adapter_params(shape: Shape | None, lora: Lora) -> int | None:
    """Trainable parameters of a LoRA on this shape: r * (in + out) per wrapped projection."""
    if shape is None:
        return None
    shapes = shape.linear_shapes()
    if lora.target_modules == "all-linear":
        names = list(shapes)
    elif lora.target_modules is None:
        names = ["q_proj", "v_proj"]  # PEFT's default for llama-family models
    else:
        names = [name.rsplit(".", 1)[-1] for name in lora.target_modules]
    if any(name not in shapes for name in names):
        return None
    per_layer = sum(lora.r * sum(shapes[name]) for name in names)
    experts = shape.experts if any(n in ("gate_proj", "up_proj", "down_proj") for n in names) else 1
    # modules_to_save are trained and saved whole: the embeddings and the head are vocab × hidden.
    whole = {"embed_tokens": shape.vocab * shape.hidden, "lm_head": shape.vocab * shape.hidden}
    saved = [name.rsplit(".", 1)[-1] for name in lora.modules_to_save]
    if any(name not in whole for name in saved):
        return None
    return per_layer * shape.layers * max(1, experts) + sum(whole[name] for name in set(saved))


# ---------------------------------------------------------------- estimates


@dataclass(frozen=True)
class CheckpointEstimate:
    trainable: int
    per_checkpoint: float
    final: float
    # The run's program and the file makeup, for the message: e.g. "model 4 B + optimizer 8 B".
    makeup: str


def checkpoint_estimate(size: ModelSize, job: Job, table: TrainingMemory) -> CheckpointEstimate | None:
    if job.method != "full":
        trainable = adapter_params(model_shape(size.config), job.lora or Lora())
        if trainable is None:
            return None
        weights = table.adapter_checkpoint.weights
        optimizer = 0.0 if job.save_only_model else table.optimizer_bytes(job.optimizer, table.adapter_precision)
        return CheckpointEstimate(
            trainable,
            trainable * (weights + optimizer),
            trainable * weights,
            f"adapter {weights:g} B" + ("" if job.save_only_model else f" + optimizer {optimizer:g} B"),
        )
    row = table.checkpoint[table.sharding[job.sharding].checkpoint]
    saved = table.saved_weights[job.precision]
    weights = saved if row.full.weights == "model" else float(row.full.weights)
    optimizer = table.optimizer_bytes(job.optimizer, job.precision)
    if row.full.optimizer == "master":
        optimizer += table.precision[job.precision].sharded.master
    if job.save_only_model:
        optimizer = 0.0
        weights = saved if row.final == "model" else float(row.final)
    final = saved if row.final == "model" else float(row.final)
    makeup = f"model {weights:g} B" + ("" if job.save_only_model else f" + optimizer {optimizer:g} B")
    return CheckpointEstimate(size.params, size.params * (weights + optimizer), size.params * final, makeup)


def checkpoints_on_disk(job: Job) -> int | None:
    """The most checkpoints on disk at once: Trainer writes the next one before it deletes the
    oldest, so save_total_limit + 1; never more than the run writes, never under one. None when
    every checkpoint is kept and max_steps is not set."""
    written = job.checkpoints_written
    if job.save_total_limit is None:
        return None if written is None else max(1, written)
    peak = job.save_total_limit + 1
    return max(1, min(peak, written) if written is not None else peak)


def budget_bytes(estimate: CheckpointEstimate, count: int) -> float:
    return count * estimate.per_checkpoint + estimate.final


@dataclass(frozen=True)
class GpuEstimate:
    per_gpu: float
    # The arithmetic, for the message: "8.03B params × (6 weights + 4 grads + 8 adamw) B".
    formula: str


def gpu_estimate(size: ModelSize, job: Job, gpus: int, table: TrainingMemory) -> GpuEstimate | None:
    divides = set(table.sharding[job.sharding].divides)
    n = max(1, gpus)

    def share(part: str, value: float) -> float:
        return value / n if part in divides else value

    if job.method == "full":
        layout = (
            table.precision[job.precision].none if job.sharding == "none" else table.precision[job.precision].sharded
        )
        optimizer = table.optimizer_bytes(job.optimizer, job.precision) + layout.master
        per_param = {"weights": layout.weights, "grads": layout.grads, "optimizer": optimizer}
        parts = {part: share(part, size.params * b) for part, b in per_param.items()}
        over = f" / {n} GPUs" if divides and n > 1 else ""
        master = " incl. fp32 master" if layout.master else ""
        formula = (
            f"{size.params / 1e9:.2f}B params × ({layout.weights:g} weights + {layout.grads:g} grads + "
            f"{optimizer:g} {job.optimizer}{master}) B{over}"
        )
        return GpuEstimate(sum(parts.values()), formula)
    trainable = adapter_params(model_shape(size.config), job.lora or Lora())
    if trainable is None:
        return None
    frozen = float(table.frozen_weights[job.method][job.precision])
    adapter = table.precision[table.adapter_precision].none
    optimizer = table.optimizer_bytes(job.optimizer, table.adapter_precision)
    parts = {
        "weights": share("weights", size.params * frozen) + trainable * adapter.weights,
        "grads": trainable * adapter.grads,
        "optimizer": trainable * optimizer,
    }
    formula = (
        f"{size.params / 1e9:.2f}B frozen × {frozen:g} B + {trainable / 1e6:.1f}M adapter × "
        f"({adapter.weights:g} + {adapter.grads:g} + {optimizer:g}) B"
    )
    return GpuEstimate(sum(parts.values()), formula)


# ---------------------------------------------------------------- findings


def host_job(job: Job | None, facts: Facts) -> tuple[Job | None, str | None]:
    """The policy's job for this host: with its `from:` file's fields, and why not, if not."""
    if job is None:
        return None, None
    from computefence.evaluate.job_from import job_with_file

    return job_with_file(job, facts.model.from_file if facts.model is not None else None)


NO_SIZE = "no job.model found on the pod and no job.params in computefence.yaml: nothing to size the run from"


def _sized(facts: Facts, ctx: Context, cid: str) -> tuple[Job, ModelSize, TrainingMemory] | list[Finding]:
    """The policy's job, the run's size and the memory table; or what the check says instead:
    nothing without a job, a skip when the size is not known."""
    job = ctx.job
    if job is None:
        return []
    if not job.model and not job.params:
        note = f" ({ctx.job_note})" if ctx.job_note else ""
        return [skipped(cid, f"no job.model or job.params in computefence.yaml{note}: the run's size is not known")]
    table = load_training_memory()
    size = model_size(credible(facts.model), job, table)
    return (job, size, table) if size is not None else [skipped(cid, NO_SIZE)]


def gb(n_bytes: float | None) -> str:
    """GB as the storage checks print them; an adapter's few hundred MB in MB."""
    if n_bytes is not None and n_bytes < 1e9:
        return f"{n_bytes / 1e6:.0f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:.0f} kB"
    return _gb(None if n_bytes is None else int(n_bytes))


def _trained(estimate: CheckpointEstimate, size: ModelSize) -> str:
    if estimate.trainable == size.params:
        return f"{size.params / 1e9:.2f}B params from {size.basis}"
    return f"{estimate.trainable / 1e6:.1f}M adapter params on {size.params / 1e9:.2f}B from {size.basis}"


def _count_text(n: int) -> str:
    return f"{n} checkpoint{'s' if n != 1 else ''}"


def check_storage_budget(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.budget"
    sized = _sized(facts, ctx, cid)
    if isinstance(sized, list):
        return sized
    job, size, table = sized
    if not checks.output_dir:
        return [skipped(cid, "no output dir to size: set checks.output_dir in computefence.yaml (or --output-dir)")]
    out = first_path(facts, "output_dir")
    if out is None or out.free_bytes is None:
        why = (out.error if out is not None else None) or collector_error(facts, "storage") or "no free space reported"
        return [skipped(cid, f"free space of the output dir {checks.output_dir} is not known: {one_line(why, 120)}")]
    estimate = checkpoint_estimate(size, job, table)
    if estimate is None:
        return [
            skipped(
                cid,
                f"a {job.method} adapter's size needs the model's config.json (hidden_size, layers) and "
                "target_modules PEFT names (q_proj ... down_proj); none found on the pod",
            )
        ]
    point = out.mount_point or out.path
    free = out.free_bytes
    # A download still to come into an HF cache on this same filesystem takes its room first.
    model = credible(facts.model)
    cache = model.cache if model is not None else None
    pending = (
        download_pending(model, job, table)
        if cache is not None and cache.mount_point is not None and cache.mount_point == out.mount_point
        else 0
    )
    shared = f" ({gb(pending)} of it for the model download still to come)" if pending else ""
    free_text = f"{gb(free)} free on {point}{shared}"
    free = max(0, free - pending)
    count = checkpoints_on_disk(job)
    what = "adapter" if job.method != "full" else "final model"
    if count is None:
        fits = int(max(0.0, free - estimate.final) // estimate.per_checkpoint) if estimate.per_checkpoint else 0
        message = (
            f"save_total_limit is unset and max_steps unknown, so every checkpoint is kept; each is "
            f"{gb(int(estimate.per_checkpoint))} ({estimate.makeup} per param, {_trained(estimate, size)}), so "
            f"{free_text} holds {_count_text(fits)} + the {gb(int(estimate.final))} {what}"
        )
        if fits >= table.unbounded_warn_below:
            return [passed(cid, message, subject=point)]
        return [warn(cid, message, _budget_fix(size, job, table, ctx, point, None, free), subject=point)]
    need = budget_bytes(estimate, count)
    arithmetic = (
        f"needs {count} × {gb(int(estimate.per_checkpoint))} checkpoints + {gb(int(estimate.final))} {what} = "
        f"{gb(int(need))} ({estimate.makeup} per param, {_trained(estimate, size)}); {free_text}"
    )
    if ctx.job_note:
        arithmetic += f"; {ctx.job_note} (sized from the policy's job: alone)"
    if free < need:
        return [block(cid, arithmetic, _budget_fix(size, job, table, ctx, point, need, free), subject=point)]
    if free < need * (1 + table.budget_warn_margin) or ctx.job_note:
        message = arithmetic if ctx.job_note else f"{arithmetic}: within {table.budget_warn_margin:.0%} of the need"
        return [warn(cid, message, _budget_fix(size, job, table, ctx, point, need, free), subject=point)]
    return [passed(cid, arithmetic, subject=point)]


def _budget_fix(
    size: ModelSize, job: Job, table: TrainingMemory, ctx: Context, point: str, need: float | None, free: int
) -> Fix:
    options = []
    for label, changed in (
        ("save_total_limit: 1", job.model_copy(update={"save_total_limit": 1})),
        (
            "save_only_model: true (no optimizer state: a resumed run restarts its optimizer)",
            job.model_copy(update={"save_only_model": True}),
        ),
        ("method: lora", job.model_copy(update={"method": "lora"})),
    ):
        if changed == job:
            continue
        estimate = checkpoint_estimate(size, changed, table)
        count = checkpoints_on_disk(changed)
        if estimate is None or count is None:
            continue
        needs = budget_bytes(estimate, count)
        if need is not None and needs >= need:
            continue
        fits = "fits" if needs <= free else "still over"
        saves = f"saves {gb(int(need - needs))}, " if need is not None else ""
        options.append(f"{label} needs {gb(int(needs))} ({saves}{fits})")
    room = gb(int(need * (1 + table.budget_warn_margin))) if need else None
    grow = f"an output dir on a volume with {room} free" if room else "an output dir on a larger volume"
    grow += f", {ctx.profile.advice.grow_volume}" if ctx.profile.advice.grow_volume else ""
    options.append(grow)
    advice = "set in computefence.yaml and the run's TrainingArguments: " + "; ".join(options)
    return Fix(commands=[f"df -h {q(point)}"], advice=advice)


def _download(model: ModelFacts, job: Job, table: TrainingMemory) -> tuple[int, str] | None:
    """The bytes the model's weights take once downloaded, and how that is known; None when
    there is no index and nothing says (a complete download without an index needs none)."""
    if model.found and model.index is not None and model.index.total_size:
        return model.index.total_size, "its index"
    if model.found and model.shards and all(s.present for s in model.shards):
        return None
    size = model_size(model, job, table)
    if size is None:
        return None
    return int(
        size.params * size.dtype_bytes
    ), f"{size.params / 1e9:.2f}B params × {size.dtype_bytes:g} B ({size.basis})"


def download_pending(model: ModelFacts | None, job: Job, table: TrainingMemory) -> int:
    """Bytes of the model still to come into the HF cache (0 when none or not known)."""
    if model is None or model.source != "hf_cache":
        return 0
    download = _download(model, job, table)
    if download is None:
        return 0
    present = sum(s.data_bytes or 0 for s in model.shards if s.present)
    return max(0, download[0] - present - model.incomplete_bytes)


def check_model_download(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.model-download"
    job = ctx.job
    if job is None:
        return []
    if not job.model:
        return [skipped(cid, "no job.model in computefence.yaml: no download to size")]
    model = credible(facts.model)
    if model is None:
        why = collector_error(facts, "model") or "this probe did not look for it"
        return [skipped(cid, f"job.model {job.model} was not looked up on the pod: {one_line(why, 120)}")]
    table = load_training_memory()
    if model.source == "path":
        if not model.found:
            return [
                block(
                    cid,
                    f"job.model {job.model} is not a folder on the pod: from_pretrained will fail there",
                    f"ls -la {q(job.model)}",
                    subject=job.model,
                )
            ]
        missing = [s.name for s in model.shards if not s.present]
        if missing:
            return [
                block(
                    cid,
                    f"job.model {job.model}: {len(missing)} of {len(model.shards)} weight files listed in its index are missing ({one_line(', '.join(missing[:3]), 120)})",
                    f"ls -la {q(job.model)}",
                    subject=job.model,
                )
            ]
        return [
            passed(cid, f"job.model {job.model} is on the pod ({len(model.shards)} weight files)", subject=job.model)
        ]
    cache = model.cache
    present = sum(s.data_bytes or 0 for s in model.shards if s.present)
    download = _download(model, job, table)
    if download is None:
        if model.found and model.shards and all(s.present for s in model.shards):
            where = f"{gb(present)} in {plural(len(model.shards), 'safetensors file')}"
            return [passed(cid, f"{job.model} is in the HF cache ({where})", subject=job.model)]
        return [skipped(cid, f"{job.model} is not in the HF cache and no job.params says how large it is")]
    total, basis = download
    remaining = max(0, total - present - model.incomplete_bytes)
    where = cache.mount_point or cache.path if cache is not None else "?"
    if remaining == 0:
        return [passed(cid, f"{job.model} is in the HF cache ({gb(total)} per {basis}) at {where}", subject=job.model)]
    free = cache.free_bytes if cache is not None else None
    done = present + model.incomplete_bytes
    so_far = f"{gb(done)} of {gb(total)} ({basis}) downloaded" if done else f"none of {gb(total)} ({basis}) downloaded"
    if free is None:
        why = cache.error if cache is not None and cache.error else "no free space reported"
        return [skipped(cid, f"{job.model}: {so_far}; free space of the cache is not known: {one_line(why, 120)}")]
    message = f"{job.model}: {so_far}, {gb(remaining)} still to download; {gb(free)} free on {where}"
    if free < remaining:
        target = cache.path if cache is not None else "$HF_HOME"
        fix = Fix(
            # A cache clean-up deletes downloaded models: never run by fleet fix.
            steps=[FixStep.destructive("huggingface-cli delete-cache"), FixStep.inspect(f"df -h {q(where)}")],
            advice=(
                f"free {gb(remaining - free)} on {where}, or point HF_HOME at a volume with {gb(remaining)} free "
                f"before the run downloads to {target}"
                + (f", {ctx.profile.advice.grow_volume}" if ctx.profile.advice.grow_volume else "")
            ),
        )
        return [block(cid, message, fix, subject=job.model)]
    return [passed(cid, message, subject=job.model)]


def check_gpu_memory_budget(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.memory-budget"
    sized = _sized(facts, ctx, cid)
    if isinstance(sized, list):
        return sized
    job, size, table = sized
    memories = [g.memory_total_mib for g in facts.gpu.gpus if g.memory_total_mib]
    if not memories:
        return [skipped(cid, "no GPU memory figures from nvidia-smi: the model states cannot be compared")]
    gpus = len(facts.gpu.gpus)
    estimate = gpu_estimate(size, job, gpus, table)
    if estimate is None:
        return [
            skipped(cid, f"a {job.method} run's memory needs the model's config.json (hidden_size, layers) on the pod")
        ]
    smallest = min(memories) * 2**20
    name = next(g.name for g in facts.gpu.gpus if g.memory_total_mib == min(memories))
    arithmetic = (
        f"model states need {gb(int(estimate.per_gpu))} per GPU ({estimate.formula}) of {gb(smallest)} on {name}"
    )
    if estimate.per_gpu <= smallest * table.gpu_warn_share:
        return [passed(cid, f"{arithmetic}; activations come on top")]
    message = f"{arithmetic}: over {table.gpu_warn_share:.0%} before activations, which come on top (an estimate)"
    return [warn(cid, message, _memory_fix(size, job, gpus, smallest, estimate.per_gpu, table))]


def _memory_fix(size: ModelSize, job: Job, gpus: int, memory: float, need: float, table: TrainingMemory) -> Fix:
    options = []
    changes: list[tuple[str, dict[str, Any]]] = []
    if gpus > 1 and job.sharding not in ("zero3", "fsdp"):
        changes.append((f"sharding: zero3 (or fsdp) over the {gpus} GPUs", {"sharding": "zero3"}))
    if job.optimizer == "adamw":
        changes.append(("optimizer: adamw-8bit", {"optimizer": "adamw-8bit"}))
    if job.method == "full":
        changes += [("method: lora", {"method": "lora"}), ("method: qlora", {"method": "qlora"})]
    elif job.method == "lora":
        changes.append(("method: qlora", {"method": "qlora"}))
    for label, update in changes:
        changed = job.model_copy(update=update)
        estimate = gpu_estimate(size, changed, gpus, table)
        if estimate is not None:
            fits = "fits" if estimate.per_gpu <= memory * table.gpu_warn_share else "still over"
            options.append(f"{label}: {gb(int(estimate.per_gpu))} per GPU ({fits})")
        elif changed.method != "full":
            # Without config.json the adapter cannot be sized; the frozen weights dominate it.
            frozen = size.params * float(table.frozen_weights[changed.method][changed.precision])
            options.append(f"{label}: {gb(int(frozen))} of frozen weights per GPU + the adapter's states")
    options.append(f"GPUs with more than {gb(int(need / table.gpu_warn_share))} each")
    return Fix(advice="model states per GPU with " + "; ".join(options))


RULES = [check_storage_budget, check_model_download, check_gpu_memory_budget]


def derived_figures(job: Job) -> dict[str, Any]:
    """What the policy alone says about the run (`policy show`): bytes per parameter of a
    checkpoint and of the model states, checkpoints on disk at most, and with job.params the
    sizes; the pod's own files (`fleet check`) can change the parameter count."""
    table = load_training_memory()
    figures: dict[str, Any] = {"checkpoints_on_disk": checkpoints_on_disk(job)}
    written = job.checkpoints_written
    if written is not None:
        figures["checkpoints_written"] = written
    limit = job.save_total_limit
    if limit is not None or written is not None:
        figures["checkpoints_kept"] = min(x for x in (limit, written) if x is not None)
    if job.method != "full":
        figures["checkpoint"] = "the adapter and its optimizer states: sized from the pod's config.json"
        return figures
    unit = ModelSize(1, "per parameter", 2.0)
    estimate = checkpoint_estimate(unit, job, table)
    memory = gpu_estimate(unit, job, 1, table)
    assert estimate is not None and memory is not None
    figures["checkpoint_bytes_per_param"] = estimate.per_checkpoint
    figures["checkpoint_makeup"] = estimate.makeup
    figures["final_model_bytes_per_param"] = estimate.final
    figures["model_states_bytes_per_param"] = memory.per_gpu
    if job.sharding != "none":
        figures["model_states_note"] = (
            f"{job.sharding} divides {', '.join(table.sharding[job.sharding].divides)} by the GPU count"
        )
    if job.params:
        figures["params"] = job.params
        sized = checkpoint_estimate(ModelSize(job.params, "job.params", 2.0), job, table)
        assert sized is not None
        figures["checkpoint_gb"] = round(sized.per_checkpoint / 1e9, 1)
        figures["final_model_gb"] = round(sized.final / 1e9, 1)
        count = checkpoints_on_disk(job)
        if count is not None:
            figures["output_dir_needs_gb"] = round(budget_bytes(sized, count) / 1e9, 1)
        figures["model_states_gb_on_one_gpu"] = round(job.params * memory.per_gpu / 1e9, 1)
    return figures
