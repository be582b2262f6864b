"""--limit and --tag."""

from __future__ import annotations

import pytest

from computefence.errors import ConfigError
from computefence.models import Target
from computefence.sources.selection import select_targets

TARGETS = [
    Target(name="pod-a", host="a", tags=["sweep-7", "h100"]),
    Target(name="pod-b", host="b", tags=["sweep-7"]),
    Target(name="pod-c", host="c", tags=["sweep-8"]),
    Target(name="gpu-1", host="d"),
]


def names(**kwargs) -> list[str]:
    return [t.name for t in select_targets(TARGETS, **kwargs)]


def test_no_filter_keeps_all():
    assert names() == ["pod-a", "pod-b", "pod-c", "gpu-1"]


@pytest.mark.parametrize(
    "limit,expected",
    [
        ("pod-a", ["pod-a"]),
        ("pod-*", ["pod-a", "pod-b", "pod-c"]),
        ("gpu-1,pod-b", ["pod-b", "gpu-1"]),  # original order is kept
        ("pod-*,!pod-b", ["pod-a", "pod-c"]),
        ("!pod-*", ["gpu-1"]),  # only exclusions: start from everything
        ("pod-[ab]", ["pod-a", "pod-b"]),
        (" pod-a , ", ["pod-a"]),
    ],
)
def test_limit(limit, expected):
    assert names(limit=limit) == expected


def test_tags_match_any_and_combine_with_limit():
    assert names(tags=["sweep-8", "h100"]) == ["pod-a", "pod-c"]
    assert names(tags=["sweep-7,sweep-8"]) == ["pod-a", "pod-b", "pod-c"]
    assert names(tags=["sweep-7"], limit="!pod-a") == ["pod-b"]


def test_empty_selection_says_what_there_is():
    with pytest.raises(ConfigError) as info:
        select_targets(TARGETS, limit="nope*", tags=["x"])
    message = str(info.value)
    assert message.startswith("--limit 'nope*' and --tag x matched none of the 4 targets")
    assert "names: pod-a, pod-b, pod-c, gpu-1" in message and "tags: h100, sweep-7, sweep-8" in message


def test_long_lists_are_cut():
    many = [Target(name=f"n{i:03d}", host="h") for i in range(40)]
    message = str(pytest.raises(ConfigError, select_targets, many, limit="zzz").value)
    assert "n011, ... (28 more)" in message


def test_blank_limit_is_an_error_and_no_targets_is_not():
    with pytest.raises(ConfigError, match="--limit needs at least one"):
        select_targets(TARGETS, limit=" , ")
    assert select_targets([], limit="pod-*") == []
