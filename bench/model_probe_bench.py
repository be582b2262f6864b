"""Time the probe's model part (computefence/probe/model.py) beside what a user would run
instead: safetensors' own safe_open over every shard (keys and shapes, no weights loaded).

A Llama-3.1-70B-shaped checkpoint: 30 shards holding its 723 tensors, written with tiny data
(the header, not the data, is what either reader parses), in a hub cache laid out as
huggingface_hub leaves it (snapshot entries symlinked to blobs). Prints the median of 7 runs
of each and whether both count the same tensors.

    python3 bench/model_probe_bench.py
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from computefence.probe import model as probe_model  # noqa: E402

LAYERS, SHARDS = 80, 30
NAMES = ["input_layernorm", "post_attention_layernorm"] + [
    f"{kind}.{proj}_proj" for kind, projs in (("self_attn", "qkvo"), ("mlp", ["gate", "up", "down"])) for proj in projs
]


def build(hub: Path) -> Path:
    tensors = [f"model.layers.{i}.{name}.weight" for i in range(LAYERS) for name in NAMES]
    tensors += ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    snapshot = hub / "models--bench--llama-70b-shaped" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    blobs = snapshot.parents[1] / "blobs"
    blobs.mkdir()
    per = -(-len(tensors) // SHARDS)
    for index in range(SHARDS):
        names = tensors[index * per : (index + 1) * per]
        data = save({name: torch.zeros(2, dtype=torch.bfloat16) for name in names})
        blob = blobs / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / f"model-{index + 1:05d}-of-{SHARDS:05d}.safetensors")
    return snapshot


def with_safe_open(snapshot: Path) -> int:
    """Parameters counted as a user would: safe_open every shard, every tensor's shape."""
    params = 0
    for path in sorted(snapshot.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (safe_open's handle is not iterable)
                shape = handle.get_slice(key).get_shape()
                params += math.prod(shape)
    return params


def with_probe(snapshot: Path) -> int:
    facts: dict = {"errors": []}
    probe_model._md_files(str(snapshot), facts, {})
    return sum(shard["params"] for shard in facts["shards"])


def median(func, snapshot: Path) -> tuple[float, int]:
    times, result = [], 0
    for _ in range(7):
        started = time.perf_counter()
        result = func(snapshot)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        snapshot = build(Path(folder) / "hub")
        probe_s, probe_params = median(with_probe, snapshot)
        user_s, user_params = median(with_safe_open, snapshot)
        same = "same" if probe_params == user_params else "DIFFERENT"
        print(f"{SHARDS} shards, {LAYERS * len(NAMES) + 3} tensors; parameters counted: {same} ({probe_params})")
        print(
            f"probe model part: {probe_s * 1000:.1f} ms   safetensors safe_open: {user_s * 1000:.1f} ms (median of 7)"
        )


if __name__ == "__main__":
    main()
