"""Run the probe on many pods over SSH at once (asyncssh), one connection per pod.

Every pod ends in exactly one HostStatus with a one-line reason; nothing that happens on
one pod reaches another. The probe travels on stdin to a fixed command line: no target
data is ever spliced into a shell command, its parameters ride inside the payload.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import getpass
import os
import random
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.connectors.asyncssh_quiet import asyncssh
from computefence.connectors.interface import (
    HANDSHAKE,
    REVOKED_DETAIL,
    Outcome,
    check_targets,
    host_report,
    read_capped,
)
from computefence.connectors.known_hosts import (
    HostKeyLookup,
    HostKeyStore,
    host_pattern,
    own_known_hosts_path,
    user_known_hosts_path,
)
from computefence.connectors.payload import MAX_OUTPUT_BYTES, parse_probe_output
from computefence.connectors.shell import Shell, SshShell
from computefence.errors import ConfigError, ProbeOutputError
from computefence.models import HostReport, HostStatus, Target
from computefence.probe.assemble import BOOTSTRAP, probe_wire
from computefence.probe.core import DEFAULT_TIMEOUTS
from computefence.sources.ssh_config import expand_tokens, identity_tokens
from computefence.text import one_line

INSECURE_WARNING = (
    "computefence: WARNING: host key verification is OFF (--insecure-no-host-key-check). "
    "Anyone between you and the pods can impersonate them and read or forge what they report."
)

MAX_STDERR_BYTES = 64 * 1024
_STDERR_FLOOD = f"the interpreter printed more than {MAX_STDERR_BYTES // 1024} KiB on stderr; that is not the probe"
_NO_PYTHON = "neither python3 nor python is on the PATH of the login shell"
# Exit statuses of GNU/busybox `timeout` when it had to stop the probe.
_TIMEOUT_EXITS = (124, 137)


def probe_command(limit_s: int) -> str:
    """The fixed command that runs the probe (probe_wire, on stdin) under BOOTSTRAP, killed on
    the pod after `limit_s`.

    Prefers python3 and falls back to python; -B keeps the interpreter from writing
    bytecode caches on the pod. Only the integer limit is formatted in.
    """
    limit = int(limit_s)
    run = f"-B -c '{BOOTSTRAP}'"
    return (
        f"if timeout -k 2 {limit} true >/dev/null 2>&1; then t='timeout -k 2 {limit}'; else t=; fi; "
        f"if command -v python3 >/dev/null 2>&1; then exec $t python3 {run}; fi; "
        f"if command -v python >/dev/null 2>&1; then exec $t python {run}; fi; "
        f"echo '{_NO_PYTHON}' >&2; exit 127"
    )


# What may reach a ProxyCommand through %h, %r or %n: ssh (since 9.6) refuses shell metacharacters there too.
_SAFE_TOKEN_RE = re.compile(r"^[A-Za-z0-9._:@%\[\]-]*$")


def proxy_command_argv(target: Target) -> list[str]:
    """The target's ProxyCommand as ssh runs it: tokens expanded, then `exec`ed by the user's shell.

    ValueError when the host, user or name would put shell syntax into the command.
    """
    user = target.user or getpass.getuser()
    for what, value in (("host", target.host), ("user", user), ("name", target.name)):
        if not _SAFE_TOKEN_RE.match(value):
            raise ValueError(f"the {what} {value!r} has characters a ProxyCommand must not receive; not connecting")
    tokens = identity_tokens(target.name, target.host, target.port, user)
    command = expand_tokens(target.proxy_command or "", tokens, allow_env=False, where=f"ProxyCommand of {target.name}")
    return [os.environ.get("SHELL") or "/bin/sh", "-c", f"exec {command}"]


_BRACKETED_RE = re.compile(r"^\[([^\]]+)\](?::(\d+))?$")


def tunnel_spec(proxy_jump: str) -> str:
    """A ProxyJump value (`ssh://u@h:p`, `u@[v6]:p`, comma-separated hops) in the
    `user@host:port,...` form asyncssh parses, which knows neither URIs nor brackets."""
    hops = []
    for hop in proxy_jump.split(","):
        hop = hop.strip().removeprefix("ssh://")
        user, at, address = hop.rpartition("@")
        bracketed = _BRACKETED_RE.match(address)
        if bracketed:
            host, port = bracketed.group(1), bracketed.group(2)
        elif address.count(":") == 1:
            host, _, port = address.partition(":")
        else:
            host, port = address, None
        if port is None and ":" in host:
            port = "22"  # asyncssh splits the last colon off as the port
        hops.append(f"{user + '@' if at else ''}{host}{':' + port if port else ''}")
    return ",".join(hops)


@dataclass
class RunOptions:
    concurrency: int = 256
    # Covers TCP connect, SSH handshake and authentication (a port that never speaks SSH).
    connect_timeout: float = 10.0
    # Everything for one pod, from its connection attempt to its parsed answer.
    deadline: float = 60.0
    keepalive_interval: float = 5.0
    keepalive_count_max: int = 3
    # Extra known_hosts files (--known-hosts), searched besides the user's and ComputeFence's own.
    known_hosts: list[str] = field(default_factory=list)
    use_user_known_hosts: bool = True
    # ComputeFence's own known-hosts file; None: own_known_hosts_path() at run time.
    own_known_hosts: Path | None = None
    accept_new: bool = False
    insecure_no_host_key_check: bool = False
    # Seconds before the one retry of a transient connect failure (jittered up to 2x).
    retry_backoff: float = 1.0
    # Extra probe parameters (e.g. per-collector "timeouts"), added to every pod's.
    probe_params: dict[str, Any] = field(default_factory=dict)
    # Which probe to send (probe/assemble.PROBES): "check" (fleet check) or "watch" (fleet watch).
    probe: str = "check"


class _HostKeyCheck:
    """Decides about a key that no known_hosts entry vouches for, and remembers why."""

    def __init__(self, target: Target, lookup: HostKeyLookup, store: HostKeyStore, accept_new: bool):
        self.target, self.lookup, self.store, self.accept_new = target, lookup, store, accept_new
        self.presented: asyncssh.SSHKey | None = None
        self.record_error: str | None = None

    def unlisted_key(self, key: asyncssh.SSHKey) -> bool:
        self.presented = key
        if self.lookup.known or not self.accept_new:
            return False
        try:
            self.store.record(self.target.host, self.target.port, key)
        except ConfigError as exc:
            self.record_error = str(exc)
            return False
        return True


class _Client(asyncssh.SSHClient):
    def __init__(self, check: _HostKeyCheck | None, *, agent_only: bool = False):
        self._check = check
        self._agent_only = agent_only
        self._agent: asyncssh.SSHAgentClient | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._check is not None and self._check.unlisted_key(key)

    async def public_key_auth_requested(self) -> list[asyncssh.SSHKeyPair] | None:
        # `IdentityFile none` and no other file: ssh offers the agent's keys and no ~/.ssh/id_*.
        # asyncssh cannot say that (an empty client_keys means its defaults), so the connection
        # gets client_keys=None and the agent's keys come from here, once.
        socket_path = os.environ.get("SSH_AUTH_SOCK")
        if not self._agent_only or self._agent is not None or not socket_path:
            return None
        self._agent = asyncssh.SSHAgentClient(socket_path)
        try:
            return list(await self._agent.get_keys())
        except (OSError, ValueError, asyncssh.Error):
            return None  # no agent answering: ssh goes on without its keys too

    def auth_completed(self) -> None:
        self._close_agent()

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_agent()

    def _close_agent(self) -> None:
        if self._agent is not None:
            self._agent.close()


class SshConnector:
    """The probe over asyncssh: one connection per target, at most options.concurrency at once."""

    def __init__(self, options: RunOptions):
        self.options = options
        self.semaphore = asyncio.Semaphore(max(1, options.concurrency))
        self.store: HostKeyStore | None = None
        if not options.insecure_no_host_key_check:
            files: list[str | Path] = list(options.known_hosts)
            if options.use_user_known_hosts:
                files.insert(0, str(user_known_hosts_path()))
            self.store = HostKeyStore(files, options.own_known_hosts or own_known_hosts_path())
        self._keys: dict[tuple[str, ...], list[Any]] = {}

    def read_known_hosts(self, targets: list[Target]) -> None:
        if self.store is not None:
            self.store.preload([path for target in targets for path in target.known_hosts])

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        async with self.semaphore:
            started = time.monotonic()
            outcome = await self._bounded(target, params, started)
            return host_report(target, outcome, time.monotonic() - started)

    async def _bounded(self, target: Target, params: dict[str, Any], started: float) -> Outcome:
        phase = ["connecting"]
        try:
            return await asyncio.wait_for(
                self._connect_and_probe(target, params, started, phase), self.options.deadline
            )
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            deadline = _seconds(self.options.deadline)
            if phase[0] == "connecting":
                return Outcome(HostStatus.TIMEOUT, f"no SSH session within the {deadline} deadline")
            return Outcome(HostStatus.TIMEOUT, f"the probe gave no answer within the {deadline} deadline")
        except Exception as exc:  # a bug here must cost this pod its result, not the whole fleet's
            return Outcome(HostStatus.PROBE_FAILED, f"internal error: {type(exc).__name__}: {_one_line(exc)}")

    async def _connect_and_probe(
        self, target: Target, params: dict[str, Any], started: float, phase: list[str]
    ) -> Outcome:
        conn = await self.open(target)
        if isinstance(conn, Outcome):
            return conn
        phase[0] = "probing"
        try:
            return await self._probe(conn, target, params, started)
        finally:
            conn.abort()
            await conn.wait_closed()

    async def open_shell(self, target: Target) -> Shell | Outcome:
        """A command session on the target (fix steps), over a connection opened as the probe's."""
        opened = await self.open(target)
        return opened if isinstance(opened, Outcome) else SshShell(opened)

    async def open(self, target: Target) -> asyncssh.SSHClientConnection | Outcome:
        """One connection to the target, with the keys, host-key checks, hops and timeouts the
        probe uses; or the Outcome saying why not. The caller closes the connection."""
        try:
            client_keys = self._client_keys(target)
        except (OSError, asyncssh.KeyImportError, ValueError) as exc:
            return Outcome(HostStatus.AUTH_FAILED, f"cannot load an identity file: {_one_line(exc)}")
        if target.proxy_command:
            try:
                proxy_command_argv(target)
            except ValueError as exc:
                return Outcome(HostStatus.UNREACHABLE, str(exc))
        check = None
        known_hosts: object = None
        lookup = HostKeyLookup()
        if self.store is not None:
            lookup = self.store.lookup(target.host, _address_of(target.host), target.port, target.known_hosts)
            check = _HostKeyCheck(target, lookup, self.store, self.options.accept_new)
            known_hosts = lookup.as_asyncssh()
        try:
            return await self._connect(target, client_keys, known_hosts, check)
        except Exception as exc:  # every connect failure becomes this pod's status
            outcome = _connect_failure(target, exc, lookup, check, self.options)
            if target.proxy_jump or target.proxy_command:
                # The hop fails in the same ways the pod does: say which way the connection went.
                hop = target.proxy_jump or f"ProxyCommand {target.proxy_command}"
                outcome.reason += f" (connecting through {hop})"
            return outcome

    async def _connect(
        self, target: Target, client_keys: list[Any] | None, known_hosts: object, check: _HostKeyCheck | None
    ) -> asyncssh.SSHClientConnection:
        options = self.options
        agent_only = not target.identity_files and not target.default_identities
        kwargs = dict(
            port=target.port,
            known_hosts=known_hosts,
            client_factory=lambda: _Client(check, agent_only=agent_only),
            connect_timeout=options.connect_timeout,
            keepalive_interval=options.keepalive_interval,
            keepalive_count_max=options.keepalive_count_max,
        )
        if target.user:
            kwargs["username"] = target.user
        if client_keys is not None or agent_only:
            kwargs["client_keys"] = client_keys
        if target.proxy_jump:
            kwargs["tunnel"] = tunnel_spec(target.proxy_jump)
        if target.proxy_command:
            kwargs["proxy_command"] = proxy_command_argv(target)
        if target.ssh_config:
            kwargs["config"] = [os.path.expanduser(target.ssh_config)]
            if not (target.proxy_jump or target.proxy_command):
                # ssh -G already said there is no hop; asyncssh must not find one for the HostName.
                kwargs.update(tunnel=None, proxy_command=None)
        if target.proxy_jump or target.proxy_command:
            # The target's own hop only: never one asyncssh finds in a config for the HostName.
            kwargs.setdefault("tunnel", None)
            kwargs.setdefault("proxy_command", None)
        if not _ciphers_configured(target.ssh_config):
            kwargs["encryption_algs"] = PREFERRED_CIPHERS
        try:
            return await asyncssh.connect(target.host, **kwargs)
        except Exception as exc:
            if not _transient(exc):
                raise
        # A default sshd drops connections past MaxStartups; a moment later it takes them.
        await asyncio.sleep(options.retry_backoff * (1 + random.random()))
        return await asyncssh.connect(target.host, **kwargs)

    def _client_keys(self, target: Target) -> list[Any] | None:
        if not target.identity_files:
            return None  # asyncssh's defaults (~/.ssh/id_* and the agent, as ssh), or the agent's alone
        paths = tuple(os.path.expanduser(p) for p in target.identity_files)
        if paths not in self._keys:
            self._keys[paths] = list(asyncssh.load_keypairs(list(paths)))
        return self._keys[paths]

    async def _probe(
        self, conn: asyncssh.SSHClientConnection, target: Target, params: dict[str, Any], started: float
    ) -> Outcome:
        remaining = self.options.deadline - (time.monotonic() - started)
        # Under the client's own deadline, so the pod reports the kill before we give up.
        limit = max(1, int(remaining - 0.5))
        # The probe answers before the pod-side kill; what it could not finish it reports as timed out.
        margin = min(5.0, max(1.0, remaining * 0.2))
        budget = max(0.5, remaining - margin)
        params = dict(params)
        if target.checks.perf:
            # The canary runs after the machine checks on its own budget (see fleet check --perf).
            perf_s = min(DEFAULT_TIMEOUTS["perf"], budget * 0.5)
            params["timeouts"] = {**params.get("timeouts", {}), "perf": round(perf_s, 1)}
            budget -= perf_s
        if target.checks.dataset:
            # The dataset scan runs after the machine checks on a budget of its own; both must
            # fit in the deadline, and a scan cut short still reports what it read.
            params["deadline_s"] = round(max(0.5, budget * 0.4), 1)
            params["timeouts"] = {**params.get("timeouts", {}), "dataset": round(max(0.5, budget * 0.6), 1)}
        else:
            params["deadline_s"] = round(budget, 1)
        payload = probe_wire(params, self.options.probe)
        try:
            proc = await conn.create_process(probe_command(limit), encoding=None)
            try:
                proc.stdin.write(payload)
                proc.stdin.write_eof()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the command already exited (no python); its status says why
            stdout_task = asyncio.ensure_future(read_capped(proc.stdout, MAX_OUTPUT_BYTES))
            stderr_task = asyncio.ensure_future(read_capped(proc.stderr, MAX_STDERR_BYTES))
            try:
                # Whichever stream overflows first ends the run; a flood on stderr with a
                # silent stdout must not keep the pod busy until the deadline.
                await asyncio.wait({stdout_task, stderr_task}, return_when=asyncio.FIRST_COMPLETED)
                if stderr_task.done() and stderr_task.result()[1]:
                    _stop_remote(proc)
                    return Outcome(HostStatus.PROBE_FAILED, _STDERR_FLOOD)
                stdout, overflow = await stdout_task
                if overflow:
                    # Closing the channel makes the pod's sshd close the interpreter's pipes.
                    proc.close()
                    return Outcome(
                        HostStatus.PROBE_FAILED,
                        f"the interpreter printed more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB; "
                        "that is not the probe's answer",
                    )
                stderr, stderr_overflow = await stderr_task
                if stderr_overflow:
                    _stop_remote(proc)
                    return Outcome(HostStatus.PROBE_FAILED, _STDERR_FLOOD)
            except asyncio.CancelledError:
                _stop_remote(proc)
                raise
            finally:
                stdout_task.cancel()
                stderr_task.cancel()
            completed = await proc.wait()
        except (asyncssh.DisconnectError, ConnectionError, BrokenPipeError) as exc:
            return Outcome(HostStatus.CONNECTION_LOST, f"the connection dropped while the probe ran: {_one_line(exc)}")
        except asyncssh.ChannelOpenError as exc:
            return Outcome(HostStatus.PROBE_FAILED, f"the pod refused a session channel: {_one_line(exc)}")
        return _judge_exit(completed.exit_status, completed.exit_signal, stdout, stderr, limit, self.options.probe)


