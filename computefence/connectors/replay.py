"""Recorded probe runs, served back, so the CLI, its exit codes, the renderers and the fleet
summary run end to end without any server.

A recording is a folder with one JSON file a target; the files' names give the order:

    {"recording": 1, "target": {...a Target...}, "status": "ok", "reason": "probe completed",
     "detail": null, "duration_s": 1.234, "probe_output": "{...the probe's JSON document...}"}

The probe output is parsed the way the SSH connector parses it (a garbled one ends as
probe_failed), and a status other than ok is served with its recorded reason; fixes are
worked out afresh, as for a live run. The demo fleet's recording (computefence/demo/
recordings/fleet, made by `python3 bench/record_demo.py`) feeds the replay tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from computefence.connectors.interface import Outcome, host_report
from computefence.connectors.payload import MAX_OUTPUT_BYTES, parse_probe_output
from computefence.connectors.shell import Shell
from computefence.errors import ConfigError, ProbeOutputError
from computefence.files import file_name_for, read_config_bytes, write_output
from computefence.models import HostReport, HostStatus, Target

RECORDING_VERSION = 1
# A probe output at its cap, plus the target and the status around it.
MAX_RECORDING_BYTES = MAX_OUTPUT_BYTES + 1024 * 1024


@dataclass(frozen=True)
class Recording:
    target: Target
    status: HostStatus
    reason: str
    detail: str | None
    duration_s: float
    probe_output: str


class ReplayConnector:
    """Answers for each target with what was recorded under its name."""

    def __init__(self, recordings: list[Recording]):
        self.recordings = {recording.target.name: recording for recording in recordings}

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        recording = self.recordings.get(target.name)
        if recording is None:
            return host_report(target, Outcome(HostStatus.PROBE_FAILED, f"nothing was recorded for {target.name}"), 0.0)
        outcome = Outcome(recording.status, recording.reason, recording.detail)
        if recording.status is HostStatus.OK:
            try:
                outcome.facts = parse_probe_output(recording.probe_output)
            except ProbeOutputError as exc:
                outcome = Outcome(HostStatus.PROBE_FAILED, str(exc))
        return host_report(target, outcome, recording.duration_s)

    async def open_shell(self, target: Target) -> Shell | Outcome:
        """A recording holds probe answers, not a machine: no command runs."""
        return Outcome(HostStatus.NOT_CHECKABLE, f"{target.name} is a recorded pod: no command runs on it")


def load_recordings(folder: Path) -> list[Recording]:
    """The recordings in `folder`, in file-name order; ConfigError names the first bad one."""
    if not folder.is_dir():
        raise ConfigError(f"--replay {folder}: not a folder of recordings")
    recordings = [_load(path) for path in sorted(folder.glob("*.json"))]
    if not recordings:
        raise ConfigError(f"--replay {folder}: no recordings (*.json) in it")
    seen: set[str] = set()
    for recording in recordings:
        if recording.target.name in seen:
            raise ConfigError(f"--replay {folder}: {recording.target.name} is recorded twice")
        seen.add(recording.target.name)
    return recordings


def _load(path: Path) -> Recording:
    raw = read_config_bytes(path, "recording", limit=MAX_RECORDING_BYTES)
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("recording") != RECORDING_VERSION:
        raise ConfigError(f"{path}: not a version-{RECORDING_VERSION} recording")
    try:
        target = Target.model_validate(document.get("target"))
        status = HostStatus(document.get("status"))
    except (ValidationError, ValueError) as exc:
        raise ConfigError(f"{path}: bad target or status: {str(exc).splitlines()[0]}") from None
    duration = document.get("duration_s")
    output = document.get("probe_output")
    reason = document.get("reason")
    detail = document.get("detail")
    if (
        not isinstance(duration, (int, float))
        or not isinstance(output, str)
        or not isinstance(reason, str)
        or not isinstance(detail, (str, type(None)))
    ):
        raise ConfigError(f"{path}: duration_s, probe_output, reason or detail is missing or of the wrong type")
    return Recording(
        target=target, status=status, reason=reason, detail=detail, duration_s=float(duration), probe_output=output
    )


def record_run(folder: Path, targets: list[Target], hosts: list[HostReport]) -> None:
    """Write a live run as a recording: one file a target, numbered in the run's order and
    named by files.file_name_for (a name with `/` or `..` stays one file in the folder).

    The probe output kept is the facts document as it was parsed (the keys the probe sent)."""
    folder.mkdir(parents=True, exist_ok=True)
    width = len(str(len(targets)))
    for index, (target, host) in enumerate(zip(targets, hosts), start=1):
        output = ""
        if host.facts is not None:
            output = json.dumps(host.facts.model_dump(mode="json", exclude_unset=True), sort_keys=True)
        document = {
            "recording": RECORDING_VERSION,
            "target": target.model_dump(mode="json", exclude_defaults=True),
            "status": host.status.value,
            "reason": host.reason or "",
            "detail": None,
            "duration_s": host.duration_s or 0.0,
            "probe_output": output,
        }
        write_output(
            json.dumps(document, indent=1, sort_keys=True) + "\n",
            folder / f"{index:0{width}d}-{file_name_for(target.name)}.json",
        )
