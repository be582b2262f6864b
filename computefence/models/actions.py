"""The reports of the fleet actions: what `fleet fix` and `doctor --fix`, `fleet release`,
`fleet drain` and `fleet resume` did or would do. A new action's report model goes here."""

from __future__ import annotations

from pydantic import Field

from computefence.models.base import SCHEMA_VERSION, _Model
from computefence.models.findings import HostStatus, Severity
from computefence.models.targets import StepKind, StepPlace
from computefence.redaction import Redacted

# ---------------------------------------------------------------- fleet fix and doctor --fix


class StepRecord(_Model):
    check: str
    subject: str | None = None
    run: str
    on: StepPlace
    kind: StepKind
    # planned (a plan: it would run), ran, failed, timeout, skipped
    status: str
    exit: int | None = None
    duration_s: float | None = None
    output_tail: Redacted | None = None
    # Why it was skipped, or why it failed without an exit status.
    reason: Redacted | None = None


class FindingResult(_Model):
    check: str
    subject: str | None = None
    before: Severity | None = None
    # None: gone after the re-probe (or not re-probed: see outcome).
    after: Severity | None = None
    # fixed, still_failing, failed, skipped, planned (a plan), new (appeared after the steps)
    outcome: str
    reason: Redacted | None = None
    output_tail: Redacted | None = None


class FixHost(_Model):
    name: str
    # The pod's status before (and, where it was re-probed, after); a pod not checked has no results.
    status: HostStatus = HostStatus.OK
    reason: Redacted | None = None
    # Why no step runs on this pod at all (GPU memory held by other processes).
    refused: str | None = None
    # Every name of this pod when the targets name it more than once: its steps ran once, under
    # the first of them, and each name's results come from its own re-probe.
    same_pod: list[str] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    results: list[FindingResult] = Field(default_factory=list)


class FixSummary(_Model):
    fixed: int = 0
    still_failing: int = 0
    failed: int = 0
    skipped: int = 0
    planned: int = 0
    new: int = 0
    # Pods that could not be checked (before) or re-probed (after).
    not_checked: int = 0


class FixReport(_Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    kind: str = "fix"
    generated_at: str
    # False: a plan, nothing was run.
    applied: bool = False
    allow_disruptive: bool = False
    interrupted: bool = False
    hosts: list[FixHost] = Field(default_factory=list)
    summary: FixSummary = Field(default_factory=FixSummary)

    @property
    def step_count(self) -> int:
        """Steps to run: a pod's once, however many names it has."""
        return sum(1 for h in self.hosts if acts(h) for s in h.steps if s.status == "planned")

    def exit_code(self) -> int:
        """0 when nothing is left to do (a plan) or every finding selected is fixed; 1 otherwise."""
        s = self.summary
        if self.applied:
            return 0 if not (s.still_failing or s.failed or s.skipped or s.new or s.not_checked) else 1
        return 0 if not (s.planned or s.skipped or s.not_checked) else 1


def acts(host: FixHost) -> bool:
    """Whether this name's steps run: a pod named more than once runs them under its first name."""
    return not host.same_pod or host.same_pod[0] == host.name


class _ActionReport(_Model):
    """What an action that shows its plan before it acts (release, drain, resume) prints
    with --format json: its kind, whether it was a dry run, then what it selected."""

    schema_version: int = SCHEMA_VERSION
    kind: str
    dry_run: bool = True


# ---------------------------------------------------------------- fleet release

RELEASE_OUTCOMES = ("would_release", "released", "already_stopped", "gone", "changed", "refused", "failed")


class ReleasePod(_Model):
    """One pod `fleet release` selected: what condemns it, what it does or would do, and how that went."""

    name: str
    provider: str | None = None
    pod_id: str | None = None
    machine_id: str | None = None
    # "stop" or "terminate"; None where no action applies (refused).
    action: str | None = None
    # Check ids of the findings that select it, and "unreachable" for --unreachable-runs.
    selected_by: list[str] = Field(default_factory=list)
    cost_per_hour: float | None = None
    # One of RELEASE_OUTCOMES.
    outcome: str
    # The exact API call (dry run), the provider's answer, or why it was refused or failed.
    detail: Redacted = ""
    # "check: message" of each condemning finding, for the terminal (not part of the JSON).
    reasons: list[str] = Field(default_factory=list, exclude=True)


class ReleaseReport(_ActionReport):
    """What `fleet release --format json` prints."""

    kind: str = "release"
    pods: list[ReleasePod] = Field(default_factory=list)


class NodeAction(_Model):
    """One Slurm node `fleet drain` or `fleet resume` considered: how it stood, what was
    (or would be) run, and how that went."""

    name: str
    # "drain" or "resume".
    action: str
    # drain: the check ids of the machine faults; resume: the drain reason being lifted.
    selected_by: list[str] = Field(default_factory=list)
    # The node's Slurm state and reason when read before acting.
    state: str | None = None
    reason: str | None = None
    # planned, drained, resumed, kept_drained, already_drained, not_drained, left_alone, gone, failed.
    outcome: str
    # The exact commands, as a shell would take them (the dry run's plan).
    commands: list[str] = Field(default_factory=list)
    detail: str = ""
    # "check: message" of each fault, for the terminal (not part of the JSON).
    reasons: list[str] = Field(default_factory=list, exclude=True)


class NodeActionReport(_ActionReport):
    """What `fleet drain --format json` and `fleet resume --format json` print."""

    kind: str = "drain"
    nodes: list[NodeAction] = Field(default_factory=list)
