"""Baseline locks (`fleet snapshot -o FILE`, `--baseline FILE`): read one, validated, with the
file's hash for the report."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from computefence.errors import ConfigError
from computefence.files import read_config_bytes
from computefence.models import BASELINE_SCHEMA_VERSION, AppliedFile, BaselineLock
from computefence.policy import LoadedPolicy
from computefence.saved_files import LOCK, check_saved, kind_of, require_kind, top_level_keys, validation_error

# A lock of 1000 pods' disagreements is well under this.
MAX_LOCK_BYTES = 16 * 2**20


def load_baseline(path: Path) -> tuple[BaselineLock, AppliedFile]:
    raw = read_config_bytes(path, "baseline lock", limit=MAX_LOCK_BYTES)
    try:
        lock = BaselineLock.model_validate_json(raw)
    except ValidationError as exc:
        if kind_of(top_level_keys(raw)) not in (LOCK, None):
            require_kind(path, set(), raw, LOCK)
        raise validation_error(path, raw, exc, "a computefence baseline lock") from None
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
