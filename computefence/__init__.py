"""ComputeFence: pre-flight checks for rented GPU compute.

From Python: `computefence.check(targets, connector, ...)` returns the Report that
`fleet check --format json` prints, and `await computefence.check_async(...)` is the same
inside an event loop; they open a run session (computefence.session), whose steps are in
computefence.run. They are imported on first use,
so `import computefence` (and the CLI's start) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from computefence.version import __version__

if TYPE_CHECKING:
    from computefence.session import check, check_async

__all__ = ["__version__", "check", "check_async"]


def __getattr__(name: str) -> Any:
    if name in ("check", "check_async"):
        from computefence import session

        return getattr(session, name)
    raise AttributeError(f"module 'computefence' has no attribute {name!r}")
