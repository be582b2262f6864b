"""The connectors by name: one row each in CONNECTORS.

A row (a ConnectorKind) declares the class of its connector's own settings, opens a Session
(a context manager: the demo's simulated pods run while it is open) from the run's
ConnectSettings, and says which targets it reaches. The session makes the Connector for the
targets; a connector that brings its own pods (demo, replay) lists them. When a command names
no connector, `connector_for` takes the row that reaches the targets: the commands never name
one. Each row imports its module only when opened, so asyncssh loads only for a fleet run.

Adding a connector is one module (a Connector: `check` runs the probe, `open_shell` a command
session) and one row here, with its settings class; tests/connectors/test_contract.py then
runs it through the cases every connector answers alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from computefence.connectors.interface import Connector, ConnectorKind, ConnectSettings, Session
from computefence.errors import ConfigError
from computefence.models import SourceStatus, Target

__all__ = [
    "CONNECTORS",
    "ConnectSettings",
    "LocalSettings",
    "ReplaySettings",
    "Session",
    "SlurmSettings",
    "SshSettings",
    "connector_for",
    "open_connector",
    "reached_as",
]


def _ssh_address(target: Target) -> str:
    address = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.user + '@' if target.user else ''}{address}:{target.port}"


@dataclass(frozen=True)
class Row:
    settings: type
    opener: Callable[[ConnectSettings], AbstractContextManager[Session]]
    reaches_target: Callable[[Target], bool] = lambda target: False
    # How a target this row reaches is reached, as one would type it (`inventory list`).
    address: Callable[[Target], str] = _ssh_address

    def open(self, settings: ConnectSettings) -> AbstractContextManager[Session]:
        return self.opener(settings)

    def reaches(self, target: Target) -> bool:
        return self.reaches_target(target)


# ---------------------------------------------------------------- ssh (and the demo's pods)


@dataclass(frozen=True)
class SshSettings:
    """The host-key options of `fleet` commands (--known-hosts, --accept-new, --insecure-...)."""

    known_hosts: tuple[str, ...] = ()
    accept_new: bool = False
    insecure_no_host_key_check: bool = False


def _ssh_connector(settings: ConnectSettings, targets: list[Target]) -> Connector:
    from computefence.connectors.ssh import RunOptions, SshConnector
    from computefence.sources import check_before_connecting

    # A missing key, an unknown -H alias or an unreadable known_hosts file is a configuration
    # error for the whole run, found before connecting.
    check_before_connecting([t for t in targets if not t.unreachable_reason])
    own = settings.of(SshSettings)
    connector = SshConnector(
        RunOptions(
            concurrency=settings.concurrency,
            connect_timeout=settings.connect_timeout,
            deadline=settings.deadline,
            known_hosts=list(own.known_hosts),
            accept_new=own.accept_new,
            insecure_no_host_key_check=own.insecure_no_host_key_check,
            probe=settings.probe,
        )
    )
    connector.read_known_hosts(targets)
    return connector


@contextlib.contextmanager
def ssh(settings: ConnectSettings) -> Iterator[Session]:
    """The targets' pods over SSH (asyncssh)."""
    yield Session(connect=lambda targets: _ssh_connector(settings, targets))


def _has_ssh_endpoint(target: Target) -> bool:
    # Every source but Slurm gives an SSH endpoint (host, port, user).
    return bool(target.host) and not _is_slurm_node(target)


@contextlib.contextmanager
def demo(settings: ConnectSettings) -> Iterator[Session]:
    """A small simulated fleet on loopback, reached over SSH, for as long as the session is open;
    for the watch probe, pods running simulated training jobs."""
    from computefence.demo.fleet import DEMO_PODS, WATCH_PODS, demo_fleet

    with demo_fleet(WATCH_PODS if settings.probe == "watch" else DEMO_PODS) as fleet:
        yield Session(
            connect=lambda targets: _ssh_connector(settings, targets),
            targets=list(fleet.targets),
            sources=[SourceStatus(name="demo", targets=len(fleet.targets))],
            live=False,
        )


# ---------------------------------------------------------------- replay


@dataclass(frozen=True)
class ReplaySettings:
    """The folder of recordings to serve back (`--replay DIR`)."""

    recording: Path | None = None


