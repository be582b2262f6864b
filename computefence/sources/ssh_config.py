"""Targets from an OpenSSH client config (`-H alias`, `-H 'gpu-*'`, `--ssh-config FILE`).

Each alias is resolved by the user's own OpenSSH: `ssh -G [-F FILE] ALIAS` prints what
ssh would use (Match, Include, tokens, canonicalisation, defaults), concurrently, with a
timeout, once per alias and run. `Match exec` commands therefore run, as ssh runs them.

Without an `ssh` binary the built-in parser decides: HostName, Port, User, IdentityFile,
ProxyJump/ProxyCommand and UserKnownHostsFile, the first value obtained winning, `Include`
globs relative to ~/.ssh, `Match` for all, host, originalhost, user, localuser, canonical
and final (with ssh's second pass); a block using any other criterion (exec, localnetwork)
is treated as not matching, since the parser never runs a command.

Enumerating Host entries (`--ssh-config FILE` alone, `-H 'gpu-*'`) is always the parser's.
"""

from __future__ import annotations

import functools
import getpass
import hashlib
import heapq
import os
import re
import shlex
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from computefence.errors import ConfigError
from computefence.files import read_config_text
from computefence.models import Target
from computefence.sources.tools import ToolOverflow, ToolTimeout, run_tool

