"""What every target source (inventory file, ssh_config, Ansible, provider API) provides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from computefence.models import Target


@runtime_checkable
class TargetSource(Protocol):
    """A place targets come from.

    `targets()` returns the machines the source knows about. A source that cannot be
    read raises computefence.errors.SourceError (an API that is down) or ConfigError
    (a file the user must fix), each with a one-line message.

    A source that can be read more than one way may also set `resolver` (what read it,
    e.g. "ssh -G") and `warnings` (one line each: what it skipped or cannot honour);
    collect_targets copies both into the source's SourceStatus.
    """

    name: str

    def targets(self) -> list[Target]: ...


@dataclass(frozen=True)
class ActionAnswer:
    """What a provider said to a stop or terminate: "released", "already_stopped", "gone"
    or "failed", and its words (scrubbed of the key)."""

    outcome: str
    detail: str


@runtime_checkable
class ReleasingSource(TargetSource, Protocol):
    """A provider source that can also give a pod back (`fleet release`).

    `actions` are the ones the provider has ("stop" keeps the volume, "terminate" destroys
    the pod). `accepts(pod_id)` says whether an id has the provider's shape (nothing else
    is ever sent). `describe(pod_id, action)` is the exact API call, for the dry run; it
    needs no key and calls nothing. `release(pod_id, action)` makes the call and never
    raises for a failing API: the answer says "failed" and why; `release_all` is the same
    for several pods. Used as a context manager,
    the source keeps one connection for every call in between (listings included).
    """

    # The provider's name in messages ("Vast.ai").
    title: str
    actions: tuple[str, ...]

    def __enter__(self) -> ReleasingSource: ...

    def __exit__(self, *exc: object) -> None: ...

    def accepts(self, pod_id: str) -> bool: ...

    def describe(self, pod_id: str, action: str) -> str: ...

    def release(self, pod_id: str, action: str) -> ActionAnswer: ...

    def release_all(self, pod_ids: list[str], action: str) -> dict[str, ActionAnswer]:
        """Each pod's answer; a provider whose API takes many ids at once (Lambda) sends one request."""
        ...
