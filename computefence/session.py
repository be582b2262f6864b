"""One run session: what every command that reaches machines opens, and the steps it takes.

`fleet check`, `fleet fix`, `fleet watch`, `fleet snapshot`, `fleet release`, `doctor` and
`computefence.check()` open a session the same way, from the selection (or targets), the rules and the connection
settings. Opening it decides, once for all of them:

- which targets: the connector's own pods (demo, replay) narrowed by --limit/--tag, else the
  selection's sources; "no targets to <verb>" when none were found and no source failed;
  `--shard` applied; the policy merged in (the Plan);
- which connector: the one named (--demo, --replay, a library caller's), else the one the
  registry chooses for the targets (connectors.registry.connector_for);
- how the run stops: Ctrl-C (`sigint=True`) or the caller's `stop` event. A stopped run keeps
  what finished, marks the rest cancelled and sets `session.interrupted`; an action that
  waits on provider calls in threads runs inside `session.acting()`, which a Ctrl-C ends at
  once and marks the same way.

An action on a saved report (`fleet release`) opens its session from the report's pods
(`report_targets`) with the PROVIDER_APIS connector: it reaches them through their
providers' APIs (`session.providers()`), which it lists again before acting
(sources.registry.list_again, the listing that decides vanished pods for a check too).

Then every command takes the same steps on it:

    with open_session(selection, rules, settings, verb="check", sigint=True) as session:
        hosts = session.probe()                      # facts, or the status saying why not
        judged = session.judge(hosts)                # the evaluator, under the plan's rules
        report = session.report(judged, kind="fleet")

`probe` re-lists the provider pods that failed a live connector (vanished pods are decided
here); `probe(names=...)` is the re-probe of a few targets after acting on them;
`open_shell(name)` gives a command session (stdin, a bounded command) on one target.

How a new fleet action plugs in (fleet drain and resume are built this way):

1. `computefence/operations/<action>.py`: plan the action from judged hosts (or a saved
   report), act through `session.open_shell(name)` or a provider API under
   `session.stopping()`, and prove it with `session.probe(names=changed)` and `session.judge`
   (operations/fix.py `apply_and_prove` is the model: apply, re-probe, judge).
2. Its report model in computefence/models/actions.py and `computefence/render/<action>.py` to show it.
3. `computefence/cli/<action>.py`: a thin typer command: options, `open_session(...)`, the
   operation, the renderer, the exit code. It never assembles the pipeline itself.

Nothing here prints: warnings and notes go to `note`, progress to `progress`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec

from computefence import run
from computefence.connectors.interface import Connector, Outcome, host_report
from computefence.connectors.registry import ConnectSettings, connector_for, open_connector
from computefence.connectors.shell import Shell
from computefence.errors import ConfigError
from computefence.interrupt import stop_on_sigint
from computefence.models import BaselineLock, HostReport, HostStatus, Report, Severity, SourceStatus, Target
from computefence.policy import LoadedPolicy
from computefence.sources import TargetSelection, collect_targets, select_targets
from computefence.sources.interface import ReleasingSource
from computefence.sources.registry import PROVIDER_NAMES, provider_source
from computefence.sources.selection import select_shard
from computefence.workers import Workers, can_fork, default_workers, start_workers

__all__ = [
    "PROVIDER_APIS",
    "Planner",
    "ProgressFactory",
    "RunSession",
    "check",
    "check_async",
    "open_session",
    "report_targets",
]

P = ParamSpec("P")
# Counts `total` targets as they finish: a context manager giving the on_progress callback.
ProgressFactory = Callable[[int], AbstractContextManager[run.ProgressCallback]]
# How a command's targets become its plan (run.plan for a check, watch.plan for a watch).
Planner = Callable[[list[Target], run.Rules, list[SourceStatus]], run.Plan]


def check_plan(perf: bool = False) -> Planner:
    """The plan of a check: the policy merged in, and the GPU measurements with `perf`."""

    def planner(targets: list[Target], rules: run.Rules, sources: list[SourceStatus]) -> run.Plan:
        return run.plan(targets, rules, perf=perf, sources=sources)

    return planner


def _silent(line: str) -> None:
    pass


class _ProviderApis:
    """The connector of an action that reaches its pods only through their providers' APIs
    (fleet release): nothing is probed or run on a pod."""

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        return host_report(target, self._not_here(target), 0.0)

    async def open_shell(self, target: Target) -> Shell | Outcome:
        return self._not_here(target)

    @staticmethod
    def _not_here(target: Target) -> Outcome:
        return Outcome(HostStatus.NOT_CHECKABLE, f"{target.name} is reached through its provider's API only")


PROVIDER_APIS: Connector = _ProviderApis()


def report_targets(report: Report) -> list[Target]:
    """The pods of a saved report, as the targets of an action on them."""
    return [
        Target(name=h.name, host=h.host or "", port=h.port or 22, tags=list(h.tags), provider=h.provider)
        for h in report.hosts
    ]


@dataclass
class RunSession:
    """An open run: its plan, the connector that reaches its targets, and how it stops."""

    plan: run.Plan
    connector: Connector
    # Real pods: a provider pod that failed to answer is worth re-listing.
    live: bool = False
    api_url: str | None = None
    probe_params: dict[str, Any] | None = None
    progress: ProgressFactory | None = None
    stop: asyncio.Event | None = None
    sigint: bool = False
    note: Callable[[str], None] = _silent
    # Processes that probe the targets (`probe()` of the whole plan; computefence/workers.py).
    workers: int = 1
    # --concurrency: the pods in flight across all the workers.
    concurrency: int | None = None
    # The run's --connect-timeout, for the evaluator's fix of a pod that did not answer.
    connect_timeout: float = 10.0
    interrupted: bool = field(default=False, init=False)

    @property
    def targets(self) -> list[Target]:
        return self.plan.targets

    @contextlib.asynccontextmanager
    async def stopping(self) -> AsyncIterator[asyncio.Event]:
        """The event that stops this run (Ctrl-C's, or the caller's); inside the running loop.
        Once it is set the session counts as interrupted."""
        if self.stop is not None:
            yield self.stop
            stop = self.stop
        elif self.sigint:
            with stop_on_sigint() as stop:
                yield stop
        else:
            stop = asyncio.Event()
            yield stop
        if stop.is_set():
            self.interrupted = True

    async def probe_async(
        self, names: Collection[str] | None = None, *, stop: asyncio.Event | None = None, progress: bool = True
    ) -> list[HostReport]:
        """One HostReport per target (or per target named), in the plan's order: facts, or
        the status saying why not. A provider pod that failed a live connector is re-listed
        and reported vanished when its provider no longer runs it. `stop`: an event of a
        `stopping()` already open (the re-probe after acting); `progress`: count them."""
        plan = self.plan if names is None else self.plan.subset(names)

        async def probing(on_progress: run.ProgressCallback | None, stop: asyncio.Event) -> list[HostReport]:
            return await run.probe_targets(
                plan,
                self.connector,
                self.probe_params,
                on_progress=on_progress,
                stop=stop,
                connect_timeout=self.connect_timeout,
            )

        return await self._probed(plan.targets, probing, stop, progress)

    def probe(self, names: Collection[str] | None = None) -> list[HostReport]:
        """`probe_async` in an event loop of its own (a command's); the whole plan is split
        across `workers` processes when there are more than one, with the same result."""
        if names is None and self.workers > 1 and can_fork():
            # Forked before this process runs an event loop: each worker starts its own.
            params = run.with_run_params(self.plan.targets, self.probe_params)
            started = start_workers(self.plan.targets, self.workers, self.connector, params, self.concurrency)
            return asyncio.run(self._gather(started))
        return asyncio.run(self.probe_async(names))

    async def _gather(self, started: Workers) -> list[HostReport]:
        """The workers' answers, as `probe_async` gives a single process's."""
        targets = self.plan.targets

        async def gathering(on_progress: run.ProgressCallback | None, stop: asyncio.Event) -> list[HostReport]:
            hosts = await started.gather(on_progress, stop)
            return [run.with_status_fix(t, h, self.connect_timeout) for t, h in zip(targets, hosts)]

        return await self._probed(targets, gathering, None, True)

    async def _probed(
        self,
        targets: list[Target],
        probing: Callable[[run.ProgressCallback | None, asyncio.Event], Awaitable[list[HostReport]]],
        stop: asyncio.Event | None,
        progress: bool,
    ) -> list[HostReport]:
        """`probing` of `targets` under the run's stop event (or `stop`, already open) and its
        progress count; then, on a live run that was not stopped, vanished pods decided."""
        async with contextlib.AsyncExitStack() as stack:
            if stop is None:
                stop = await stack.enter_async_context(self.stopping())
            on_progress = None
            if progress and self.progress is not None:
                on_progress = stack.enter_context(self.progress(len(targets)))
            hosts = await probing(on_progress, stop)
            stopped = stop.is_set()
        if self.live and not stopped:
            hosts = run.mark_vanished(targets, hosts, self.api_url)
        return hosts

    def judge(self, hosts: Sequence[HostReport]) -> list[HostReport]:
        """The hosts' findings under the plan's targets, policies and rules (a re-probed
        subset is judged with the whole plan)."""
        return run.evaluate_hosts(self.plan, hosts)

    def report(
        self,
        hosts: Sequence[HostReport],
        *,
        kind: str = "fleet",
        fail_on: Severity | str = Severity.BLOCK,
        allow_unreachable: bool = False,
    ) -> Report:
        """The report of judged hosts; an interrupted run's says so."""
        report = run.report_for(self.plan, hosts, kind=kind, fail_on=fail_on, allow_unreachable=allow_unreachable)
        return report.model_copy(update={"interrupted": True}) if self.interrupted else report

    async def check_async(self, **report_options: Any) -> Report:
        """Probe, judge, report: the whole of a check."""
        return self.report(self.judge(await self.probe_async()), **report_options)

    async def open_shell(self, name: str) -> Shell | Outcome:
        """A command session on the target `name` (fix steps), or the outcome saying why not."""
        target = next(t for t in self.plan.targets if t.name == name)
        return await self.connector.open_shell(target)

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """An action that waits on threads (provider calls in interrupt.each_in_a_thread): the
        first Ctrl-C ends the wait at once and the session counts as interrupted; the caller
        says what was sent."""
        try:
            yield
        except KeyboardInterrupt:
            self.interrupted = True

    def providers(self) -> dict[str, ReleasingSource]:
        """The API of each provider whose pods the session holds, by provider name."""
        names = {t.provider.provider for t in self.plan.targets if t.provider is not None} & set(PROVIDER_NAMES)
        sources = {}
        for name in sorted(names):
            source = provider_source(name, self.api_url)
            assert isinstance(source, ReleasingSource)
            sources[name] = source
        return sources

    def cancelled(self, hosts: Sequence[HostReport]) -> int:
        """How many of `hosts` the interrupt left unchecked."""
        return sum(1 for h in hosts if h.status is HostStatus.CANCELLED)


@contextlib.contextmanager
def open_session(
    targets: TargetSelection | Sequence[Target] | None,
    rules: run.Rules | None = None,
    settings: ConnectSettings | None = None,
    *,
    connector: str | Connector | None = None,
    verb: str = "check",
    planner: Planner | None = None,
    shard: tuple[int, int] | None = None,
    workers: int | None = 1,
    probe_params: dict[str, Any] | None = None,
    progress: ProgressFactory | None = None,
    stop: asyncio.Event | None = None,
    sigint: bool = False,
    note: Callable[[str], None] = _silent,
) -> Iterator[RunSession]:
    """The run session of `targets` (a selection to read, Target objects, or None: the named
    connector's own pods), open while the block runs (the demo's pods live that long).

    `connector`: a registry name, a Connector object, or None for the one the targets need.
    `workers`: processes to probe the targets in (None: the usable cores, no more than
    there are targets). A bad name, file or selection raises ConfigError before any pod
    is contacted."""
    rules = rules if rules is not None else run.Rules()
    concurrency = settings.concurrency if settings is not None else None
    settings = settings if settings is not None else ConnectSettings()
    planner = planner if planner is not None else check_plan()
    with contextlib.ExitStack() as stack:
        read: tuple[list[Target], list[SourceStatus]] | None = None
        if connector is None or isinstance(connector, str):
            if connector is None:
                # The targets are read first: they say which connector reaches them.
                read = _listed(targets, None, note)
                connector = connector_for(read[0])
            opened = stack.enter_context(open_connector(connector, settings))
            connect, live = opened.connect, opened.live
            if opened.targets is not None:
                read = _listed(targets, opened.targets, note, opened.sources)
            elif targets is None:
                raise ConfigError(f"no targets: the {connector} connector has no pods of its own")
        else:
            given = connector
            connect, live = (lambda _targets: given), False
        listed, sources = read if read is not None else _listed(targets, None, note)
        # A source that failed is the report's to show; only an empty list from sources that
        # all answered is nothing to do.
        if not listed and not isinstance(targets, Sequence) and all(source.ok for source in sources):
            raise ConfigError(f"no targets to {verb}")
        if shard is not None:
            listed = select_shard(listed, *shard)
        plan = planner(listed, rules, sources)
        api_url = targets.api_url if isinstance(targets, TargetSelection) else None
        yield RunSession(
            plan=plan,
            connector=connect(plan.targets),
            live=live,
            api_url=api_url,
            probe_params=probe_params,
            progress=progress,
            stop=stop,
            sigint=sigint,
            note=note,
            workers=workers if workers is not None else default_workers(len(plan.targets)),
            concurrency=concurrency,
            connect_timeout=settings.connect_timeout,
        )


def _listed(
    targets: TargetSelection | Sequence[Target] | None,
    own: list[Target] | None,
    note: Callable[[str], None],
    own_sources: Sequence[SourceStatus] = (),
) -> tuple[list[Target], list[SourceStatus]]:
    """The targets and their sources' statuses: a connector's own pods narrowed by the
    selection's --limit/--tag, the selection's sources read (each warning noted), or the
    targets given."""
    if own is not None:
        selection = targets if isinstance(targets, TargetSelection) else TargetSelection()
        return select_targets(own, limit=selection.limit, tags=selection.tags), list(own_sources)
    if isinstance(targets, TargetSelection):
        listed, statuses = collect_targets(targets)
        for status in statuses:
            for warning in status.warnings:
                note(f"warning: {warning}")
        return listed, statuses
    if targets is None:
        raise ConfigError("no targets: give targets, or a connector name whose connector has its own pods")
    return list(targets), []


# ---------------------------------------------------------------- computefence.check()


async def check_async(
    targets: Sequence[Target] | TargetSelection | None = None,
    connector: Connector | str = "ssh",
    *,
    settings: ConnectSettings | None = None,
    policy: LoadedPolicy | Path | None = None,
    baseline: BaselineLock | Path | None = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    fail_on: Severity | str = Severity.BLOCK,
    allow_unreachable: bool = False,
    perf: bool = False,
    probe_params: dict[str, Any] | None = None,
    on_progress: run.ProgressCallback | None = None,
    stop: asyncio.Event | None = None,
    kind: str = "fleet",
) -> Report:
    """Check `targets` and return the judged Report, as `fleet check --format json` writes it.

    targets: Target objects, or a TargetSelection (inventories, ssh_config, Ansible,
    providers) to read them from; None: the connector's own pods (demo, replay).
    connector: a name in computefence.connectors.registry.CONNECTORS ("ssh", "demo",
    "replay", "local"), opened with `settings`, or any Connector object. A provider pod that
    fails to answer a live connector is re-listed and may end as vanished.
    policy: a LoadedPolicy or a computefence.yaml path (nothing is searched for); baseline:
    a lock or a lock file (default: the policy's `baseline:`); only/skip: check-id patterns
    as --only/--skip; fail_on ("block" or "warn") and allow_unreachable: as the CLI flags;
    perf: also measure the GPUs; probe_params: added to every target's probe parameters;
    on_progress: called with each host as it finishes; stop: set it to cancel what is still
    in flight (those pods are reported as cancelled); kind: "fleet" or "doctor".

    A bad file, pattern or target list raises ConfigError before any pod is contacted; a
    pod's own failure is its HostReport's status, never an exception. `check_async` runs
    inside a running event loop; `check` is the same in an event loop of its own."""
    run_rules = run.rules(policy=policy, baseline=baseline, only=only, skip=skip)
    with open_session(
        targets,
        run_rules,
        settings,
        connector=connector,
        planner=check_plan(perf),
        probe_params=probe_params,
        progress=_callback(on_progress),
        stop=stop,
    ) as session:
        return await session.check_async(kind=kind, fail_on=fail_on, allow_unreachable=allow_unreachable)


def _callback(on_progress: run.ProgressCallback | None) -> ProgressFactory | None:
    if on_progress is None:
        return None

    @contextlib.contextmanager
    def counting(total: int) -> Iterator[run.ProgressCallback]:
        yield on_progress

    return counting


def _in_a_loop_of_its_own(check_in_loop: Callable[P, Coroutine[Any, Any, Report]]) -> Callable[P, Report]:
    @functools.wraps(check_in_loop)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> Report:
        return asyncio.run(check_in_loop(*args, **kwargs))

    blocking.__name__ = blocking.__qualname__ = "check"
    return blocking


check = _in_a_loop_of_its_own(check_async)