def _judge_exit(
    exit_status: int | None,
    exit_signal: tuple[str, bool, str, str] | None,
    stdout: bytes,
    stderr: bytes,
    limit: int,
    probe: str = "check",
) -> Outcome:
    if exit_status is None and exit_signal is None:
        # asyncssh's way of saying the connection died before the command finished.
        return Outcome(HostStatus.CONNECTION_LOST, "the connection dropped while the probe ran (no exit status)")
    if exit_signal is not None:
        name = exit_signal[0] if isinstance(exit_signal, tuple) else exit_signal
        return Outcome(HostStatus.PROBE_FAILED, f"the probe was killed on the pod by signal {name}")
    if exit_status == 127:
        # Our own message, or the shell's if python3 was found but its interpreter was not.
        return Outcome(HostStatus.NO_PYTHON, _last_line(stderr) or _NO_PYTHON)
    if exit_status in _TIMEOUT_EXITS:
        return Outcome(HostStatus.TIMEOUT, f"the probe ran past its {limit} s limit and was killed on the pod")
    if exit_status != 0:
        line = _last_line(stderr)
        return Outcome(
            HostStatus.PROBE_FAILED, f"the interpreter exited with status {exit_status}" + (f": {line}" if line else "")
        )
    try:
        facts = parse_probe_output(stdout, probe)
    except ProbeOutputError as exc:
        return Outcome(HostStatus.PROBE_FAILED, str(exc))
    return Outcome(HostStatus.OK, "probe completed", facts=facts)


