"""`fleet check --healthy-out FILE`: the pods a job can start on, in a form the next command reads.

names (one a line, for `xargs -d '\\n'`), names0 (each ended by NUL, for `xargs -0`), ssh
(`user@host -p port`, then the target's `-F`, `-J` or `-o ProxyCommand=...`), inventory (a
ComputeFence inventory of just those pods, with their checks) or json. No ready pod: an empty
file (json: `[]`), so a sweep launched from it starts nothing.

The file is read by xargs, a shell or ssh, so a ready pod whose name, host or user is not a
plain word (computefence.safe_words) is left out of it with a one-line warning: the job does
not start on a pod that cannot be named safely (fail closed). A name is left out only where
the format cannot carry it: json carries any name, names0 quotes, backslashes and blanks.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from computefence.evaluate.fleet import ready_hosts
from computefence.files import check_output_path
from computefence.models import Report, Target
from computefence.safe_words import (
    shown,
    unprintable,
    unsafe_host,
    unsafe_nul_list_word,
    unsafe_proxy_jump,
    unsafe_user,
    unsafe_word,
)
from computefence.sources.export import export_yaml


def _names(targets: Sequence[Target]) -> str:
    return "".join(f"{t.name}\n" for t in targets)


def _names0(targets: Sequence[Target]) -> str:
    return "".join(f"{t.name}\0" for t in targets)


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
    "names0": _names0,
    "ssh": _ssh,
    "inventory": _inventory,
    "json": _json,
}


def _quoted_word(what: str, value: str) -> str | None:
    """A value the ssh format writes in single quotes: a shell and xargs read it back whole
    only when it holds no quote, backslash or line break."""
    bad = unprintable(value) or next((c for c in value if c in "'\"\\"), None)
    return f"{what} {shown(value)} holds {bad}, which the ssh format cannot quote" if bad else None


def _unsafe_name(name: str, fmt: str) -> str | None:
    """Why `name` cannot be written as itself in `fmt`: JSON carries any string, a NUL-separated
    list any word that is no option or user@host, the line-based formats only plain words."""
    if fmt == "json":
        return None
    if fmt == "names0":
        return unsafe_nul_list_word("name", name)
    return unsafe_word("name", name)


def unsafe_for_gate(target: Target, fmt: str) -> str | None:
    """Why `target` cannot be written into a gate file of format `fmt`, or None."""
    problem = (
        _unsafe_name(target.name, fmt)
        or unsafe_host("host", target.host)
        or (target.user is not None and unsafe_user("user", target.user))
        or (target.proxy_jump is not None and unsafe_proxy_jump(target.proxy_jump))
    )
    if not problem and fmt == "ssh":
        problem = (target.ssh_config is not None and _quoted_word("ssh_config", target.ssh_config)) or (
            target.proxy_command is not None and _quoted_word("proxy_command", target.proxy_command)
        )
    return problem or None


def check_gate_path(path: Path) -> None:
    """Before connecting: a --healthy-out that can never be written fails now, not after the run."""
    check_output_path(path, "--healthy-out")


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def healthy_file(report: Report, targets: Sequence[Target], fmt: str, warn: Callable[[str], None] = _warn) -> str:
    """The ready pods of `report` as `fmt` text, in the order the targets were selected; a ready
    pod that cannot be written safely is left out, and `warn` gets one line naming it."""
    ready = {host.name for host in ready_hosts(report)}
    kept = []
    for target in targets:
        if target.name not in ready:
            continue
        problem = unsafe_for_gate(target, fmt)
        if problem:
            warn(
                f"computefence: warning: --healthy-out leaves out ready pod {shown(target.name)}: {problem}; "
                "the job will not start there"
            )
            continue
        kept.append(target)
    return HEALTHY_FORMATS[fmt](kept)