@contextlib.contextmanager
def replay(settings: ConnectSettings) -> Iterator[Session]:
    """The pods and probe outputs recorded in the ReplaySettings' folder, served back."""
    from computefence.connectors.replay import ReplayConnector, load_recordings

    folder = settings.of(ReplaySettings).recording
    if folder is None:
        raise ConfigError("the replay connector needs a folder of recordings")
    recordings = load_recordings(folder)
    yield Session(
        connect=lambda targets: ReplayConnector(recordings),
        targets=[recording.target for recording in recordings],
        sources=[SourceStatus(name="replay", targets=len(recordings))],
        live=False,
    )


# ---------------------------------------------------------------- local


@dataclass(frozen=True)
class LocalSettings:
    """Nothing beyond the run's deadline: this machine needs no address or key."""


@contextlib.contextmanager
def local(settings: ConnectSettings) -> Iterator[Session]:
    """This machine, the probe run as a subprocess (`doctor`)."""
    from computefence.connectors.local import LocalConnector

    yield Session(connect=lambda targets: LocalConnector(settings.deadline), live=False)


# ---------------------------------------------------------------- slurm


@dataclass(frozen=True)
class SlurmSettings:
    """srun's --account, --qos and --partition (else srun reads SLURM_ACCOUNT, SLURM_QOS,
    SLURM_PARTITION), and its --immediate bound in seconds."""

    account: str | None = None
    qos: str | None = None
    partitions: tuple[str, ...] = ()
    immediate: int = 10


@contextlib.contextmanager
def slurm(settings: ConnectSettings) -> Iterator[Session]:
    """The targets' Slurm nodes, each probed in a job step of its own (srun)."""
    from computefence.connectors.slurm import SlurmConnector, SlurmOptions

    own = settings.of(SlurmSettings)
    options = SlurmOptions(
        concurrency=settings.concurrency,
        deadline=settings.deadline,
        immediate=own.immediate,
        account=own.account,
        qos=own.qos,
        partitions=own.partitions,
        probe=settings.probe,
    )
    if options.immediate >= options.deadline:
        raise ConfigError(f"--immediate {options.immediate} must be shorter than --timeout {options.deadline:g}")
    yield Session(connect=lambda targets: SlurmConnector(options), live=False)


def _is_slurm_node(target: Target) -> bool:
    return target.provider is not None and target.provider.provider == "slurm"


CONNECTORS: dict[str, ConnectorKind] = {
    "ssh": Row(SshSettings, ssh, _has_ssh_endpoint),
    "demo": Row(SshSettings, demo),
    "replay": Row(ReplaySettings, replay),
    "local": Row(LocalSettings, local),
    "slurm": Row(SlurmSettings, slurm, _is_slurm_node, lambda target: f"srun --nodelist={target.name}"),
}


def reached_as(target: Target) -> str:
    """How `target` is reached, in its connector's words: `user@host:port` over SSH, the
    `srun` step for a Slurm node."""
    row = next((kind for kind in CONNECTORS.values() if kind.reaches(target)), CONNECTORS["ssh"])
    return row.address(target)


def connector_for(targets: Sequence[Target]) -> str:
    """The connector that reaches `targets` when the command names none: the first row that
    reaches every one of them (with no targets, the first row: it contacts nothing).
    ConfigError when no row reaches a target, or the targets need different connectors. A
    target its source already found not checkable (a stopped pod, one with no SSH port) is
    reported as such by any connector, so it decides nothing."""
    targets = [target for target in targets if not target.unreachable_reason]
    for name, kind in CONNECTORS.items():
        if all(kind.reaches(target) for target in targets):
            return name
    needs: dict[str, list[str]] = {}
    for target in targets:
        reaching = next((n for n, kind in CONNECTORS.items() if kind.reaches(target)), None)
        if reaching is None:
            raise ConfigError(f"{target.name}: no connector reaches this target")
        needs.setdefault(reaching, []).append(target.name)
    kinds = ", ".join(f"{name} for {names[0]}" for name, names in needs.items())
    raise ConfigError(f"the targets need different connectors ({kinds}): check them in separate runs")


def open_connector(name: str, settings: ConnectSettings | None = None) -> AbstractContextManager[Session]:
    """The session of the connector named `name`; ConfigError for an unknown name."""
    try:
        kind = CONNECTORS[name]
    except KeyError:
        raise ConfigError(f"unknown connector {name!r}; choose one of: {', '.join(CONNECTORS)}") from None
    return kind.open(settings if settings is not None else ConnectSettings())
