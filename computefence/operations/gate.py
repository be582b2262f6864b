"""`fleet check --healthy-out FILE`: the pods a job can start on, in a form the next command reads.

names (one a line, for `xargs`), ssh (`user@host -p port`, then the target's `-F`, `-J` or
`-o ProxyCommand=...`), inventory (a ComputeFence
inventory of just those pods, with their checks) or json. No ready pod: an empty file
(json: `[]`), so a sweep launched from it starts nothing.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from computefence.errors import ConfigError
from computefence.evaluate.fleet import ready_hosts
from computefence.models import Report, Target
from computefence.sources.export import export_yaml


def _names(targets: Sequence[Target]) -> str:
    return "".join(f"{t.name}\n" for t in targets)


def _ssh_line(target: Target) -> str:
    line = f"{target.user + '@' if target.user else ''}{target.host} -p {target.port}"
    if target.ssh_config:
        line += f" -F {shlex.quote(target.ssh_config)}"
    if target.proxy_jump:
        line += f" -J {shlex.quote(target.proxy_jump)}"
    if target.proxy_command:
        line += f" -o {shlex.quote('ProxyCommand=' + target.proxy_command)}"
    return line + "\n"


def _ssh(targets: Sequence[Target]) -> str:
    return "".join(_ssh_line(t) for t in targets)


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


def check_gate_path(path: Path) -> None:
    """Before connecting: a --healthy-out that can never be written fails now, not after the run."""
    if path.is_dir():
        raise ConfigError(f"--healthy-out {path} is a directory")
    if str(path) != "-" and not path.parent.is_dir():
        raise ConfigError(f"--healthy-out {path}: directory {path.parent} does not exist")


def healthy_file(report: Report, targets: Sequence[Target], fmt: str) -> str:
    """The ready pods of `report` as `fmt` text, in the order the targets were selected."""
    ready = {host.name for host in ready_hosts(report)}
    return HEALTHY_FORMATS[fmt]([t for t in targets if t.name in ready])
