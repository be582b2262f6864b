"""Host keys: which ones are trusted for a pod, and ComputeFence's own known-hosts file.

Trusted keys come from OpenSSH known_hosts files (the user's, the inventory's, --known-hosts)
plus ComputeFence's own file, where `--accept-new` records keys seen on first contact.
A host with an entry in any of them is "known": a different key from it is a mismatch,
never a first contact, whatever the flags.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.connectors.asyncssh_quiet import asyncssh
from computefence.errors import ConfigError
from computefence.files import read_config_bytes


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "computefence"


def own_known_hosts_path() -> Path:
    """ComputeFence's own known-hosts file ($XDG_CONFIG_HOME/computefence/known_hosts)."""
    return config_dir() / "known_hosts"


def user_known_hosts_path() -> Path:
    return Path(os.path.expanduser("~/.ssh/known_hosts"))


def host_pattern(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def _missing(path: Path) -> bool:
    """No such file (a dangling symlink included): no entries, as for ssh. Any other failure
    (a symlink loop, no permission) is left to the reader, which makes it a ConfigError;
    os.path.exists would call those missing too."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def known_hosts_line(host: str, port: int, key: asyncssh.SSHKey) -> str:
    return f"{host_pattern(host, port)} {key.export_public_key('openssh').decode().strip()}\n"


@dataclass
class HostKeyLookup:
    """What the known-hosts files say about one host."""

    trusted: list[asyncssh.SSHKey] = field(default_factory=list)
    ca_keys: list[asyncssh.SSHKey] = field(default_factory=list)
    revoked: list[asyncssh.SSHKey] = field(default_factory=list)
    # FILE:LINE of each @revoked entry that names the host.
    revoked_at: list[str] = field(default_factory=list)
    # Files holding a key or CA for the host, in search order.
    files: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self.trusted or self.ca_keys)

    def as_asyncssh(self) -> tuple[list[Any], list[Any], list[Any]]:
        return self.trusted, self.ca_keys, self.revoked


class HostKeyStore:
    """Known-hosts files, read once, matched per host; records first-contact keys."""

    def __init__(self, files: list[str | Path], own_file: Path | None = None):
        self.own_file = own_file
        paths = [Path(os.path.expanduser(str(f))) for f in files]
        if own_file is not None:
            paths.append(own_file)
        self._paths: list[Path] = list(dict.fromkeys(paths))
        self._loaded: dict[Path, asyncssh.SSHKnownHosts | None] = {}
        self._recorded: set[str] = set()
        # Per file: the line of each @revoked key, by the key's "type base64".
        self._revoked_lines: dict[Path, dict[str, int]] = {}
        self._lock = threading.Lock()

    def preload(self, extra_files: Sequence[str] = ()) -> None:
        """Read every file now: an unreadable one raises ConfigError before anything connects."""
        for path in self._paths + [Path(os.path.expanduser(f)) for f in extra_files]:
            self._load(path)

    def lookup(self, host: str, addr: str, port: int, extra_files: Sequence[str] = ()) -> HostKeyLookup:
        result = HostKeyLookup()
        paths = self._paths + [Path(os.path.expanduser(f)) for f in extra_files]
        for path in dict.fromkeys(paths):
            entries = self._load(path)
            if entries is None:
                continue
            trusted, ca_keys, revoked = _match(entries, host, addr, port)
            result.revoked.extend(revoked)
            lines = self._revoked_lines.get(path, {})
            result.revoked_at += [f"{path}:{lines[_key_text(key)]}" for key in revoked if _key_text(key) in lines]
            if trusted or ca_keys:
                result.trusted.extend(trusted)
                result.ca_keys.extend(ca_keys)
                result.files.append(str(path))
        return result

    def record(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        """Append a first-contact key to ComputeFence's own file (0600, in a 0700 directory)."""
        if self.own_file is None:
            raise ConfigError("no known-hosts file to record accepted host keys in")
        line = known_hosts_line(host, port, key)
        with self._lock:
            if line in self._recorded:
                return
            try:
                self.own_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.own_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write(line)
            except OSError as exc:
                raise ConfigError(
                    f"cannot record the host key of {host_pattern(host, port)} in {self.own_file}: {exc.strerror}"
                ) from None
            self._recorded.add(line)
            # The next lookup must see the new key.
            self._loaded.pop(self.own_file, None)

    def _load(self, path: Path) -> asyncssh.SSHKnownHosts | None:
        with self._lock:
            if path in self._loaded:
                return self._loaded[path]
            if _missing(path):
                entries = None
            else:
                # A FIFO or /dev/zero named as known_hosts is refused, not read forever.
                text = read_config_bytes(path, "known-hosts file").decode("utf-8", "replace")
                entries = asyncssh.SSHKnownHosts()
                # Like OpenSSH, skip lines that do not parse (a key type asyncssh lacks, a typo)
                # instead of failing every host.
                revoked_lines: dict[str, int] = {}
                for number, line in enumerate(text.splitlines(), 1):
                    try:
                        entries.load(line)
                    except (ValueError, asyncssh.KeyImportError):
                        continue
                    words = line.split()
                    if len(words) >= 4 and words[0] == "@revoked":
                        revoked_lines.setdefault(" ".join(words[2:4]), number)
                self._revoked_lines[path] = revoked_lines
            self._loaded[path] = entries
            return entries


def _key_text(key: asyncssh.SSHKey) -> str:
    return " ".join(key.export_public_key("openssh").decode().split()[:2])


def _match(entries: asyncssh.SSHKnownHosts, host: str, addr: str, port: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Keys for host/addr, as OpenSSH matches: off port 22 only `[host]:port` entries count.

    asyncssh's own match() falls back to the bare host when the port has no entry, which on
    providers that put many pods behind one address (one port each) would hold every pod to
    the key of whatever answers on port 22.
    """
    if port == 22:
        matched = entries.match(host, addr, None)
        return list(matched[0]), list(matched[1]), list(matched[2])
    trusted: list[Any] = []
    ca_keys: list[Any] = []
    revoked: list[Any] = []
    for name in dict.fromkeys(n for n in (host, addr) if n):
        found = entries.match(f"[{name}]:{port}", "", None)
        trusted += found[0]
        ca_keys += found[1]
        revoked += found[2]
    return trusted, ca_keys, revoked
