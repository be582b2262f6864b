"""The connectors by name: one row each in CONNECTORS, name -> factory.

A factory takes the ConnectSettings and opens a Session (a context manager: the demo's
simulated pods run while it is open). The session makes the Connector for the targets, and
a connector that brings its own pods (demo, replay) lists them. A new connector is one
module and one row here. Each row imports its module only when opened, so asyncssh loads
only for a fleet run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from computefence.connectors.interface import Connector
from computefence.errors import ConfigError
from computefence.models import SourceStatus, Target


@dataclass(frozen=True)
class ConnectSettings:
    """What the connectors need from the command line; each takes the fields it uses."""

    # ssh (and the demo's pods, reached over SSH)
    concurrency: int = 256
    connect_timeout: float = 10.0
    # ssh: everything for one pod, connecting included; local: the probe process's bound.
    deadline: float = 60.0
    known_hosts: tuple[str, ...] = ()
    accept_new: bool = False
    insecure_no_host_key_check: bool = False
    # replay: the folder of recordings
    recording: Path | None = None
    # ssh: which probe to send (connectors.payload.PROBES): "check", or "watch" (fleet watch).
    probe: str = "check"
    # slurm: srun's --account, --qos and --partition (else srun reads SLURM_ACCOUNT, SLURM_QOS,
    # SLURM_PARTITION), and its --immediate bound in seconds.
    slurm_account: str | None = None
    slurm_qos: str | None = None
    slurm_partitions: tuple[str, ...] = ()
    slurm_immediate: int = 10


@dataclass
class Session:
    connect: Callable[[list[Target]], Connector]
    # The connector's own pods and their source (demo, replay); None: the caller's targets.
    targets: list[Target] | None = None
    sources: list[SourceStatus] = field(default_factory=list)
    # Real pods: a provider pod that failed to answer is worth re-listing (run.mark_vanished).
    live: bool = True


ConnectorFactory = Callable[[ConnectSettings], AbstractContextManager[Session]]


def _ssh_connector(settings: ConnectSettings, targets: list[Target]) -> Connector:
    from computefence.connectors.ssh import RunOptions, SshConnector
    from computefence.sources import check_before_connecting

    # A missing key, an unknown -H alias or an unreadable known_hosts file is a configuration
    # error for the whole run, found before connecting.
    check_before_connecting([t for t in targets if not t.unreachable_reason])
    connector = SshConnector(
        RunOptions(
            concurrency=settings.concurrency,
            connect_timeout=settings.connect_timeout,
            deadline=settings.deadline,
            known_hosts=list(settings.known_hosts),
            accept_new=settings.accept_new,
            insecure_no_host_key_check=settings.insecure_no_host_key_check,
            probe=settings.probe,
        )
    )
    connector.read_known_hosts(targets)
    return connector


@contextlib.contextmanager
def ssh(settings: ConnectSettings) -> Iterator[Session]:
    """The targets' pods over SSH (asyncssh)."""
    yield Session(connect=lambda targets: _ssh_connector(settings, targets))


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


@contextlib.contextmanager
def replay(settings: ConnectSettings) -> Iterator[Session]:
    """The pods and probe outputs recorded in settings.recording, served back."""
    from computefence.connectors.replay import ReplayConnector, load_recordings

    if settings.recording is None:
        raise ConfigError("the replay connector needs a folder of recordings")
    recordings = load_recordings(settings.recording)
    yield Session(
        connect=lambda targets: ReplayConnector(recordings),
        targets=[recording.target for recording in recordings],
        sources=[SourceStatus(name="replay", targets=len(recordings))],
        live=False,
    )


@contextlib.contextmanager
def local(settings: ConnectSettings) -> Iterator[Session]:
    """This machine, the probe run as a subprocess (`doctor`)."""
    from computefence.connectors.local import LocalConnector

    yield Session(connect=lambda targets: LocalConnector(settings.deadline), live=False)


@contextlib.contextmanager
def slurm(settings: ConnectSettings) -> Iterator[Session]:
    """The targets' Slurm nodes, each probed in a job step of its own (srun)."""
    from computefence.connectors.slurm import SlurmConnector, SlurmOptions

    options = SlurmOptions(
        concurrency=settings.concurrency,
        deadline=settings.deadline,
        immediate=settings.slurm_immediate,
        account=settings.slurm_account,
        qos=settings.slurm_qos,
        partitions=settings.slurm_partitions,
        probe=settings.probe,
    )
    if options.immediate >= options.deadline:
        raise ConfigError(f"--immediate {options.immediate} must be shorter than --timeout {options.deadline:g}")
    yield Session(connect=lambda targets: SlurmConnector(options), live=False)


CONNECTORS: dict[str, ConnectorFactory] = {
    "ssh": ssh,
    "demo": demo,
    "replay": replay,
    "local": local,
    "slurm": slurm,
}


def connector_for(targets: Sequence[Target]) -> str:
    """The connector that reaches `targets` when the command names none: Slurm nodes
    (provider "slurm") are reached through srun, every other source gives SSH endpoints."""
    slurm = {t.provider is not None and t.provider.provider == "slurm" for t in targets}
    if slurm == {True, False}:
        raise ConfigError("Slurm nodes are reached through srun, other targets over SSH: check them in separate runs")
    return "slurm" if slurm == {True} else "ssh"


def open_connector(name: str, settings: ConnectSettings | None = None) -> AbstractContextManager[Session]:
    """The session of the connector named `name`; ConfigError for an unknown name."""
    try:
        factory = CONNECTORS[name]
    except KeyError:
        raise ConfigError(f"unknown connector {name!r}; choose one of: {', '.join(CONNECTORS)}") from None
    return factory(settings if settings is not None else ConnectSettings())
