"""What to check: a target (one machine, wherever it came from), its check options and its
provider's view, and the fixes a finding offers (steps, where they run and what they risk)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from computefence.models.base import _Model


class JobParams(BaseModel):
    """The job's own places the checks look at: where it writes, its accelerate config, its
    dataset and columns. Declared once for a target's CheckOptions and the policy's `checks`;
    it has no config of its own, so each keeps its own strictness."""

    output_dir: str | None = None
    accelerate_config: str | None = None
    dataset: str | None = None
    input_column: str | None = None
    label_column: str | None = None


class CheckOptions(_Model, JobParams):
    """Per-host parameters of the checks (from the CLI, an inventory or a provider)."""

    model_config = ConfigDict(extra="forbid")

    expect_gpu: bool = False
    # --perf: run the GPU performance canary (seconds of load on every GPU).
    perf: bool = False
    extra_paths: list[str] = Field(default_factory=list)


class ProviderInfo(_Model):
    """What a provider's API says about a pod."""

    provider: str  # "runpod", "vast", "lambda"
    pod_id: str
    name: str | None = None
    state: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    cost_per_hour: float | None = None
    image: str | None = None
    region: str | None = None
    # The provider's view of persistent storage.
    volume_mount_path: str | None = None
    volume_gb: float | None = None
    container_disk_gb: float | None = None
    persistent_paths: list[str] = Field(default_factory=list)
    network_volume: bool | None = None
    # The physical machine behind the pod (RunPod machineId, Vast machine_id) and, on Vast,
    # the host who rents it out; None where the provider does not say (Lambda).
    machine_id: str | None = None
    host_id: str | None = None


class StepKind(str, Enum):
    """What running a fix step risks."""

    # Only shows something; fixes nothing, so `fleet fix` never runs it.
    INSPECT = "inspect"
    # Idempotent, and changes only the job's environment (the files an SSH session reads, the
    # accelerate config, a directory on the volume, a package install).
    SAFE = "safe"
    # Restarts a service or the GPU: a running job would die.
    DISRUPTIVE = "disruptive"
    # Deletes data.
    DESTRUCTIVE = "destructive"


class StepPlace(str, Enum):
    # Over SSH, on the pod (for doctor: this machine).
    POD = "pod"
    # On the user's own machine: ssh-keygen -R, an edit of the inventory or policy.
    LOCAL = "local"


class FixStep(_Model):
    """One command of a fix, where it runs and what it risks. A command that no rule
    classified reads as `inspect` on the pod, so nothing unclassified is ever run."""

    run: str
    on: StepPlace = StepPlace.POD
    kind: StepKind = StepKind.INSPECT

    @model_validator(mode="before")
    @classmethod
    def _command_shorthand(cls, value: Any) -> Any:
        return {"run": value} if isinstance(value, str) else value

    @classmethod
    def inspect(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.INSPECT)

    @classmethod
    def safe(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.SAFE)

    @classmethod
    def disruptive(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.DISRUPTIVE)

    @classmethod
    def destructive(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.DESTRUCTIVE)

    @classmethod
    def local(cls, run: str, kind: StepKind = StepKind.INSPECT) -> FixStep:
        return cls(run=run, on=StepPlace.LOCAL, kind=kind)

    @property
    def runnable(self) -> bool:
        """Something `fleet fix --apply` may run: a pod step that changes something and deletes nothing."""
        return self.on is StepPlace.POD and self.kind in (StepKind.SAFE, StepKind.DISRUPTIVE)


class Fix(_Model):
    """What to do about a finding: steps to run in order, each safe to paste, and
    plain-words advice for what no command can do (move to another machine, edit the pod
    in the provider's console). A plain string stands for one unclassified command, and
    `commands=[...]` for unclassified steps (kind `inspect`, never run by `fleet fix`)."""

    steps: list[FixStep] = Field(default_factory=list)
    advice: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _command_shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"steps": [value]}
        if isinstance(value, dict) and "commands" in value:
            value = dict(value)
            commands = value.pop("commands") or []
            value.setdefault("steps", commands)
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def commands(self) -> list[str]:
        return [step.run for step in self.steps]

    def __bool__(self) -> bool:
        return bool(self.steps or self.advice)

    def as_text(self) -> str:
        """The schema-1 one-line form: commands joined by '; ', advice as a shell comment."""
        text = "; ".join(self.commands)
        if self.advice:
            text = f"{text}  # {self.advice}" if text else self.advice
        return text


class Target(_Model):
    """One machine to check, wherever it came from."""

    name: str
    host: str
    port: int = 22
    user: str | None = None
    identity_files: list[str] = Field(default_factory=list)
    # False after ssh_config's `IdentityFile none`: ssh then tries no ~/.ssh/id_* key, only
    # identity_files and the agent's keys (with identity_files empty, the agent's alone).
    default_identities: bool = True
    proxy_jump: str | None = None
    # An ssh ProxyCommand (tokens such as %h %p unexpanded); set instead of proxy_jump, never both.
    proxy_command: str | None = None
    known_hosts: list[str] = Field(default_factory=list)
    python: str = "python3"
    tags: list[str] = Field(default_factory=list)
    checks: CheckOptions = Field(default_factory=CheckOptions)
    # Where the target came from, e.g. "inventory/pods.yaml:12", "ssh_config", "runpod".
    source: str | None = None
    provider: ProviderInfo | None = None
    # Set when the provider lists the pod but it cannot be checked (no public SSH, stopped).
    unreachable_reason: str | None = None
    unreachable_fix: Fix | None = None
    # Path to an ssh_config the target was read from, for connection options.
    ssh_config: str | None = None
    # Overrides for the probe's filesystem roots ("proc", "etc", "sys", "dev"), passed into
    # the probe's params["roots"]; the demo fleet uses them to present simulated pod layouts.
    probe_roots: dict[str, str] = Field(default_factory=dict)
    # Probe parameters from the job's policy: the packages it names, its custom checks.
    probe_extra: dict[str, Any] = Field(default_factory=dict)
