"""What every target source (inventory file, ssh_config, Ansible, provider API) provides."""

from __future__ import annotations

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
