"""Targets from an OpenSSH client config (`-H alias`, `-H 'gpu-*'`, `--ssh-config FILE`).

Resolves what OpenSSH would for each alias: HostName, Port, User, IdentityFile,
ProxyJump and UserKnownHostsFile, the first value obtained winning, `Include` globs
relative to ~/.ssh. `Match` blocks are evaluated for the criteria that need nothing
but names (all, host, originalhost, user, localuser); a block using any other criterion
(exec, localnetwork, canonical, final, ...) is treated as not matching: listing targets
never runs a command.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path

from computefence.errors import ConfigError
from computefence.models import Target

DEFAULT_SSH_CONFIG = "~/.ssh/config"
MAX_INCLUDE_DEPTH = 16  # as OpenSSH's READCONF_MAX_DEPTH
_SPLIT_RE = re.compile(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$")
_TOKEN_RE = re.compile(r"%(.)|\$\{([^}]*)\}")


@dataclass
class _Line:
    path: Path
    number: int
    keyword: str  # lower-cased
    args: list[str]

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.path}:{self.number}: {message}")


@dataclass
class _Resolved:
    # keyword -> (arguments, the line that set them; None for the command line's user@)
    options: dict[str, tuple[list[str], _Line | None]] = field(default_factory=dict)
    identity_files: list[tuple[str, _Line]] = field(default_factory=list)
    host_line: _Line | None = None


def _pattern_matches(pattern: str, name: str) -> bool:
    """OpenSSH wildcard match: `*` and `?` only, case-insensitive."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower())
    return re.fullmatch(regex, name.lower()) is not None


def _pattern_list_matches(patterns: list[str], name: str) -> bool:
    """A list of patterns with `!negations`: any negated match wins, else any positive match."""
    matched = False
    for pattern in patterns:
        if pattern.startswith("!"):
            if _pattern_matches(pattern[1:], name):
                return False
        elif _pattern_matches(pattern, name):
            matched = True
    return matched


