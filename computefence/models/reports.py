"""The report of a check (`fleet check`, `doctor`, `watch`; schema 2), what it is made of
beside the hosts (sources, drift, summary, changes since the last run), and the other files a
check reads or writes (`inventory list`'s target list, the baseline lock)."""

from __future__ import annotations

from pydantic import Field

from computefence.models.base import SCHEMA_VERSION, _Model
from computefence.models.findings import Finding, HostReport, HostStatus, Severity
from computefence.models.targets import Target
from computefence.redaction import Redacted


class SourceStatus(_Model):
    """How one target source (an inventory, a provider API) fared."""

    name: str
    ok: bool = True
    targets: int = 0
    error: str | None = None
    # What read it where there is a choice: "ssh -G" or "built-in parser",
    # "ansible-inventory" or "built-in reader".
    resolver: str | None = None
    # One line each: a line that could not be read, an option that cannot be honoured.
    warnings: list[str] = Field(default_factory=list)


class TargetList(_Model):
    """What `inventory list --format json` prints."""

    schema_version: int = SCHEMA_VERSION
    targets: list[Target]
    sources: list[SourceStatus]


class DriftRow(_Model):
    """One component whose version differs between hosts."""

    component: str
    # version -> host names
    values: dict[str, list[str]]


BASELINE_SCHEMA_VERSION = 1


class BaselineLock(_Model):
    """computefence.lock.json: the environment fingerprint of pods that worked."""

    schema_version: int = BASELINE_SCHEMA_VERSION
    tool_version: str
    generated_at: str
    # "majority" (each field's most common value) or "pod" (one pod's values).
    reference: str = "majority"
    pods: list[str] = Field(default_factory=list)
    # Field -> value, e.g. {"torch": "2.5.1+cu124", "torch-cuda": "12.4", "transformers": "4.48.0"}.
    fingerprint: dict[str, str] = Field(default_factory=dict)
    # Field -> {pod: its value} for the pods whose value was not the one recorded.
    differing: dict[str, dict[str, str]] = Field(default_factory=dict)


class Summary(_Model):
    hosts: int = 0
    ok: int = 0
    not_ok: int = 0
    # Each checked pod counts once, under its worst finding (render/views.pod_counts words them).
    hosts_blocked: int = Field(0, description="Checked pods with at least one blocker (their warnings too).")
    hosts_warned: int = Field(0, description="Checked pods with warnings and no blocker.")
    hosts_clean: int = Field(0, description="Checked pods with no blocker and no warning.")
    blockers: int = 0
    warnings: int = 0
    passed: int = 0
    # Checks that could not run or do not apply; neither passes nor problems.
    skipped: int = 0
    cost_per_hour_total: float | None = None
    cost_per_hour_at_risk: float | None = None
    hosts_at_risk_priced: int = 0
    # "pass", "warn" or "block"
    verdict: Severity = Severity.PASS


# ---------------------------------------------------------------- since the last run


class FindingChange(_Model):
    """A blocker or warning that is new since the last run, or one that cleared."""

    host: str
    # None: absent (or a pass) on that side.
    severity_before: Severity | None = None
    severity_after: Severity | None = None
    # The finding as the side that has it reports it (new: this run, cleared: the last run).
    finding: Finding


class StatusChange(_Model):
    """A pod whose connection status changed (ok -> unreachable, timeout -> ok, ...)."""

    host: str
    before: HostStatus
    after: HostStatus
    reason: Redacted | None = None


class VersionChange(_Model):
    """A component (torch, the NVIDIA driver, a package) whose version changed on a pod."""

    host: str
    component: str
    before: str
    after: str


class Changes(_Model):
    """What differs from an earlier run; every list sorted by pod, then check or component."""

    since: str  # generated_at of the earlier run
    new: list[FindingChange] = Field(default_factory=list)
    cleared: list[FindingChange] = Field(default_factory=list)
    appeared: list[str] = Field(default_factory=list)
    vanished: list[str] = Field(default_factory=list)
    status: list[StatusChange] = Field(default_factory=list)
    versions: list[VersionChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.new or self.cleared or self.appeared or self.vanished or self.status or self.versions)


class AppliedFile(_Model):
    """A policy or baseline file a run applied, as it was then."""

    path: str
    sha256: str


class Report(_Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    kind: str = "fleet"  # "doctor", "fleet", "dataset" or "watch"
    generated_at: str
    hosts: list[HostReport] = Field(default_factory=list)
    sources: list[SourceStatus] = Field(default_factory=list)
    drift: list[DriftRow] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    # Options that shape the verdict, recorded so a saved report re-renders the same.
    fail_on: Severity = Severity.BLOCK
    allow_unreachable: bool = False
    # Stopped (Ctrl-C) before every pod answered: the pods still in flight are cancelled, and
    # the verdict is INTERRUPTED, whatever the pods checked by then say.
    interrupted: bool = False
    # Set with `fleet check --history DIR`: what differs from the last run there.
    changes: Changes | None = None
    policy: AppliedFile | None = None
    baseline: AppliedFile | None = None
