"""The question before an action: the plan in full first (each target and what will run
there), then `[y/N]`. `fleet fix --apply`, `doctor --fix`, `fleet release`, `fleet drain`
and `fleet resume` ask it the same way. Without a terminal nobody can answer: a usage error
before anything is changed, unless the command was given --yes."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from computefence.errors import ConfigError
from computefence.text import clean


def ask_after_plan(plan: str, question: str, *, no_terminal: str, declined: str) -> bool:
    """Print `plan` and then `question [y/N]` on stderr, and read the answer. `no_terminal` is
    the usage error where stdin is no terminal; `declined` the line said when the answer is no."""
    if not sys.stdin.isatty():
        raise ConfigError(no_terminal)
    print(plan.rstrip("\n") + "\n", file=sys.stderr)
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() in ("y", "yes"):
        return True
    print(f"computefence: {declined}", file=sys.stderr)
    return False


def action_mode(yes: bool, dry_run: bool) -> str:
    """The mode of an action: "yes" (act without asking), "dry-run" (the plan only) or "ask"
    (the plan, then the question)."""
    if yes and dry_run:
        raise ConfigError("--yes acts and --dry-run only plans: give one of them")
    return "yes" if yes else "dry-run" if dry_run else "ask"


def some_names(names: Sequence[str], shown: int = 3) -> str:
    """`a, b, c and 2 more`: the targets a question is about, cleaned for the terminal."""
    more = len(names) - shown
    return ", ".join(clean(n) for n in names[:shown]) + (f" and {more} more" if more > 0 else "")
