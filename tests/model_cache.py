"""A Hugging Face hub cache laid out as huggingface_hub leaves it, for probe and fleet tests:
hub/models--ORG--NAME/{refs/main, blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>}."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "models"
COMMIT = "3ebd2c06f46640dc97c0fa6e3cd59da9944c3be0"


def repo_folder(hub: Path, repo_id: str) -> Path:
    return hub / ("models--" + repo_id.replace("/", "--"))


def cache_files(repo_id: str, fixture: str) -> dict[str, str]:
    """The fixture's real config.json and index as hub-relative paths -> text (plain files in the
    snapshot, as huggingface_hub writes them where symlinks are unavailable)."""
    base = "models--" + repo_id.replace("/", "--")
    files = {f"{base}/refs/main": COMMIT}
    for name in ("config.json", "model.safetensors.index.json"):
        files[f"{base}/snapshots/{COMMIT}/{name}"] = (FIXTURES / fixture / name).read_text()
    return files


def put_blob(hub: Path, repo_id: str, name: str, data: bytes) -> Path:
    """`name` in the snapshot as a symlink to its blob, as a finished download leaves it."""
    repo = repo_folder(hub, repo_id)
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / COMMIT / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(blob, link.parent), link)
    return link


def write_cache(hub: Path, repo_id: str, fixture: str) -> Path:
    for relative, text in cache_files(repo_id, fixture).items():
        target = hub / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return repo_folder(hub, repo_id) / "snapshots" / COMMIT
