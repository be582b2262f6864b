"""The SSH connection options, shared by every command that contacts pods.

A command takes one `connection: ConnectSettings` parameter and is decorated with
`connection_options(...)` (its defaults), which declares --concurrency, --connect-timeout,
--timeout and the host-key options in its place, refuses contradictory host-key flags before
any pod is contacted, and calls the command with the settings their values make:

    @fleet_app.command("check")
    @target_options
    @connection_options(timeout_help="Deadline per pod, connecting included.")
    def check(selection: TargetSelection, connection: ConnectSettings, ...):
        prepare_connections(connection)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from computefence.cli.option_groups import option, option_group
from computefence.connectors.registry import ConnectSettings, SshSettings
from computefence.errors import ConfigError

_PANEL = "Running"
_KEYS = "Host keys"


def connection_options(
    *,
    concurrency: int = 256,
    concurrency_help: str = "Pods checked at once.",
    timeout: float = 60.0,
    timeout_min: float = 1.0,
    timeout_help: str = "Deadline per pod, connecting included; the probe is killed on the pod past it.",
    envvars: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`envvars`: COMPUTEFENCE_CONCURRENCY and COMPUTEFENCE_TIMEOUT apply (not to `fleet fix`,
    whose steps install packages: a check's concurrency is no measure for them)."""
    options = [
        option(
            "--concurrency",
            int,
            concurrency,
            min=1,
            metavar="N",
            envvar="COMPUTEFENCE_CONCURRENCY" if envvars else None,
            help=concurrency_help,
            rich_help_panel=_PANEL,
        ),
        option(
            "--connect-timeout",
            float,
            10.0,
            min=0.1,
            metavar="SECONDS",
            help="Time to connect, handshake and log in.",
            rich_help_panel=_PANEL,
        ),
        option(
            "--timeout",
            float,
            timeout,
            min=timeout_min,
            metavar="SECONDS",
            envvar="COMPUTEFENCE_TIMEOUT" if envvars else None,
            help=timeout_help,
            rich_help_panel=_PANEL,
        ),
        option(
            "--accept-new",
            bool,
            False,
            help="Trust the host key of a pod seen for the first time (recorded in "
            "ComputeFence's own known_hosts); a changed key is still refused.",
            rich_help_panel=_KEYS,
        ),
        option(
            "--insecure-no-host-key-check",
            bool,
            False,
            help="Do not verify host keys at all (unsafe).",
            rich_help_panel=_KEYS,
        ),
        option(
            "--known-hosts",
            list[Path],
            [],
            metavar="FILE",
            envvar="COMPUTEFENCE_KNOWN_HOSTS",
            help="Another known_hosts file to trust (repeatable).",
            rich_help_panel=_KEYS,
        ),
    ]
    return option_group("connection", options, _settings)


def _settings(values: dict[str, Any]) -> ConnectSettings:
    accept_new, insecure, known_hosts = (
        values["accept_new"],
        values["insecure_no_host_key_check"],
        values["known_hosts"],
    )
    if accept_new and insecure:
        raise ConfigError("--accept-new and --insecure-no-host-key-check exclude each other")
    for path in known_hosts:
        if not path.is_file():
            raise ConfigError(f"--known-hosts {path}: no such file")
    return ConnectSettings(
        concurrency=values["concurrency"],
        connect_timeout=values["connect_timeout"],
        deadline=values["timeout"],
        own=(
            SshSettings(
                known_hosts=tuple(str(p) for p in known_hosts),
                accept_new=accept_new,
                insecure_no_host_key_check=insecure,
            ),
        ),
    )


def prepare_connections(settings: ConnectSettings) -> None:
    """Once every option is accepted: the unsafe-mode warning, and room for a socket per pod."""
    if settings.of(SshSettings).insecure_no_host_key_check:
        # asyncssh loads only when pods are contacted, not for every other command.
        from computefence.connectors.ssh import INSECURE_WARNING

        print(INSECURE_WARNING, file=sys.stderr)
    ensure_open_files(settings.concurrency)


def ensure_open_files(concurrency: int) -> None:
    """Each pod in flight holds a socket: lift the soft open-files limit (256 on macOS) toward the hard one."""
    try:
        import resource
    except ImportError:  # Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = concurrency + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
        )
