"""`--limit PATTERN` and `--tag T`: narrowing the targets, as Ansible's --limit does.

--limit takes comma-separated shell patterns on target names; `!pattern` excludes.
A name is kept when it matches any include pattern (or there are only exclusions) and no
exclusion. --tag (repeatable, or comma-separated) keeps targets carrying any of the tags.
Both together keep what satisfies both. Narrowing a non-empty list to nothing is an error.
`--shard I/N` keeps the I-th of N slices (by a hash of the name) for runners that split a pool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from computefence.errors import ConfigError
from computefence.models import Target

_SHOWN = 12


def _split(values: Iterable[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _limit_matches(name: str, include: list[str], exclude: list[str]) -> bool:
    if any(fnmatchcase(name, pattern) for pattern in exclude):
        return False
    return not include or any(fnmatchcase(name, pattern) for pattern in include)


def _listing(values: Iterable[str]) -> str:
    values = list(dict.fromkeys(values))
    if not values:
        return "none"
    more = f", ... ({len(values) - _SHOWN} more)" if len(values) > _SHOWN else ""
    return ", ".join(values[:_SHOWN]) + more


def select_targets(targets: Sequence[Target], *, limit: str | None = None, tags: Iterable[str] = ()) -> list[Target]:
    """The targets --limit and --tag keep, in their original order."""
    wanted_tags = set(_split(tags))
    if limit is None and not wanted_tags:
        return list(targets)
    patterns = _split([limit or ""])
    if limit is not None and not patterns:
        raise ConfigError("--limit needs at least one host name pattern")
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!") and len(p) > 1]
    selected = [
        t
        for t in targets
        if _limit_matches(t.name, include, exclude) and (not wanted_tags or wanted_tags & set(t.tags))
    ]
    if targets and not selected:
        asked = " and ".join(
            part
            for part in (
                f"--limit {limit!r}" if limit is not None else "",
                f"--tag {','.join(sorted(wanted_tags))}" if wanted_tags else "",
            )
            if part
        )
        raise ConfigError(
            f"{asked} matched none of the {len(targets)} targets "
            f"(names: {_listing(t.name for t in targets)}; tags: {_listing(sorted({g for t in targets for g in t.tags}))})"
        )
    return selected


# ---------------------------------------------------------------- --shard I/N


def parse_shard(text: str) -> tuple[int, int]:
    """'2/3' -> (2, 3): the second of three slices (1-based, as CI matrices count jobs)."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not slash or n < 1 or not 1 <= i <= n:
        raise ConfigError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. --shard 1/3")
    return i, n


def shard_of(name: str, count: int) -> int:
    """The 1-based slice a target name falls in: a stable hash of the name alone, so adding or
    removing pods never moves the others, and every runner computes the same split."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def select_shard(targets: Sequence[Target], index: int, count: int) -> list[Target]:
    """The targets in slice `index` of `count`; may be none when there are few pods."""
    return [t for t in targets if shard_of(t.name, count) == index]
