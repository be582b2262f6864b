"""`fleet check --healthy-out FILE`: the pods a job can start on, in a form the next command reads.

names (one a line, for `xargs`), ssh (`user@host -p port`), inventory (a ComputeFence
inventory of just those pods, with their checks) or json. No ready pod: an empty file
(json: `[]`), so a sweep launched from it starts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from computefence.evaluate.fleet import ready_hosts
from computefence.models import Report, Target
from computefence.sources.export import export_yaml


def _names(targets: Sequence[Target]) -> str:
    return "".join(f"{t.name}\n" for t in targets)


def _ssh(targets: Sequence[Target]) -> str:
    return "".join(f"{t.user + '@' if t.user else ''}{t.host} -p {t.port}\n" for t in targets)


def _inventory(targets: Sequence[Target]) -> str:
    return export_yaml(targets, written_by="computefence fleet check --healthy-out") if targets else ""


def _json(targets: Sequence[Target]) -> str:
    entries = [{"name": t.name, "host": t.host, "port": t.port, "user": t.user, "tags": t.tags} for t in targets]
    return json.dumps(entries, indent=2) + "\n"


HEALTHY_FORMATS: dict[str, Callable[[Sequence[Target]], str]] = {
    "names": _names,
    "ssh": _ssh,
    "inventory": _inventory,
    "json": _json,
}


def healthy_file(report: Report, targets: Sequence[Target], fmt: str) -> str:
    """The ready pods of `report` as `fmt` text, in the order the targets were selected."""
    ready = {host.name for host in ready_hosts(report)}
    return HEALTHY_FORMATS[fmt]([t for t in targets if t.name in ready])
