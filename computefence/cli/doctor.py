"""`computefence doctor`: check the machine this runs on."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import typer

from computefence import run
from computefence.cli.app import EXIT_INTERRUPTED, app
from computefence.cli.output import FailOn, FailOnOpt, FormatOpt, OutputFormat, QuietOpt, ReportFileOpt, emit
from computefence.cli.policy_options import BaselineOpt, NoPolicyOpt, PolicyOpt, write_lock
from computefence.connectors.registry import ConnectSettings
from computefence.errors import ConfigError, ProbeOutputError, SourceError
from computefence.files import check_output_path
from computefence.interrupt import say_interrupted
from computefence.models import CheckOptions, HostReport, HostStatus, Target
from computefence.policy import LoadedPolicy, resolve_policy
from computefence.probe.core import DEFAULT_TIMEOUTS
from computefence.session import open_session
from computefence.text import is_terminal, unfiltered_stderr

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
    fmt: FormatOpt = OutputFormat("rich"),
    output: ReportFileOpt = None,
    fail_on: FailOnOpt = FailOn.block,
    quiet: QuietOpt = False,
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
    fix: bool = typer.Option(
        False, "--fix", help="Run the safe fix steps here (asks first), re-check, and say per finding what they did."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --fix: do not ask (needed without a terminal)."),
    allow_disruptive: bool = typer.Option(
        False, "--allow-disruptive", help="With --fix: also steps that restart a service or the GPU."
    ),
    step_timeout: float = typer.Option(
        300.0, "--step-timeout", min=1.0, metavar="SECONDS", help="With --fix: stop a step running longer."
    ),
    slurm_health: bool = typer.Option(
        False,
        "--slurm-health",
        help="Run as slurmd's HealthCheckProgram: judge only the machine, drain this node "
        "(SLURMD_NODENAME) on a machine fault, resume only drains of its own.",
        rich_help_panel="Slurm",
    ),
    no_drain: bool = typer.Option(
        False,
        "--no-drain",
        help="With --slurm-health: judge only and exit 1 on a blocker (in a Prolog, Slurm then drains the node "
        "as 'Prolog error').",
        rich_help_panel="Slurm",
    ),
    log: Path | None = typer.Option(
        None,
        "--log",
        metavar="FILE",
        help="With --slurm-health: append each drain or resume call and its answer here as JSON lines "
        "(default: computefence/actions.jsonl under $XDG_STATE_HOME, else ~/.local/state).",
        rich_help_panel="Slurm",
    ),
) -> int:
    """Check this machine: storage that vanishes, CPU fallbacks, broken drivers, launch configs.

    Exit status: 0 no blockers, 1 blockers (or warnings with --fail-on warn), 2 usage error.
    Use it as a gate: `computefence doctor --output-dir /workspace/ckpt && python train.py`.
    """
    if no_drain and not slurm_health:
        raise ConfigError("--no-drain needs --slurm-health")
    if log is not None and (not slurm_health or no_drain):
        raise ConfigError("--log records drains and resumes: it needs --slurm-health without --no-drain")
    if slurm_health:
        if fix or snapshot is not None or policy is not None or dataset or output_dir:
            raise ConfigError(
                "--slurm-health judges only the machine: drop --fix, --snapshot, --policy, --dataset and --output-dir"
            )
        return health_check(python=python, drain=not no_drain, log=log, fmt=fmt.value, output=output, quiet=quiet)
    check_output_path(output)
    # `--output-dir "$CKPT"` with CKPT unset must not silently skip the check it asked for.
    for flag, value in (
        ("--output-dir", output_dir),
        ("--python", python),
        ("--accelerate-config", accelerate_config),
        ("--dataset", dataset),
    ):
        if value is not None and not value.strip():
            raise ConfigError(f"{flag} is empty; give a path")
    if (yes or allow_disruptive) and not fix:
        raise ConfigError(f"{'--yes' if yes else '--allow-disruptive'} needs --fix")
    checks = CheckOptions(
        output_dir=output_dir,
        accelerate_config=accelerate_config,
        dataset=dataset,
        input_column=input_column,
        label_column=label_column,
        expect_gpu=expect_gpu,
        perf=perf,
    )
    target = Target(name=socket.gethostname() or "localhost", host="localhost", python=python, checks=checks)
    # What the probe needs from the policy (packages, custom checks, the job's model) does not
    # depend on the check ids, so the probe starts before the evaluator has loaded; the
    # policy's check ids, --only and --skip are checked while it runs (most of the tool's own
    # start), and a mistake there stops it.
    probe_policy = resolve_policy(policy, no_policy, None)
    settings = ConnectSettings(
        deadline=timeout
        + _GRACE_S
        + (DEFAULT_TIMEOUTS["dataset"] if dataset else 0.0)
        + (DEFAULT_TIMEOUTS["perf"] if perf else 0.0)
    )
    with open_session(
        [target],
        run.Rules(policy=probe_policy),
        settings,
        connector="local",
        probe_params={"deadline_s": timeout},
        progress=_status,
        sigint=True,
    ) as session:
        judging = _judging_rules(probe_policy, policy, no_policy, baseline, only, skip, fmt.value)
        rules, [probed] = asyncio.run(_beside(session.probe_async(), judging))
        session.plan = dataclasses.replace(session.plan, rules=rules, policies=run.plan([target], rules).policies)
        if session.interrupted:
            say_interrupted()
            return EXIT_INTERRUPTED
        if probed.status is not HostStatus.OK or probed.facts is None:
            raise ProbeOutputError(probed.reason or "the probe gave no facts")
        hosts = session.judge([probed])
        if fix:
            from computefence.cli.fix import fix_this_machine

            return fix_this_machine(
                session,
                probed,
                hosts[0],
                fmt=fmt.value,
                output=output,
                yes=yes,
                allow_disruptive=allow_disruptive,
                step_timeout=step_timeout,
            )
        report = session.report(hosts, kind="doctor", fail_on=fail_on.severity)
    if snapshot is not None:
        from computefence.evaluate.checks.environment import build_lock

        write_lock(build_lock(hosts), snapshot)
    emit(report, fmt.value, output, quiet=quiet)
    from computefence import evaluate

    return evaluate.exit_code(report)


@contextlib.contextmanager
def _status(total: int) -> Iterator[Callable[[HostReport], None]]:
    """A spinner on a terminal while this machine is probed; nothing otherwise (and no rich
    imported before the probe starts: `--format json` into a pipe never draws)."""
    if not is_terminal(unfiltered_stderr()):
        yield lambda host: None
        return
    from rich.console import Console

    with Console(file=unfiltered_stderr()).status("probing this machine..."):
        yield lambda host: None


async def _beside(
    probe: Awaitable[list[HostReport]], judging: Callable[[], run.Rules]
) -> tuple[run.Rules, list[HostReport]]:
    """The run's rules and the probe's hosts: `judging` (the evaluator's imports) in a thread
    while the probe runs; rules that do not load stop the probe."""
    probing = asyncio.ensure_future(probe)
    try:
        rules = await asyncio.to_thread(judging)
    except BaseException:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
        raise
    return rules, await probing


def _judging_rules(
    probe_policy: LoadedPolicy | None,
    policy: Path | None,
    no_policy: bool,
    baseline: Path | None,
    only: Sequence[str],
    skip: Sequence[str],
    fmt: str,
) -> Callable[[], run.Rules]:
    def load() -> run.Rules:
        from computefence import evaluate
        from computefence.render import FORMATS

        _ = FORMATS[fmt]  # the report's renderer is imported here too, not after the probe

        loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
        changed = loaded or probe_policy
        if changed is not None and (loaded and loaded.sha256) != (probe_policy and probe_policy.sha256):
            raise ConfigError(f"{changed.path} changed while doctor ran; run it again")
        return run.rules(policy=loaded, baseline=baseline, only=only, skip=skip)

    return load


def health_check(*, python: str, drain: bool, log: Path | None, fmt: str, output: Path | None, quiet: bool) -> int:
    """`--slurm-health`: this node's machine checks, and its drain or resume."""
    from computefence import evaluate
    from computefence.evaluate.checks.scheduler import MACHINE_CHECKS
    from computefence.models import ProviderInfo
    from computefence.operations import slurm_health
    from computefence.operations.action_log import open_log
    from computefence.operations.slurm_nodes import Scontrol

    # The log's path is checked before the probe; the file is made only with a call to log.
    action_log = open_log(log, {"command": "doctor --slurm-health"}) if drain else None
    slurm_health.prepare_environment()
    name = slurm_health.node_name()
    scontrol = Scontrol(timeout=slurm_health.CALL_TIMEOUT_S)
    try:
        node = scontrol.nodes([name]).get(name)
    except SourceError as exc:  # a controller that does not answer: judge the machine all the same
        print(f"computefence: warning: Slurm's view of {name} could not be read: {exc}", file=sys.stderr)
        node = None
    provider = ProviderInfo(
        provider="slurm",
        pod_id=name,
        name=name,
        state=node.state_text if node else None,
        gpu_count=(node.gres_gpus or None) if node else None,
    )
    target = Target(name=name, host="localhost", python=python, provider=provider)
    rules = run.rules(only=MACHINE_CHECKS)
    settings = ConnectSettings(deadline=slurm_health.PROBE_DEADLINE_S + 5.0)
    with open_session(
        [target], rules, settings, connector="local", probe_params={"deadline_s": slurm_health.PROBE_DEADLINE_S}
    ) as session:
        [probed] = session.probe()
        [host] = session.judge([probed])
        report = session.report([host], kind="doctor")
    if probed.status is HostStatus.OK:
        emit(report, fmt, output, quiet=quiet)
    action = None
    if action_log is not None:
        with action_log:
            action = slurm_health.act_on_node(host, node, scontrol, action_log)
    if action is not None:
        print(f"computefence: {name}: {action.outcome}: {action.detail}", file=sys.stderr)
    if probed.status is not HostStatus.OK:
        print(f"computefence: {name}: {probed.status.value}: {probed.reason}", file=sys.stderr)
        return 1
    return evaluate.exit_code(report)
