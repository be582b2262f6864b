"""Writing targets back out: a ComputeFence inventory (`yaml`) or an ssh_config block.

Targets a provider lists but that cannot be checked are left out, with a comment saying
why. Names that do not fit the inventory's name rule (a provider pod called "My Pod") are
rewritten ("My-Pod") and the original kept in a comment. The YAML loads back through
computefence.sources.inventory to the same targets (known_hosts files become the
inventory's, shared by all its hosts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from computefence.errors import ConfigError
from computefence.models import Target
from computefence.safe_words import (
    comment_text,
    shown,
    unprintable,
    unsafe_host,
    unsafe_proxy_jump,
    unsafe_user,
    unsafe_word,
)
from computefence.sources.inventory import NAME_RE, safe_name


def _exportable(targets: Sequence[Target], strict: bool = False) -> tuple[list[tuple[str, Target]], list[Target]]:
    """(unique safe name, target) for checkable targets, and the targets left out. `strict`: names
    that are plain words (safe_words), as an ssh_config Host line and `ssh -- NAME` need them."""
    names: set[str] = set()
    kept, skipped = [], []
    for target in targets:
        if target.unreachable_reason:
            skipped.append(target)
            continue
        base = target.name if NAME_RE.match(target.name) else safe_name(target.name)
        if strict and unsafe_word("name", base):
            base = re.sub(r"[^A-Za-z0-9_.+=-]+", "-", base).strip("-.+=") or "host"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.add(name)
        kept.append((name, target))
    return kept, skipped


def _describe(name: str, target: Target) -> str:
    # Provider strings (a pod name, a GPU type) reach a comment only through comment_text:
    # a line break in one would end the comment and add a host to the file.
    parts = []
    if name != target.name:
        parts.append(f"was {target.name!r}")
    provider = target.provider
    if provider:
        gpu = f"{provider.gpu_count or 1}x {provider.gpu_type}" if provider.gpu_type else None
        cost = f"${provider.cost_per_hour:.2f}/h" if provider.cost_per_hour is not None else None
        parts.append(" ".join(x for x in (provider.provider, "pod", provider.pod_id) if x))
        parts.extend(x for x in (gpu, cost) if x)
    elif target.source:
        parts.append(f"from {target.source}")
    return "# " + comment_text(", ".join(parts)) + "\n" if parts else ""


def _header(
    kind: str, kept: list[Any], skipped: list[Target], written_by: str = "computefence inventory export"
) -> str:
    lines = [f"# {kind} written by `{written_by}` ({len(kept)} host{'' if len(kept) == 1 else 's'})."]
    for target in skipped:
        lines.append("# " + comment_text(f"Left out, not checkable: {target.name}: {target.unreachable_reason}"))
    return "\n".join(lines) + "\n"


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().absolute())


def export_yaml(targets: Sequence[Target], written_by: str = "computefence inventory export") -> str:
    """A ComputeFence inventory holding the targets."""
    kept, skipped = _exportable(targets)
    out = [_header("ComputeFence inventory", kept, skipped, written_by)]
    known_hosts = list(dict.fromkeys(_absolute(p) for _, t in kept for p in t.known_hosts))
    if known_hosts:
        out.append(yaml.safe_dump({"known_hosts": known_hosts}, sort_keys=False))
    out.append("hosts:\n")
    for name, target in kept:
        entry: dict[str, Any] = {"name": name, "host": target.host, "port": target.port}
        if target.user:
            entry["user"] = target.user
        # `none` first, as ssh_config's IdentityFile none: no ~/.ssh/id_* key in any case.
        files = ([] if target.default_identities else ["none"]) + [_absolute(p) for p in target.identity_files]
        if files:
            entry["identity_file"] = files[0] if len(files) == 1 else files
        if target.proxy_jump:
            entry["proxy_jump"] = target.proxy_jump
        if target.proxy_command:
            entry["proxy_command"] = target.proxy_command
        if target.python != "python3":
            entry["python"] = target.python
        if target.tags:
            entry["tags"] = [tag if NAME_RE.match(tag) else safe_name(tag) for tag in target.tags]
        checks = target.checks.model_dump(exclude_defaults=True)
        if checks:
            entry["checks"] = checks
        out.append(_describe(name, target))
        out.append(yaml.safe_dump([entry], sort_keys=False, default_flow_style=False))
    return "".join(out)


def _ssh_path(what: str, path: str) -> str:
    """A file path as one ssh_config argument, in double quotes with `\\` and `"` escaped (the
    rules of OpenSSH's argv_split) and `%` doubled (ssh expands %-tokens in these paths)."""
    bad = unprintable(path)
    if bad:
        raise _Unwritable(f"{what} {shown(path)} holds {bad}")
    if "${" in path:
        raise _Unwritable(f"{what} {shown(path)} holds '${{', which ssh would expand as an environment variable")
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"' if any(c in path for c in " \t#'\"\\") else escaped


class _Unwritable(Exception):
    """A value that ssh_config cannot hold as the same value."""


def _ssh_lines(name: str, target: Target) -> list[str]:
    problem = (
        unsafe_word("name", name)
        or unsafe_host("host", target.host)
        or (target.user is not None and unsafe_user("user", target.user))
        or (target.proxy_jump is not None and unsafe_proxy_jump(target.proxy_jump))
    )
    if problem:
        raise _Unwritable(problem)
    lines = [f"Host {name}", f"HostName {target.host}", f"Port {target.port}"]
    if target.user:
        lines.append(f"User {target.user}")
    if not target.default_identities:
        lines.append("IdentityFile none")
    lines.extend(f"IdentityFile {_ssh_path('identity_file', _absolute(p))}" for p in target.identity_files)
    if target.proxy_jump:
        lines.append(f"ProxyJump {target.proxy_jump}")
    if target.proxy_command:
        # ssh takes the rest of the line as the command, %-tokens and all: it only has to stay one line.
        command = target.proxy_command
        bad = unprintable(command)
        if bad or command != command.strip():
            raise _Unwritable(f"proxy_command {shown(command)} holds {bad or 'leading or trailing blanks'}")
        lines.append(f"ProxyCommand {command}")
    if target.known_hosts:
        # UserKnownHostsFile replaces ssh's default file; keep it first, as ComputeFence does.
        default = "~/.ssh/known_hosts"
        extra = [p for p in dict.fromkeys(_absolute(p) for p in target.known_hosts) if p != _absolute(default)]
        lines.append("UserKnownHostsFile " + " ".join([default, *(_ssh_path("known_hosts", f) for f in extra)]))
    return lines


def export_ssh_config(targets: Sequence[Target]) -> str:
    """An ssh_config block with one `Host` entry per target. A value ssh_config cannot hold as
    itself (a line break, a Host pattern character, a user or host that is not a plain word)
    is a ConfigError and nothing is exported: ssh would read another host or option from it."""
    kept, skipped = _exportable(targets, strict=True)
    out = [_header("ssh_config block", kept, skipped)]
    for name, target in kept:
        try:
            lines = _ssh_lines(name, target)
        except _Unwritable as exc:
            raise ConfigError(
                f"{target.source or name}: host {name!r}: {exc}; an ssh_config cannot hold it safely, nothing exported"
            ) from None
        out.append("\n" + _describe(name, target))
        out.append(lines[0] + "\n" + "".join(f"    {line}\n" for line in lines[1:]))
    return "".join(out)


EXPORT_FORMATS: dict[str, Callable[[Sequence[Target]], str]] = {
    "yaml": export_yaml,
    "ssh-config": export_ssh_config,
}
