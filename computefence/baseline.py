"""Baseline locks (`fleet snapshot -o FILE`, `--baseline FILE`): read one, validated, with the
file's hash for the report."""

from __future__ import annotations

import hashlib
from pathlib import Path

from computefence.errors import ConfigError
from computefence.files import read_config_bytes
from computefence.models import BASELINE_SCHEMA_VERSION, AppliedFile, BaselineLock
from computefence.policy import LoadedPolicy
from computefence.saved_files import LOCK, check_saved, validated

# A lock of 1000 pods' disagreements is well under this.
MAX_LOCK_BYTES = 16 * 2**20


def load_baseline(path: Path) -> tuple[BaselineLock, AppliedFile]:
    raw = read_config_bytes(path, "baseline lock", limit=MAX_LOCK_BYTES)
    lock = validated(path, raw, BaselineLock, LOCK, "a computefence baseline lock")
    check_saved(path, lock, raw, LOCK, lock.schema_version, BASELINE_SCHEMA_VERSION)
    return lock, AppliedFile(path=str(path), sha256=hashlib.sha256(raw).hexdigest())


def resolve_baseline(path: Path | None, loaded: LoadedPolicy | None) -> tuple[BaselineLock | None, AppliedFile | None]:
    """--baseline, else the policy's `baseline:` (relative to the policy file)."""
    if path is None and loaded is not None:
        path = loaded.baseline_path
        if path is not None and not path.exists():
            raise ConfigError(
                f"{loaded.path}: baseline {loaded.policy.baseline} not found at {path} "
                "(take one with `computefence fleet snapshot -o FILE`)"
            )
    if path is None:
        return None, None
    return load_baseline(path)
