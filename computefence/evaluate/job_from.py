"""`job: {from: path/on/pod.yaml}`: the job's fields read from an axolotl or LLaMA-Factory
config. Only fields that map one to one are read; keys the policy's `job:` sets itself win.

Mapped (axolotl / LLaMA-Factory -> job):
  base_model / model_name_or_path              -> model
  adapter: lora|qlora / finetuning_type: lora|full, quantization_bit: 4 -> method
  lora_r / lora_rank                           -> lora.r
  lora_target_modules, lora_target_linear / lora_target ("all" or "q_proj,v_proj") -> lora.target_modules
  lora_modules_to_save / additional_target     -> lora.modules_to_save
  bf16, fp16 (true or "auto"); LLaMA-Factory's pure_bf16 -> precision (neither: fp32)
  optimizer / optim (adamw_torch, adamw_bnb_8bit, paged_adamw_8bit, adafactor, sgd, ...) -> optimizer
  deepspeed: a path whose file name says zero1/2/3 (axolotl's deepspeed_configs/zero3.json,
    LLaMA-Factory's ds_z3_config.json); fsdp / fsdp_config set -> sharding
  save_total_limit, save_steps, max_steps, save_only_model -> the same keys
Not mapped: a DeepSpeed JSON named otherwise (its stage is inside the file), num_epochs and
saves_per_epoch (steps depend on the dataset), load_in_8bit (an 8-bit base is sized as a 16-bit
one), output_dir (that is checks.output_dir, where the probe looks).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from computefence.errors import ConfigError
from computefence.models import JobFromFile
from computefence.policy import Job, Lora
from computefence.yaml_lines import load_yaml_document

_OPTIMIZERS = {
    "adamw-8bit": re.compile(r"8bit|bnb"),
    "adafactor": re.compile(r"^adafactor"),
    "sgd": re.compile(r"^sgd"),
    "adamw": re.compile(r"^(paged_)?adamw|^adam$|^adam_"),
}
_ZERO_STAGE = re.compile(r"(?:zero|_z)([123])(?![0-9])", re.IGNORECASE)


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "auto", "yes"))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def fields_from_config(document: dict[str, Any]) -> dict[str, Any]:
    """The job keys an axolotl or LLaMA-Factory config gives, as policy values."""
    found: dict[str, Any] = {}
    model = document.get("base_model") or document.get("model_name_or_path")
    if isinstance(model, str) and model.strip():
        found["model"] = model.strip()
    adapter = document.get("adapter")
    finetuning = document.get("finetuning_type")
    if adapter in ("lora", "qlora"):
        found["method"] = "qlora" if adapter == "qlora" or _truthy(document.get("load_in_4bit")) else "lora"
    elif finetuning == "lora":
        found["method"] = "qlora" if document.get("quantization_bit") == 4 else "lora"
    elif finetuning == "full" or ("adapter" in document and adapter in (None, "")):
        found["method"] = "full"
    rank = _int(document.get("lora_r")) or _int(document.get("lora_rank"))
    targets: Any = document.get("lora_target_modules")
    if _truthy(document.get("lora_target_linear")):
        targets = "all-linear"
    target = document.get("lora_target")
    if isinstance(target, str) and target.strip():
        targets = "all-linear" if target.strip() == "all" else [t.strip() for t in target.split(",") if t.strip()]
    lora: dict[str, Any] = {}
    whole = document.get("lora_modules_to_save") or document.get("additional_target")
    if isinstance(whole, str):
        whole = [name.strip() for name in whole.split(",") if name.strip()]
    if isinstance(whole, list) and whole and all(isinstance(name, str) for name in whole):
        lora["modules_to_save"] = whole
    if rank:
        lora["r"] = rank
    if targets == "all-linear" or (isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets)):
        lora["target_modules"] = targets
    if lora:
        found["lora"] = lora
    if _truthy(document.get("pure_bf16")):
        found["precision"] = "bf16-pure"
    elif _truthy(document.get("bf16")):
        found["precision"] = "bf16"
    elif _truthy(document.get("fp16")):
        found["precision"] = "fp16"
    elif "bf16" in document or "fp16" in document:
        found["precision"] = "fp32"
    optimizer = document.get("optimizer") or document.get("optim")
    if isinstance(optimizer, str):
        for name, pattern in _OPTIMIZERS.items():
            if pattern.search(optimizer.lower()):
                found["optimizer"] = name
                break
    deepspeed = document.get("deepspeed")
    stage = _ZERO_STAGE.search(Path(deepspeed).name) if isinstance(deepspeed, str) else None
    if stage:
        found["sharding"] = f"zero{stage.group(1)}"
    elif document.get("fsdp") or document.get("fsdp_config"):
        found["sharding"] = "fsdp"
    for key in ("save_total_limit", "save_steps", "max_steps"):
        if _int(document.get(key)):
            found[key] = document[key]
    if isinstance(document.get("save_only_model"), bool):
        found["save_only_model"] = document["save_only_model"]
    return found


def job_with_file(job: Job, from_file: JobFromFile | None) -> tuple[Job, str | None]:
    """The policy's job with what its `from:` file adds (the policy's own keys win), and why
    the file could not be used, if it could not."""
    if not job.from_ or from_file is None:
        return job, None
    if from_file.error or from_file.text is None:
        return job, f"job.from {job.from_}: {from_file.error or 'not read'}"
    try:
        document, _ = load_yaml_document(Path(job.from_), "training config", text=from_file.text)
    except ConfigError as exc:
        return job, f"job.from: {exc}"
    if not isinstance(document, dict):
        return job, f"job.from {job.from_}: not a mapping of keys"
    fields = fields_from_config(document)
    own = job.model_fields_set
    update = {key: value for key, value in fields.items() if key not in own}
    if "lora" in update:
        update["lora"] = Lora(**update["lora"])
    try:
        return Job.model_validate({**job.model_dump(by_alias=True), **update}), None
    except ValueError as exc:
        return job, f"job.from {job.from_}: {' '.join(str(exc).split())[:200]}"
