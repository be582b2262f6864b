"""The history of saved runs: each run's digest (its pods without their facts) and the host
ledger built from them (`report history`, `computefence hosts`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from computefence.models.base import SCHEMA_VERSION, _Model
from computefence.models.findings import HostStatus, HostVerdict, Remedy, Severity
from computefence.models.reports import Changes, Summary
from computefence.models.targets import ProviderInfo


class PerfFigure(_Model):
    """One perf check's figure for a machine, beside the median of that run's pods with its GPU model."""

    value: float
    unit: str
    fleet_median: float
    # Measured pods with that GPU model in the run (the machine's included).
    pods: int
    share: float | None = None
    at: str


class DigestFinding(_Model):
    """A blocker or warning of one pod in one saved run, as the history views use it."""

    check: str
    severity: Severity
    remedy: Remedy | None = None
    key: str | None = None


class PodDigest(_Model):
    """One pod of one saved run, without its facts: what `report history` and `hosts` read."""

    name: str
    status: HostStatus
    reason: str | None = None
    provider: ProviderInfo | None = None
    # Its blockers, then its warnings.
    findings: list[DigestFinding] = Field(default_factory=list)
    gpu_name: str | None = None
    # The code of the last Xid in the pod's kernel log.
    last_xid: int | None = None
    # Perf check -> its figure beside the run's median for the pod's GPU model.
    perf: dict[str, PerfFigure] = Field(default_factory=dict)

    @property
    def verdict(self) -> HostVerdict:
        if self.status is not HostStatus.OK:
            return HostVerdict.NOT_CHECKED
        if any(f.severity is Severity.BLOCK for f in self.findings):
            return HostVerdict.BLOCKED
        return HostVerdict.WARNINGS if self.findings else HostVerdict.READY


class RunDigestFile(_Model):
    """A saved run's digest (DIR/<run>.digest beside DIR/<run>.json): its summary and its
    pods without their facts, a few KB where the run is megabytes. `run_size` and
    `run_mtime_ns` name the run file it was made from: a digest that no longer matches is
    made again from the run."""

    digest_version: Literal[1] = 1
    run_size: int = 0
    run_mtime_ns: int = 0
    generated_at: str
    fail_on: Severity = Severity.BLOCK
    summary: Summary
    changes: Changes | None = None
    pods: list[PodDigest] = Field(default_factory=list)


class LedgerMachine(_Model):
    """One physical machine seen in a history of fleet runs (`computefence hosts`)."""

    provider: str
    # The provider's machine id; the pod id where the provider names no machine (Lambda).
    machine_id: str
    host_id: str | None = None
    gpu_model: str | None = None
    runs: int = 0
    blocked_runs: int = 0
    # Runs in which a pod on it could not be checked (unreachable, timeout, ...).
    unanswered_runs: int = 0
    # Check id -> runs in which it blocked a pod on this machine.
    checks: dict[str, int] = Field(default_factory=dict)
    # Runs in which a `replace` check blocked it, and those checks.
    replace_runs: int = 0
    replace_checks: list[str] = Field(default_factory=list)
    last_xid: str | None = None
    last_seen: str | None = None
    # Perf check -> the newest measured figure.
    perf: dict[str, PerfFigure] = Field(default_factory=dict)
    # Blocked by a `replace` check in at least --min-runs runs.
    avoid: bool = False


class HostLedger(_Model):
    """What `computefence hosts --format json` prints."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "hosts"
    runs: int = 0
    min_runs: int = 1
    hosts: list[LedgerMachine] = Field(default_factory=list)