def _ca_only(where: str, files: str) -> str:
    return (
        f"{where} is trusted only through a @cert-authority in {files}, and it offered no host certificate signed by it"
    )


def _connect_failure(
    target: Target, exc: BaseException, lookup: HostKeyLookup, check: _HostKeyCheck | None, options: RunOptions
) -> Outcome:
    where = host_pattern(target.host, target.port)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable) or (isinstance(exc, asyncssh.KeyExchangeFailed) and lookup.known):
        presented = check.presented if check else None
        fingerprint = presented.get_fingerprint() if presented else None
        if "revoked" in str(getattr(exc, "reason", "")).lower():
            # Checked first: a host with only a @revoked entry is not a first contact.
            where_revoked = ", ".join(lookup.revoked_at) or "a known_hosts file"
            return Outcome(
                HostStatus.HOST_KEY_MISMATCH, f"the host key of {where} is revoked in {where_revoked}", REVOKED_DETAIL
            )
        if lookup.known:
            files = ", ".join(lookup.files)
            if lookup.ca_keys and not lookup.trusted:
                reason = _ca_only(where, files) + (f" ({presented.get_algorithm()} {fingerprint})" if presented else "")
            elif presented is None:
                reason = f"{where} no longer offers the host key type recorded in {files}"
            else:
                reason = f"the host key of {where} ({fingerprint}) differs from the one recorded in {files}"
            return Outcome(HostStatus.HOST_KEY_MISMATCH, reason, lookup.files[0] if lookup.files else None)
        if check is not None and check.record_error:
            return Outcome(HostStatus.HOST_KEY_UNKNOWN, check.record_error, fingerprint)
        reason = f"the host key of {where} is not in any known_hosts file"
        if presented is not None and fingerprint:
            reason += f" (it offers {presented.get_algorithm()} {fingerprint})"
        return Outcome(HostStatus.HOST_KEY_UNKNOWN, reason, fingerprint)
    if isinstance(exc, asyncssh.PermissionDenied):
        user = f"{target.user}@" if target.user else ""
        return Outcome(HostStatus.AUTH_FAILED, f"{user}{where} rejected every key offered ({_one_line(exc)})")
    if isinstance(exc, asyncio.TimeoutError):
        return Outcome(
            HostStatus.TIMEOUT,
            f"no SSH handshake with {where} within {_seconds(options.connect_timeout)} "
            "(the port accepts TCP but does not answer as SSH, or packets are dropped)",
        )
    if isinstance(exc, socket.gaierror):
        return Outcome(HostStatus.UNREACHABLE, f"cannot resolve {target.host}: {exc.strerror or exc}")
    if isinstance(exc, ConnectionRefusedError):
        return Outcome(HostStatus.UNREACHABLE, f"connection refused by {where} (no SSH server on that port)")
    if _transient(exc) and lookup.ca_keys and not lookup.trusted:
        # Only certificate host key types were offered; a pod without a host certificate hangs up.
        return Outcome(
            HostStatus.HOST_KEY_MISMATCH,
            _ca_only(where, ", ".join(lookup.files)),
            lookup.files[0] if lookup.files else None,
        )
    if _transient(exc):
        return Outcome(
            HostStatus.CONNECTION_LOST,
            f"{where} closed the connection during the SSH handshake, twice "
            f"(sshd MaxStartups or a firewall): {_one_line(exc)}",
            detail=HANDSHAKE,
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return Outcome(HostStatus.UNREACHABLE, f"no route to {where}: {exc.strerror}")
    if isinstance(exc, OSError):
        return Outcome(HostStatus.UNREACHABLE, f"cannot connect to {where}: {exc.strerror or _one_line(exc)}")
    if isinstance(exc, (asyncssh.KeyImportError, asyncssh.KeyEncryptionError)):
        return Outcome(HostStatus.AUTH_FAILED, f"cannot use an identity file: {_one_line(exc)}")
    if isinstance(exc, asyncssh.Error):
        return Outcome(HostStatus.UNREACHABLE, f"SSH with {where} failed: {_one_line(exc)}")
    return Outcome(HostStatus.UNREACHABLE, f"cannot connect to {where}: {type(exc).__name__}: {_one_line(exc)}")


# asyncssh's own list, AES-GCM first: its chacha20-poly1305 builds a cipher context for every
# packet, AES-GCM (hardware AES on current CPUs) costs a fraction of that. The server still
# decides among what it offers.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)
_CIPHERS_LINE = re.compile(r"^\s*ciphers\b", re.IGNORECASE | re.MULTILINE)


@functools.cache
def _ciphers_configured(ssh_config: str | None) -> bool:
    """A Ciphers line in the ssh_config asyncssh reads for this target: the user's choice wins."""
    path = Path(os.path.expanduser(ssh_config or "~/.ssh/config"))
    try:
        return bool(_CIPHERS_LINE.search(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, (asyncssh.ConnectionLost, ConnectionResetError, ConnectionAbortedError, BrokenPipeError))


def _stop_remote(proc: asyncssh.SSHClientProcess[bytes]) -> None:
    """The run was cancelled (Ctrl-C): stop the probe on the pod now, not at its deadline.
    TERM reaches `timeout`, which passes it to the probe's process group, and the probe kills
    its children's groups; closing the channel makes sshd close the probe's stdout, which the
    probe also watches (for an sshd that ignores signal requests)."""
    try:
        proc.send_signal("TERM")
    except (OSError, asyncssh.Error):
        pass
    proc.close()


def _last_line(raw: bytes) -> str | None:
    lines = [line.strip() for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return None
    return _one_line(lines[-1])


def _one_line(value: object, limit: int = 200) -> str:
    """An exception (asyncssh's carry a reason) or other value as one bounded line."""
    return one_line(str(getattr(value, "reason", None) or value) or type(value).__name__, limit)


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _address_of(host: str) -> str:
    # known_hosts may list the pod by address; asyncssh matches the peer address too, but our
    # lookup happens before connecting, so resolve numeric hosts only (no DNS on this path).
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        return host
    except OSError:
        return ""


async def probe_targets(
    targets: list[Target],
    options: RunOptions,
    on_progress: Callable[[HostReport], None] | None = None,
    stop: asyncio.Event | None = None,
) -> list[HostReport]:
    """Probe every target over SSH; one HostReport per target, in the targets' order.

    `on_progress` is called with each report as it completes. When `stop` is set (Ctrl-C),
    pods still in flight are cancelled, their connections closed, and reported as cancelled.
    """
    connector = SshConnector(options)
    # An unreadable known_hosts file is a configuration error for the whole run, found before connecting.
    connector.read_known_hosts(targets)
    return await check_targets(connector, targets, options.probe_params, on_progress, stop)
