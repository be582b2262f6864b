"""Verdicts: the evaluator's findings about one host, and the host's report (its status,
facts and findings)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field, computed_field, field_serializer, model_validator
from pydantic.json_schema import SkipJsonSchema

from computefence.models.base import _Model
from computefence.models.facts import Facts
from computefence.models.targets import Fix, FixStep, ProviderInfo
from computefence.redaction import Redacted


class Severity(str, Enum):
    # A check that could not run or does not apply here; its message says why.
    SKIP = "skip"
    PASS = "pass"
    WARN = "warn"
    BLOCK = "block"

    @property
    def rank(self) -> int:
        return {"skip": -1, "pass": 0, "warn": 1, "block": 2}[self.value]


class Remedy(str, Enum):
    """What a blocker calls for: a command on the pod, the user's own setting, or another machine."""

    FIX = "fix"
    CONFIG = "config"
    REPLACE = "replace"


class _WithFix(_Model):
    """For models with a `fix: Fix | None` field. In JSON, `fix` stays the schema-1 string
    for one more schema version, beside `fix_commands` and `fix_advice`; reading accepts
    both forms (a schema-1 string reads as one command)."""

    @model_validator(mode="before")
    @classmethod
    def _fix_from_json(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("fix_commands" in data or "fix_advice" in data or "fix_steps" in data):
            data = dict(data)
            commands, advice = data.pop("fix_commands", None) or [], data.pop("fix_advice", None)
            # A report without fix_steps (written before them) reads its commands as unclassified.
            steps = data.pop("fix_steps", None) or commands
            data["fix"] = {"steps": steps, "advice": advice} if steps or advice else None
        return data

    @field_serializer("fix", check_fields=False)
    def _fix_text(self, fix: Fix | None) -> str | None:
        return fix.as_text() if fix else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_commands(self) -> list[str]:
        fix = getattr(self, "fix", None)
        return list(fix.commands) if fix else []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_advice(self) -> str | None:
        fix = getattr(self, "fix", None)
        return fix.advice if fix else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_steps(self) -> list[FixStep]:
        fix = getattr(self, "fix", None)
        return list(fix.steps) if fix else []


class Finding(_WithFix):
    check: str  # stable id, e.g. "storage.output-dir"
    severity: Severity
    message: Redacted
    fix: Fix | None = None
    # What the finding is about on this host (a path, a filesystem, a GPU index), so
    # the same check on the same subject groups across pods.
    subject: str | None = None
    # The check's remedy class (evaluate/spec.py); None in reports saved before it existed.
    remedy: Remedy | None = None
    # What identifies the finding across runs of this pod (evaluate/identity.py): the subject,
    # a path named from the pod's own places (`<output_dir>`, `~/...`). None in reports saved
    # before it existed, and where there is no subject.
    key: str | None = None


class HostStatus(str, Enum):
    OK = "ok"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_MISMATCH = "host_key_mismatch"
    CONNECTION_LOST = "connection_lost"
    NO_PYTHON = "no_python"
    PROBE_FAILED = "probe_failed"
    NOT_CHECKABLE = "not_checkable"
    VANISHED = "vanished"
    CANCELLED = "cancelled"


class HostVerdict(str, Enum):
    READY = "ready"
    WARNINGS = "warnings"
    BLOCKED = "blocked"
    NOT_CHECKED = "not_checked"


class HostReport(_WithFix):
    name: str
    status: HostStatus
    reason: Redacted | None = None
    fix: Fix | None = None
    host: str | None = None
    port: int | None = None
    provider: ProviderInfo | None = None
    tags: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    facts: Facts | None = None
    findings: list[Finding] = Field(default_factory=list)
    # What the connector saw beyond the reason (a known_hosts file, a key's fingerprint), for
    # the evaluator's fix; never written to a report.
    status_detail: SkipJsonSchema[str | None] = Field(default=None, exclude=True)

    @property
    def blocking_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.BLOCK]

    @property
    def warning_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARN]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def blockers(self) -> int:
        return len(self.blocking_findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def warnings(self) -> int:
        return len(self.warning_findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> HostVerdict:
        """What the pod is good for: the state a launch script reads."""
        if self.status is not HostStatus.OK:
            return HostVerdict.NOT_CHECKED
        if self.blockers:
            return HostVerdict.BLOCKED
        return HostVerdict.WARNINGS if self.warnings else HostVerdict.READY