DEFAULT_SSH_CONFIG = "~/.ssh/config"
MAX_INCLUDE_DEPTH = 16  # as OpenSSH's READCONF_MAX_DEPTH
SSH_G_TIMEOUT_S = 10.0
# `ssh -G` prints a few KiB for any host; more is no configuration.
SSH_G_MAX_BYTES = 1 << 20
SSH_G_WORKERS = 16
RESOLVER_SSH = "ssh -G"
RESOLVER_PARSER = "built-in parser"
# What `ssh -G` lists when no IdentityFile applies: ComputeFence leaves those to the connector.
DEFAULT_IDENTITY_FILES = [
    f"~/.ssh/{name}"
    for name in ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa")
]
# Keywords whose values ssh expands ${VAR} in (readconf.c); HostName is not one of them.
_ENV_KEYWORDS = ("identityfile", "userknownhostsfile")
_SPLIT_RE = re.compile(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$")
_WARNINGS_SHOWN = 5
# Options that change where or how ssh connects which ComputeFence cannot do; each one in
# effect for a host is a warning. Values that are ssh's defaults (`ssh -G` prints them) are fine.
_UNHONOURED_DEFAULTS = {
    "hostkeyalias": (),
    "certificatefile": (),
    "bindaddress": (),
    "bindinterface": (),
    "knownhostscommand": (),
    "pkcs11provider": ("none",),
    "proxyusefdpass": ("no",),
    "addressfamily": ("any",),
    "canonicalizehostname": ("no", "false"),
}
_SSH_LINE_RE = re.compile(r"^(.*?):? line (\d+):")
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
    # keyword -> (arguments, the line that set them; None for the command line's user@).
    # ProxyJump and ProxyCommand share the key "proxy": whichever comes first wins, as in ssh.
    options: dict[str, tuple[list[str], _Line | None]] = field(default_factory=dict)
    identity_files: list[tuple[str, _Line]] = field(default_factory=list)
    host_line: _Line | None = None
    want_final_pass: bool = False
    # First values of the options ComputeFence cannot honour, as `ssh -G` would list them.
    unhonoured: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class _Block:
    """A Host or Match line and the lines up to the next one; `header` None for the lines
    before the first."""

    header: _Line | None
    body: list[_Line] = field(default_factory=list)


@dataclass
class _Blocks:
    """A file's blocks, and which an alias can be in: a Host block whose patterns are all plain
    names only for those names; the others (the lines before the first header, Match blocks,
    Host blocks with a wildcard) for every alias. Resolving 2,000 aliases then looks at a few
    blocks each, not at every line of the file."""

    blocks: list[_Block] = field(default_factory=list)
    by_name: dict[str, list[int]] = field(default_factory=dict)
    always: list[int] = field(default_factory=list)

    def add(self, block: _Block) -> None:
        index = len(self.blocks)
        self.blocks.append(block)
        header = block.header
        if header is None or header.keyword != "host":
            self.always.append(index)
            return
        positive = [pattern for pattern in header.args if not pattern.startswith("!")]
        if any(_is_wildcard(pattern) for pattern in positive):
            self.always.append(index)
            return
        for pattern in dict.fromkeys(positive):  # no positive pattern: the block never applies
            self.by_name.setdefault(pattern, []).append(index)

    def for_alias(self, alias: str) -> list[_Block]:
        named = self.by_name.get(alias)
        return [self.blocks[i] for i in (heapq.merge(named, self.always) if named else self.always)]


@functools.lru_cache(maxsize=4096)
def _wildcard_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _pattern_matches(pattern: str, name: str, *, fold_case: bool = False) -> bool:
    """OpenSSH wildcard match: `*` and `?` only; case-sensitive as for Host lines."""
    if fold_case:
        pattern, name = pattern.lower(), name.lower()
    if not _is_wildcard(pattern):
        return pattern == name
    return _wildcard_regex(pattern).fullmatch(name) is not None


def _pattern_list_matches(patterns: list[str], name: str, *, fold_case: bool = False) -> bool:
    """A list of patterns with `!negations`: any negated match wins, else any positive match."""
    matched = False
    for pattern in patterns:
        if pattern.startswith("!"):
            if _pattern_matches(pattern[1:], name, fold_case=fold_case):
                return False
        elif _pattern_matches(pattern, name, fold_case=fold_case):
            matched = True
    return matched


def _is_wildcard(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def _port(value: str) -> int | None:
    """A Port value as ssh reads it: a number or a service name (`ssh`)."""
    if value.isdigit():
        return int(value) if 1 <= int(value) <= 65535 else None
    try:
        return socket.getservbyname(value, "tcp")
    except OSError:
        return None


def _password_home() -> Path:
    """The home directory ssh uses for `~`: the password database's, not $HOME."""
    try:
        import pwd

        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        return Path.home()


def connection_hash(local_host: str, host: str, port: int, user: str) -> str:
    """ssh's %C: SHA-1 of %l%h%p%r."""
    return hashlib.sha1(f"{local_host}{host}{port}{user}".encode()).hexdigest()


def expand_tokens(value: str, tokens: dict[str, str], *, allow_env: bool, where: str) -> str:
    """ssh's %-token (and, for the keywords that allow it, ${VAR}) expansion of one value."""

    def replace(match: re.Match[str]) -> str:
        token, env = match.group(1), match.group(2)
        if env is not None:
            if not allow_env:
                return match.group(0)
            if env not in os.environ:
                raise ConfigError(f"{where}: ${{{env}}} is not set in the environment")
            return os.environ[env]
        if token == "%":
            return "%"
        if token not in tokens:
            raise ConfigError(f"{where}: unsupported token %{token} in {value!r}")
        return tokens[token]

    return _TOKEN_RE.sub(replace, value)


def identity_tokens(alias: str, hostname: str, port: int, user: str) -> dict[str, str]:
    """The tokens IdentityFile may use, for a resolved host."""
    local_user = getpass.getuser()
    local_host = socket.gethostname()
    return {
        "h": hostname,
        "n": alias,
        "p": str(port),
        "r": user,
        "u": local_user,
        "d": str(Path.home()),
        "i": str(os.getuid()),
        "l": local_host,
        "L": local_host.split(".")[0],
        "C": connection_hash(local_host, hostname, port, user),
    }


class SshConfig:
    """One ssh_config file and everything it Includes."""

    def __init__(self, path: str | Path, *, include_dir: Path | None = None):
        self.path = Path(path).expanduser()
        self.display = str(path)
        self.include_dir = include_dir if include_dir is not None else Path("~/.ssh").expanduser()
        self._cache: dict[Path, list[_Line]] = {}
        self._block_cache: dict[Path, _Blocks] = {}

    # ---------------------------------------------------------------- reading

    def _lines(self, path: Path) -> list[_Line]:
        if path not in self._cache:
            text = read_config_text(path, "ssh config file")
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

    def _blocks(self, path: Path) -> _Blocks:
        if path not in self._block_cache:
            blocks = _Blocks()
            block = _Block(None)
            for line in self._lines(path):
                if line.keyword in ("host", "match"):
                    blocks.add(block)
                    block = _Block(line)
                else:
                    block.body.append(line)
            blocks.add(block)
            self._block_cache[path] = blocks
        return self._block_cache[path]

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
        return self.resolve_with_options(alias, user=user)[0]

    def resolve_with_options(self, alias: str, *, user: str | None = None) -> tuple[Target, list[str]]:
        """The target, and the options in effect for it that ComputeFence cannot honour."""
        state = _Resolved()
        if user:
            state.options["user"] = ([user], None)
        if self.path.exists():
            self._apply(self.path, alias, state, 0, final_pass=False)
            if state.want_final_pass:
                # ssh reads the whole config again; `Match final` and `canonical` now hold.
                self._apply(self.path, alias, state, 0, final_pass=True)
        elif self.display != DEFAULT_SSH_CONFIG:
            raise ConfigError(f"{self.display}: no such ssh config file")
        return self._target(alias, state), unhonoured_options(state.unhonoured)

    def _apply(self, path: Path, alias: str, state: _Resolved, depth: int, *, final_pass: bool) -> None:
        for block in self._blocks(path).for_alias(alias):
            header = block.header
            if header is not None and header.keyword == "host":
                if not _pattern_list_matches(header.args, alias):
                    continue
                if state.host_line is None:
                    state.host_line = header
            elif header is not None and not self._match(header, alias, state, final_pass):
                continue
            for line in block.body:
                self._apply_line(line, alias, state, depth, final_pass=final_pass)

    def _apply_line(self, line: _Line, alias: str, state: _Resolved, depth: int, *, final_pass: bool) -> None:
        if line.keyword == "include":
            if depth >= MAX_INCLUDE_DEPTH:
                raise line.error(f"Include nested more than {MAX_INCLUDE_DEPTH} levels deep")
            for included in self._included(line):
                self._apply(included, alias, state, depth + 1, final_pass=final_pass)
        elif line.keyword in ("hostname", "port", "user", "userknownhostsfile", "proxyjump", "proxycommand"):
            if not line.args:
                raise line.error(f"missing value for {line.keyword}")
            key = "proxy" if line.keyword.startswith("proxy") else line.keyword
            if line.keyword == "proxycommand":
                # The command is the rest of the line, as written.
                line = _Line(line.path, line.number, line.keyword, [" ".join(line.args)])
            elif line.keyword == "proxyjump" and (line.args[0].lower() == "none" or "jump_none" in state.options):
                # As ssh: `ProxyJump none` ends ProxyJump lookups but leaves room for a ProxyCommand.
                state.options.setdefault("jump_none", (line.args, line))
                return
            state.options.setdefault(key, (line.args, line))
        elif line.keyword == "identityfile":
            if not line.args:
                raise line.error("missing value for IdentityFile")
            state.identity_files.append((line.args[0], line))
        elif line.keyword in _UNHONOURED_DEFAULTS and line.args:
            state.unhonoured.setdefault(line.keyword, [" ".join(line.args)])

    def _match(self, line: _Line, alias: str, state: _Resolved, final_pass: bool) -> bool:
        args = list(line.args)
        result = True
        while args:
            criterion = args.pop(0).lower()
            negate = criterion.startswith("!")
            criterion = criterion.lstrip("!")
            if criterion == "all":
                matched = True
            elif criterion in ("canonical", "final"):
                state.want_final_pass = state.want_final_pass or criterion == "final"
                matched = final_pass
            elif criterion in ("host", "originalhost", "user", "localuser"):
                if not args:
                    raise line.error(f"Match {criterion} needs a pattern")
                patterns = args.pop(0).split(",")
                value = {
                    "host": self._hostname(alias, state),
                    "originalhost": alias,
                    "user": self._option(state, "user", getpass.getuser()),
                    "localuser": getpass.getuser(),
                }[criterion]
                matched = _pattern_list_matches(patterns, value, fold_case=criterion in ("host", "originalhost"))
            else:
                # Criteria we do not evaluate (exec would run a command): the block does not apply.
                return False
            result = result and (matched != negate)
        return result

    @staticmethod
    def _option(state: _Resolved, key: str, default: str) -> str:
        return state.options[key][0][0] if key in state.options else default

    @staticmethod
    def _hostname(alias: str, state: _Resolved) -> str:
        """HostName with %h expanded (the only token it takes), as Match host and ssh see it."""
        if "hostname" not in state.options:
            return alias
        args, line = state.options["hostname"]
        where = f"{line.path}:{line.number}" if line else alias
        return expand_tokens(args[0], {"h": alias}, allow_env=False, where=where)

    def _target(self, alias: str, state: _Resolved) -> Target:
        hostname = self._hostname(alias, state).lower()
        port = 22
        if "port" in state.options:
            args, line = state.options["port"]
            found = _port(args[0])
            if found is None:
                message = f"bad Port value {args[0]!r}: expected 1 to 65535 or a service name"
                raise line.error(message) if line is not None else ConfigError(message)
            port = found
        user = self._option(state, "user", "") or None
        proxy_jump = proxy_command = None
        if "proxy" in state.options:
            args, line = state.options["proxy"]
            if args[0].lower() != "none":
                if line is not None and line.keyword == "proxycommand":
                    proxy_command = args[0]
                else:
                    proxy_jump = args[0]
        known_hosts: list[str] = []
        if "userknownhostsfile" in state.options:
            args, line = state.options["userknownhostsfile"]
            if args[0].lower() != "none":
                where = f"{line.path}:{line.number}" if line else alias
                known_hosts = [str(Path(expand_tokens(a, {}, allow_env=True, where=where)).expanduser()) for a in args]
        host_line = state.host_line
        return _ssh_target(
            alias,
            hostname,
            port,
            user,
            [(raw, f"{line.path}:{line.number}") for raw, line in state.identity_files],
            proxy_jump=proxy_jump,
            proxy_command=proxy_command,
            known_hosts=known_hosts,
            source=f"{host_line.path}:{host_line.number}" if host_line else self.display,
            ssh_config=str(self.path),
        )


def _ssh_target(
    alias: str,
    hostname: str,
    port: int,
    user: str | None,
    identities: list[tuple[str, str]],
    *,
    proxy_jump: str | None,
    proxy_command: str | None,
    known_hosts: list[str],
    source: str,
    ssh_config: str | None,
) -> Target:
    """The Target for `alias`, from the parser's or `ssh -G`'s values. `identities`: the
    IdentityFile values, each with where it was read, expanded once each, in order; as ssh,
    `none` names no file (and no ~/.ssh/id_* in its place)."""
    tokens = identity_tokens(alias, hostname, port, user or getpass.getuser())
    identity_files: list[str] = []
    for raw, where in identities:
        if raw.lower() == "none":
            continue
        path = str(Path(expand_tokens(raw, tokens, allow_env=True, where=where)).expanduser())
        if path not in identity_files:
            identity_files.append(path)
    return Target(
        name=alias,
        host=hostname,
        port=port,
        user=user,
        identity_files=identity_files,
        default_identities=not any(raw.lower() == "none" for raw, _ in identities),
        proxy_jump=proxy_jump,
        proxy_command=proxy_command,
        known_hosts=known_hosts,
        source=source,
        ssh_config=ssh_config,
    )


# ---------------------------------------------------------------- ssh -G


def unhonoured_options(values: dict[str, list[str]]) -> list[str]:
    """`Keyword value` for each option in `values` (ssh -G's or the parser's) that ComputeFence
    cannot honour and that is not at ssh's default."""
    return [
        f"{key} {found[0]}"
        for key, defaults in _UNHONOURED_DEFAULTS.items()
        if (found := values.get(key)) and found[0].lower() not in defaults
    ]


def unhonoured_warnings(source: str, found: dict[str, list[str]]) -> list[str]:
    """One line per option that cannot be honoured, naming the hosts it applies to."""
    warnings = []
    for option, hosts in found.items():
        more = f" and {len(hosts) - _WARNINGS_SHOWN} more" if len(hosts) > _WARNINGS_SHOWN else ""
        warnings.append(
            f"{source}: host {', '.join(hosts[:_WARNINGS_SHOWN])}{more}: {option} cannot be honoured; "
            "ComputeFence connects without it"
        )
    return warnings


def parse_ssh_g(text: str) -> dict[str, list[str]]:
    """`ssh -G` output: one `keyword value` a line; repeated keywords (identityfile) collected."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key:
            values.setdefault(key.lower(), []).append(value)
    return values


def target_from_ssh_g(alias: str, values: dict[str, list[str]], *, source: str, ssh_config: str | None) -> Target:
    """A Target from what `ssh -G` printed for `alias`."""

    def first(key: str) -> str | None:
        found = values.get(key)
        return found[0] if found and found[0].lower() != "none" else None

    hostname = first("hostname") or alias
    port = int(first("port") or 22)
    user = first("user") or getpass.getuser()
    raw_identities = values.get("identityfile", [])
    # ssh's default keys are left to the connector.
    identities = (
        [] if raw_identities == DEFAULT_IDENTITY_FILES else [(raw, f"ssh -G {alias}") for raw in raw_identities]
    )
    home = _password_home()
    default_known = [str(home / ".ssh/known_hosts"), str(home / ".ssh/known_hosts2")]
    known = (first("userknownhostsfile") or "").split()
    return _ssh_target(
        alias,
        hostname,
        port,
        user,
        identities,
        proxy_jump=first("proxyjump"),
        proxy_command=first("proxycommand"),
        known_hosts=[] if known == default_known else known,
        source=source,
        ssh_config=ssh_config,
    )


def ssh_g(alias: str, *, config: Path | None = None, options: list[str] | tuple[str, ...] = ()) -> dict[str, list[str]]:
    """What `ssh -G [-F config] [options] -- alias` prints; options such as `-l user` or
    `-o Port=2222` come first on ssh's command line, so they beat the config."""
    command = ["ssh", "-G"]
    if config is not None:
        command += ["-F", str(config)]
    command += [*options, "--", alias]
    try:
        returncode, stdout, stderr = run_tool(command, SSH_G_TIMEOUT_S, SSH_G_MAX_BYTES)
    except OSError as exc:
        raise ConfigError(f"ssh -G {alias}: cannot run ssh: {exc.strerror or exc}") from None
    except ToolOverflow:
        raise ConfigError(f"ssh -G {alias}: printed over {SSH_G_MAX_BYTES:,} bytes; no ssh answers so much") from None
    except ToolTimeout:
        raise ConfigError(
            f"ssh -G {alias}: no answer within {SSH_G_TIMEOUT_S:g} s (a Match exec that hangs?)"
        ) from None
    if returncode != 0:
        lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        # ssh names the bad line first ("FILE line 2: Bad port 'x'."), then "terminating".
        why = _SSH_LINE_RE.sub(r"\1:\2:", lines[0]) if lines else f"exit status {returncode}"
        raise ConfigError(f"{why} (ssh -G {alias})")
    return parse_ssh_g(stdout.decode("utf-8", "replace"))


def ssh_available() -> bool:
    return shutil.which("ssh") is not None


class SshConfigSource:
    """`-H ALIAS` (repeatable; a pattern selects the config's Host entries) and/or `--ssh-config FILE`.

    With a file and no -H, every concrete Host entry of the file is a target. `resolver`
    names what resolved the aliases: `ssh -G` where an ssh binary exists, else the parser.
    """

    def __init__(
        self, hosts: list[str] | tuple[str, ...] = (), config: str | None = None, *, use_ssh: bool | None = None
    ):
        self.hosts = list(hosts)
        self.explicit_config = config is not None
        self.config = SshConfig(config or DEFAULT_SSH_CONFIG)
        self.name = f"ssh_config {self.config.display}"
        self.use_ssh = ssh_available() if use_ssh is None else use_ssh
        self.resolver = RESOLVER_SSH if self.use_ssh else RESOLVER_PARSER
        self.warnings: list[str] = []
        self._resolved: dict[tuple[str, str | None], Target] = {}

    def _aliases(self) -> list[tuple[str, str | None]]:
        config = self.config
        specs = self.hosts
        if not specs:
            entries = config.host_entries()
            if not entries:
                raise ConfigError(f"{config.display}: no Host entries without wildcards to check")
            for alias, line in entries:
                if alias.startswith("-"):
                    raise line.error(f"Host {alias!r} starts with '-', which ssh would read as an option")
            specs = [alias for alias, _ in entries]
        wanted: dict[str, str | None] = {}
        for spec in specs:
            user, _, alias = spec.rpartition("@")
            if not alias:
                raise ConfigError(f"-H {spec!r}: empty host alias")
            if alias.startswith("-") or user.startswith("-"):
                raise ConfigError(f"-H {spec!r}: starts with '-', which ssh would read as an option")
            if _is_wildcard(alias):
                entries = config.host_entries() if config.path.exists() else []
                aliases = [a for a, _ in entries if _pattern_matches(alias, a)]
                if not aliases:
                    known = ", ".join(a for a, _ in entries) or "none"
                    raise ConfigError(f"-H {spec!r}: no Host entry in {config.display} matches (Host entries: {known})")
            else:
                aliases = [alias]
            for name in aliases:
                wanted.setdefault(name, user or None)
        return list(wanted.items())

    def _ssh_config_arg(self) -> Path | None:
        """The -F for ssh -G: none for the user's own config, so ssh also reads /etc/ssh/ssh_config
        as it would; a $HOME other than the password database's names its config explicitly."""
        path = self.config.path
        if self.explicit_config:
            if not path.exists():
                raise ConfigError(f"{self.config.display}: no such ssh config file")
            return path
        if path.exists() and path != _password_home() / ".ssh/config":
            return path
        return None

    def _resolve_with_ssh(self, pending: list[tuple[str, str | None]]) -> list[tuple[Target, list[str]]]:
        config = self._ssh_config_arg()
        entries = dict(self.config.host_entries()) if self.config.path.exists() else {}

        def one(item: tuple[str, str | None]) -> tuple[Target, list[str]]:
            alias, user = item
            where = entries.get(alias)
            source = f"{where.path}:{where.number}" if where else self.config.display
            values = ssh_g(alias, config=config, options=["-l", user] if user else [])
            target = target_from_ssh_g(alias, values, source=source, ssh_config=str(self.config.path))
            return target, unhonoured_options(values)

        with ThreadPoolExecutor(max_workers=min(SSH_G_WORKERS, max(1, len(pending)))) as pool:
            return list(pool.map(one, pending))

    def targets(self) -> list[Target]:
        wanted = self._aliases()
        pending = [item for item in wanted if item not in self._resolved]
        if pending:
            if self.use_ssh:
                found = self._resolve_with_ssh(pending)
            else:
                found = [self.config.resolve_with_options(alias, user=user) for alias, user in pending]
            unhonoured: dict[str, list[str]] = {}
            for (alias, _), (target, options) in zip(pending, found):
                self._resolved[(alias, _)] = target
                for option in options:
                    unhonoured.setdefault(option, []).append(alias)
            self.warnings += unhonoured_warnings(self.config.display, unhonoured)
        return [self._resolved[item] for item in wanted]
