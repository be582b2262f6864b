"""The probe's model part: the job's model found in the resolved HF cache or at a path, its
config and index read, every present .safetensors header counted exactly, missing shards and
partial downloads reported, and a corrupt file named instead of raising."""

from __future__ import annotations

import json
import struct

import pytest
from model_cache import FIXTURES, put_blob, repo_folder, write_cache

from computefence.probe.assemble import probe_payload

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

GRANITE = "ibm-granite/granite-3b-code-instruct-128k"


def _shard_bytes() -> tuple[bytes, int, int]:
    """A real safetensors file (bf16 and fp32 tensors), its parameter count and data bytes."""
    tensors = {
        "model.embed_tokens.weight": torch.zeros((64, 32), dtype=torch.bfloat16),
        "model.norm.weight": torch.ones(32, dtype=torch.float32),
    }
    return safetensors_torch.save(tensors, metadata={"format": "pt"}), 64 * 32 + 32, 64 * 32 * 2 + 32 * 4


def test_a_half_downloaded_model_in_the_hf_cache_is_counted_shard_by_shard(pod):
    hub = pod.root / "volume" / "hf" / "hub"
    write_cache(hub, GRANITE, "granite-3b-code-instruct-128k")
    data, params, data_bytes = _shard_bytes()
    put_blob(hub, GRANITE, "model-00001-of-00002.safetensors", data)
    (repo_folder(hub, GRANITE) / "blobs" / "abc.incomplete").write_bytes(b"x" * 1000)
    pod.env["HF_HOME"] = str(hub.parent)

    model = pod.run(job_model={"ref": GRANITE}).facts.model

    assert model is not None and model.found and model.source == "hf_cache"
    assert model.snapshot.endswith("/snapshots/3ebd2c06f46640dc97c0fa6e3cd59da9944c3be0")
    assert model.config["hidden_size"] == 2560 and model.config["tie_word_embeddings"] is True
    assert model.index.total_size == 6965007360 and model.index.shards == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    first, second = model.shards
    assert (first.present, first.params, first.data_bytes, first.dtypes) == (
        True, params, data_bytes, {"BF16": 64 * 32, "F32": 32},
    )  # fmt: skip
    assert first.file_bytes == len(data) and first.header_bytes == 8 + struct.unpack("<Q", data[:8])[0]
    assert second.present is False and model.incomplete_bytes == 1000
    assert model.cache.origin == "HF_HOME" and model.cache.free_bytes > 0 and model.cache.exists


@pytest.mark.parametrize(
    "damage,words",
    [
        (b"\x01\x00", "shorter than the 8-byte header length"),
        (struct.pack("<Q", 1 << 40) + b"{}", "does not fit"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 40) + b'{"w": {"dtype": "F32", "shape": [-1]}}   ', "has no shape or data_offsets"),
    ],
)
def test_a_corrupt_safetensors_file_is_named_not_raised(pod, damage, words):
    folder = pod.root / "models" / "mine"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(damage)
    model = pod.run(job_model={"ref": str(folder)}).facts.model
    assert model.found and model.source == "path"
    (shard,) = model.shards
    assert shard.present and shard.params is None and words in shard.error


def test_a_model_path_and_a_cache_dir_the_policy_names(pod):
    folder = pod.root / "models" / "granite"
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors.index.json"):
        (folder / name).write_text((FIXTURES / "granite-3b-code-instruct-128k" / name).read_text())
    run = pod.run(job_model={"ref": str(folder)})
    assert run.facts.model.found and [s.present for s in run.facts.model.shards] == [False, False]
    assert run.facts.collectors["model"].ok

    elsewhere = pod.root / "cache"
    write_cache(elsewhere, GRANITE, "granite-3b-code-instruct-128k")
    model = pod.run(job_model={"ref": GRANITE, "cache_dir": str(elsewhere)}).facts.model
    assert model.found and model.cache.origin == "job.cache_dir" and model.cache.path == str(elsewhere)


def test_a_model_not_in_the_cache_and_no_model_asked_for(pod):
    pod.env["HF_HUB_CACHE"] = str(pod.root / "empty-hub")
    model = pod.run(job_model={"ref": "meta-llama/Llama-3.1-8B"}).facts.model
    assert model.found is False and model.location.endswith("/empty-hub/models--meta-llama--Llama-3.1-8B")
    assert model.cache.exists is False and model.cache.free_bytes > 0  # the nearest existing folder's filesystem
    # No job model: the part is not even sent (probe/assemble.PART_NEEDS).
    document = pod.run().document
    assert "model" not in document and "model" not in document["collectors"]
    assert "def collect_model" not in probe_payload({}) and "def collect_model" in probe_payload(
        {"job_model": {"ref": "gpt2"}}
    )


def test_the_index_json_of_a_real_model_parses_as_the_probe_reads_it():
    # The shipped fixtures are the files as published: the probe's reader must take them whole.
    from computefence.probe.model import _md_index

    for folder in FIXTURES.iterdir():
        if folder.is_dir():
            index = _md_index(str(folder / "model.safetensors.index.json"))
            raw = json.loads((folder / "model.safetensors.index.json").read_text())
            assert index["total_size"] == raw["metadata"]["total_size"] and index["tensors"] == len(raw["weight_map"])


def test_a_from_file_comes_back_as_text_and_names_the_model_to_look_up(pod):
    config = pod.root / "work" / "lora-8b.yml"
    text = (FIXTURES.parent / "training-configs" / "axolotl-lora-8b.yml").read_text()
    config.write_text(text)
    pod.env["HF_HUB_CACHE"] = str(pod.root / "hub")
    model = pod.run(job_model={"from": str(config)}).facts.model
    assert model.from_file.text == text and model.from_file.model == "NousResearch/Meta-Llama-3-8B"
    assert model.ref == "NousResearch/Meta-Llama-3-8B" and model.location.endswith(
        "models--NousResearch--Meta-Llama-3-8B"
    )
    missing = pod.run(job_model={"from": str(pod.root / "nope.yaml")}).facts.model
    assert missing.ref == "" and "No such file" in missing.from_file.error and missing.found is False