def _is_wildcard(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


class SshConfig:
    """One ssh_config file and everything it Includes."""

    def __init__(self, path: str | Path, *, include_dir: Path | None = None):
        self.path = Path(path).expanduser()
        self.display = str(path)
        self.include_dir = include_dir if include_dir is not None else Path("~/.ssh").expanduser()
        self._cache: dict[Path, list[_Line]] = {}

    # ---------------------------------------------------------------- reading

    def _lines(self, path: Path) -> list[_Line]:
        if path not in self._cache:
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ConfigError(f"{path}: no such ssh config file") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: cannot read ssh config: {getattr(exc, 'strerror', None) or exc}") from None
            lines = []
            for number, raw in enumerate(text.splitlines(), 1):
                stripped = raw.strip()
                if not stripped or stripped.startswith("#"):
                    continue
                match = _SPLIT_RE.match(stripped)
                keyword, rest = (match.group(1), match.group(2)) if match else (stripped, "")
                try:
                    args = shlex.split(rest, posix=True)
                except ValueError as exc:
                    raise ConfigError(f"{path}:{number}: {exc}") from None
                lines.append(_Line(path, number, keyword.lower(), args))
            self._cache[path] = lines
        return self._cache[path]

    def _included(self, line: _Line) -> list[Path]:
        paths: list[Path] = []
        for pattern in line.args:
            expanded = Path(pattern).expanduser()
            base = expanded if expanded.is_absolute() else self.include_dir / expanded
            anchor = Path(base.anchor)
            paths.extend(sorted(p for p in anchor.glob(str(base.relative_to(anchor))) if p.is_file()))
        return paths

    # ---------------------------------------------------------------- Host entries

    def host_entries(self) -> list[tuple[str, _Line]]:
        """Concrete aliases (no wildcard, not negated) of every Host line, in file order."""
        found: dict[str, _Line] = {}
        self._collect_hosts(self.path, found, 0)
        return list(found.items())

    def _collect_hosts(self, path: Path, found: dict[str, _Line], depth: int) -> None:
        for line in self._lines(path):
            if line.keyword == "host":
                for pattern in line.args:
                    if not pattern.startswith("!") and not _is_wildcard(pattern):
                        found.setdefault(pattern, line)
            elif line.keyword == "include" and depth < MAX_INCLUDE_DEPTH:
                for included in self._included(line):
                    self._collect_hosts(included, found, depth + 1)

    # ---------------------------------------------------------------- resolving one alias

    def resolve(self, alias: str, *, user: str | None = None) -> Target:
        """The target `ssh [user@]alias` would reach with this config."""
        state = _Resolved()
        if user:
            state.options["user"] = ([user], None)
        if self.path.exists():
            self._apply(self.path, alias, state, 0)
        elif self.display != DEFAULT_SSH_CONFIG:
            raise ConfigError(f"{self.display}: no such ssh config file")
        return self._target(alias, state)

    def _apply(self, path: Path, alias: str, state: _Resolved, depth: int) -> None:
        active = True
        for line in self._lines(path):
            if line.keyword == "host":
                active = _pattern_list_matches(line.args, alias)
                if active and state.host_line is None:
                    state.host_line = line
                continue
            if line.keyword == "match":
                active = self._match(line, alias, state)
                continue
            if not active:
                continue
            if line.keyword == "include":
                if depth >= MAX_INCLUDE_DEPTH:
                    raise line.error(f"Include nested more than {MAX_INCLUDE_DEPTH} levels deep")
                for included in self._included(line):
                    self._apply(included, alias, state, depth + 1)
            elif line.keyword in ("hostname", "port", "user", "proxyjump", "userknownhostsfile"):
                if not line.args:
                    raise line.error(f"missing value for {line.keyword}")
                state.options.setdefault(line.keyword, (line.args, line))
            elif line.keyword == "identityfile":
                if not line.args:
                    raise line.error("missing value for IdentityFile")
                if line.args[0].lower() != "none":
                    state.identity_files.append((line.args[0], line))

    def _match(self, line: _Line, alias: str, state: _Resolved) -> bool:
        args = list(line.args)
        result = True
        while args:
            criterion = args.pop(0).lower()
            negate = criterion.startswith("!")
            criterion = criterion.lstrip("!")
            if criterion == "all":
                matched = True
            elif criterion in ("host", "originalhost", "user", "localuser"):
                if not args:
                    raise line.error(f"Match {criterion} needs a pattern")
                patterns = args.pop(0).split(",")
                value = {
                    "host": self._option(state, "hostname", alias),
                    "originalhost": alias,
                    "user": self._option(state, "user", getpass.getuser()),
                    "localuser": getpass.getuser(),
                }[criterion]
                matched = _pattern_list_matches(patterns, value)
            else:
                # Criteria we do not evaluate (exec would run a command): the block does not apply.
                return False
            result = result and (matched != negate)
        return result

    @staticmethod
    def _option(state: _Resolved, key: str, default: str) -> str:
        return state.options[key][0][0] if key in state.options else default

    def _target(self, alias: str, state: _Resolved) -> Target:
        hostname = alias
        if "hostname" in state.options:
            args, line = state.options["hostname"]
            hostname = self._expand(args[0], line, {"h": alias, "n": alias})
        port = 22
        if "port" in state.options:
            args, line = state.options["port"]
            if not args[0].isdigit() or not 1 <= int(args[0]) <= 65535:
                raise line.error(f"bad Port value {args[0]!r}: expected 1 to 65535")
            port = int(args[0])
        user = self._option(state, "user", "") or None
        proxy_jump = None
        if "proxyjump" in state.options and state.options["proxyjump"][0][0].lower() != "none":
            proxy_jump = state.options["proxyjump"][0][0]
        known_hosts: list[str] = []
        if "userknownhostsfile" in state.options:
            args, line = state.options["userknownhostsfile"]
            if args[0].lower() != "none":
                known_hosts = [str(Path(a).expanduser()) for a in args]
        local_user = getpass.getuser()
        tokens = {
            "h": hostname,
            "n": alias,
            "p": str(port),
            "r": user or local_user,
            "u": local_user,
            "d": str(Path.home()),
            "i": str(os.getuid()),
            "l": socket.gethostname(),
            "L": socket.gethostname().split(".")[0],
        }
        identity_files = []
        for raw, line in state.identity_files:
            identity = self._expand(raw, line, tokens)
            if identity not in identity_files:
                identity_files.append(identity)
        where = state.host_line
        return Target(
            name=alias,
            host=hostname,
            port=port,
            user=user,
            identity_files=[str(Path(p).expanduser()) for p in identity_files],
            proxy_jump=proxy_jump,
            known_hosts=known_hosts,
            source=f"{where.path}:{where.number}" if where else self.display,
            ssh_config=str(self.path),
        )

    @staticmethod
    def _expand(value: str, line: _Line, tokens: dict[str, str]) -> str:
        def replace(match: re.Match[str]) -> str:
            token, env = match.group(1), match.group(2)
            if env is not None:
                if env not in os.environ:
                    raise line.error(f"${{{env}}} is not set in the environment")
                return os.environ[env]
            if token == "%":
                return "%"
            if token not in tokens:
                raise line.error(f"unsupported token %{token} in {value!r}")
            return tokens[token]

        return _TOKEN_RE.sub(replace, value)


class SshConfigSource:
    """`-H ALIAS` (repeatable; a pattern selects the config's Host entries) and/or `--ssh-config FILE`.

    With a file and no -H, every concrete Host entry of the file is a target.
    """

    def __init__(self, hosts: list[str] | tuple[str, ...] = (), config: str | None = None):
        self.hosts = list(hosts)
        self.config = SshConfig(config or DEFAULT_SSH_CONFIG)
        self.name = f"ssh_config {self.config.display}"

    def targets(self) -> list[Target]:
        config = self.config
        specs = self.hosts
        if not specs:
            entries = config.host_entries()
            if not entries:
                raise ConfigError(f"{config.display}: no Host entries without wildcards to check")
            specs = [alias for alias, _ in entries]
        targets: dict[str, Target] = {}
        for spec in specs:
            user, _, alias = spec.rpartition("@")
            if not alias:
                raise ConfigError(f"-H {spec!r}: empty host alias")
            if _is_wildcard(alias):
                entries = config.host_entries() if config.path.exists() else []
                aliases = [a for a, _ in entries if _pattern_matches(alias, a)]
                if not aliases:
                    known = ", ".join(a for a, _ in entries) or "none"
                    raise ConfigError(f"-H {spec!r}: no Host entry in {config.display} matches (Host entries: {known})")
            else:
                aliases = [alias]
            for name in aliases:
                if name not in targets:
                    targets[name] = config.resolve(name, user=user or None)
        return list(targets.values())
