"""`computefence doctor`: check the machine this runs on."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import typer
from rich.console import Console

from computefence import evaluate
from computefence.cli.app import app
from computefence.cli.output import QUIET_HELP, FailOn, OutputFormat, emit
from computefence.cli.policy import (
    BaselineOpt,
    NoPolicyOpt,
    PolicyOpt,
    applied,
    custom_ids,
    merge_checks,
    probe_extra,
    resolve_baseline,
    write_lock,
)
from computefence.connectors.local import LocalConnector
from computefence.connectors.payload import probe_params
from computefence.errors import ConfigError, ProbeOutputError
from computefence.evaluate.environment import build_lock
from computefence.models import CheckOptions, HostStatus, Target
from computefence.policy import resolve_policy
from computefence.probe.core import DEFAULT_TIMEOUTS

# Time the probe process gets beyond its own deadline to print its answer.
_GRACE_S = 10.0


@app.command(no_args_is_help=False)
def doctor(
    output_dir: str | None = typer.Option(
        None,
        "--output-dir",
        metavar="PATH",
        help="Where the job writes checkpoints (relative paths resolve from here, as the job's would).",
    ),
    python: str = typer.Option(
        "python3", "--python", metavar="PATH", help="The training interpreter; torch is checked in it."
    ),
    accelerate_config: str | None = typer.Option(
        None,
        "--accelerate-config",
        metavar="PATH",
        help="accelerate config file (default: accelerate's own search order).",
    ),
    dataset: str | None = typer.Option(
        None, "--dataset", metavar="PATH", help="Training data to scan (jsonl, json, csv, tsv, parquet)."
    ),
    input_column: str | None = typer.Option(
        None, "--input-column", metavar="NAME", help="Dataset column with the model input."
    ),
    label_column: str | None = typer.Option(
        None, "--label-column", metavar="NAME", help="Dataset column with the label."
    ),
    expect_gpu: bool = typer.Option(False, "--expect-gpu", help="A machine without a usable GPU is a blocker."),
    perf: bool = typer.Option(
        False,
        "--perf",
        help="Also measure the GPUs: matmul TFLOPS, PCIe copies, NCCL all-reduce "
        "(up to 20 s of load; skipped on GPUs other processes use).",
    ),
    fmt: OutputFormat = typer.Option("rich", "--format", "-f", envvar="COMPUTEFENCE_FORMAT", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the report here (atomically) instead of stdout."
    ),
    fail_on: FailOn = typer.Option(
        FailOn.block, "--fail-on", envvar="COMPUTEFENCE_FAIL_ON", help="Exit 1 on blockers only, or on warnings too."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", help="Leave out this check (repeatable)."),
    only: list[str] = typer.Option([], "--only", metavar="ID", help="Run only this check (repeatable)."),
    timeout: float = typer.Option(
        30.0,
        "--timeout",
        min=1.0,
        metavar="SECONDS",
        envvar="COMPUTEFENCE_TIMEOUT",
        help="Deadline for the probe (most of it is the torch import).",
    ),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
    baseline: BaselineOpt = None,
    snapshot: Path | None = typer.Option(
        None,
        "--snapshot",
        metavar="FILE",
        help="Also record this machine's environment as a baseline lock (see `fleet snapshot`).",
    ),
) -> int:
    """Check this machine: storage that vanishes, CPU fallbacks, broken drivers, launch configs.

    Exit status: 0 no blockers, 1 blockers (or warnings with --fail-on warn), 2 usage error.
    Use it as a gate: `computefence doctor --output-dir /workspace/ckpt && python train.py`.
    """
    # Checked before the probe runs: a typo in --only or the policy should not cost a 30 s probe first.
    loaded = resolve_policy(policy, no_policy)
    lock, lock_file = resolve_baseline(baseline, loaded)
    evaluate.select_findings([], only=only, skip=skip, extra_checks=custom_ids(loaded))
    # `--output-dir "$CKPT"` with CKPT unset must not silently skip the check it asked for.
    for flag, value in (
        ("--output-dir", output_dir),
        ("--python", python),
        ("--accelerate-config", accelerate_config),
        ("--dataset", dataset),
    ):
        if value is not None and not value.strip():
            raise ConfigError(f"{flag} is empty; give a path")
    checks = CheckOptions(
        output_dir=output_dir,
        accelerate_config=accelerate_config,
        dataset=dataset,
        input_column=input_column,
        label_column=label_column,
        expect_gpu=expect_gpu,
        perf=perf,
    )
    name = socket.gethostname()
    effective = loaded.policy.for_target(name, []) if loaded is not None else None
    if effective is not None:
        checks = merge_checks(checks, effective)
    params = probe_params(checks, python=python, deadline_s=timeout, **(probe_extra(effective) if effective else {}))
    connector = LocalConnector(
        timeout
        + _GRACE_S
        + (DEFAULT_TIMEOUTS["dataset"] if dataset else 0.0)
        + (DEFAULT_TIMEOUTS["perf"] if perf else 0.0)
    )
    target = Target(name=name or "localhost", host="localhost", python=python, checks=checks)

    status_console = Console(stderr=True)
    if status_console.is_terminal:
        with status_console.status("probing this machine..."):
            host = asyncio.run(connector.check(target, params))
    else:
        host = asyncio.run(connector.check(target, params))
    if host.status is not HostStatus.OK or host.facts is None:
        raise ProbeOutputError(host.reason or "the probe gave no facts")

    host = host.model_copy(update={"findings": evaluate.evaluate_host(host.facts, checks, policy=effective)})
    policies = {host.name: effective} if effective is not None else {}
    [host] = evaluate.finish_hosts([host], policies, lock, only=only, skip=skip)
    if snapshot is not None:
        write_lock(build_lock([host]), snapshot)
    report = evaluate.build_report([host], kind="doctor", fail_on=fail_on.severity)
    report = report.model_copy(update={"policy": applied(loaded), "baseline": lock_file})
    emit(report, fmt.value, output, quiet=quiet)
    return evaluate.exit_code(report)
