"""The --policy/--no-policy/--baseline options that `doctor`, `fleet check`, `fleet
snapshot` and `report` share, and the baseline lock they write (as cli/targets.py holds the
target options)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from computefence.files import write_output
from computefence.models import BaselineLock
from computefence.policy import ENV_VAR, POLICY_FILE

_PANEL = "Policy"
PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        metavar="FILE",
        envvar=ENV_VAR,
        rich_help_panel=_PANEL,
        help=f"The job's policy (default: {POLICY_FILE} here or in a parent folder, up to the repository root or $HOME).",
    ),
]
NoPolicyOpt = Annotated[bool, typer.Option("--no-policy", rich_help_panel=_PANEL, help=f"Ignore any {POLICY_FILE}.")]
BaselineOpt = Annotated[
    Path | None,
    typer.Option(
        "--baseline",
        metavar="FILE",
        rich_help_panel=_PANEL,
        help="A lock from `fleet snapshot`: each pod gets an env.drift finding naming what moved (default: the policy's `baseline:`).",
    ),
]


def write_lock(lock: BaselineLock, path: Path) -> None:
    """The lock as stable, indented JSON (fields in schema order), so it diffs cleanly in git."""
    write_output(lock.model_dump_json(indent=2) + "\n", path)
    print(f"computefence: wrote {baseline_words(lock)} to {path}", file=sys.stderr)


def baseline_words(lock: BaselineLock) -> str:
    """'the baseline of pod-a' (--from: reference 'pod pod-a'), 'the majority baseline of 5 pods'."""
    if lock.reference.startswith("pod "):
        return f"the baseline of {lock.reference.removeprefix('pod ')}"
    if len(lock.pods) == 1:
        return f"the baseline of {lock.pods[0]}"
    return f"the majority baseline of {len(lock.pods)} pod{'' if len(lock.pods) == 1 else 's'}"
