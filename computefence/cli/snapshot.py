"""`computefence fleet snapshot`: record the environment of pods that worked as a baseline lock."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from computefence import evaluate, run
from computefence.cli.app import EXIT_INTERRUPTED
from computefence.cli.connection import connection_options, prepare_connections
from computefence.cli.fleet import fleet_app
from computefence.cli.policy_options import NoPolicyOpt, PolicyOpt, write_lock
from computefence.cli.progress import note, progress_lines
from computefence.cli.targets import own_pods_connector, target_options
from computefence.connectors.registry import ConnectSettings
from computefence.evaluate.checks.environment import build_lock, differing_lines
from computefence.interrupt import say_interrupted
from computefence.models import HostStatus
from computefence.policy import resolve_policy
from computefence.session import open_session
from computefence.sources import TargetSelection


@fleet_app.command("snapshot", no_args_is_help=False)
@target_options
@connection_options(concurrency_help="Pods probed at once.", timeout_help="Deadline per pod, connecting included.")
def snapshot(
    output: Path = typer.Option(
        ..., "--output", "-o", metavar="FILE", help="Where to write the lock, e.g. computefence.lock.json."
    ),
    from_pod: str | None = typer.Option(
        None, "--from", metavar="POD", help="Take this pod's values as the baseline (default: each field's majority)."
    ),
    selection: TargetSelection = TargetSelection(),
    connection: ConnectSettings = ConnectSettings(),
    demo: bool = typer.Option(False, "--demo", help="Snapshot the simulated demo fleet."),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
) -> int:
    """Record the pods' environment as a baseline lock for `fleet check --baseline`.

    The lock holds torch and its CUDA build, cuDNN, NCCL, the driver, Python, glibc, OS,
    kernel, GPUs and packages (the fixed list plus the policy's). Where pods disagree, the lock keeps the majority value and the pods that differ are printed.
    """
    loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
    prepare_connections(connection)
    with open_session(
        selection,
        run.Rules(policy=loaded),
        connection,
        connector=own_pods_connector("demo", "--demo", selection) if demo else None,
        verb="snapshot",
        progress=progress_lines(),
        sigint=True,
        note=note,
    ) as session:
        hosts = session.probe()
    if session.interrupted:
        say_interrupted("computefence: interrupted; no baseline written")
        return EXIT_INTERRUPTED
    for host in hosts:
        if host.status is not HostStatus.OK:
            print(f"computefence: {host.name} left out ({host.status.value}: {host.reason})", file=sys.stderr)
    lock = build_lock(hosts, from_pod)
    for line in differing_lines(lock):
        print(f"computefence: {line}", file=sys.stderr)
    write_lock(lock, output)
    return 0
