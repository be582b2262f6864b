"""What a renderer is: one output format, its options given when it is made, and one
`render(report) -> str` (after pip-audit's _format/interface.py).

Every format takes the same options and uses those that mean something to it (width and
colour: the terminal; group-by: terminal and Markdown; quiet: the terminal), so no caller
special-cases a format. Renderers present; they never decide. Verdicts, counts and money at
risk come from report.summary and the findings the evaluator produced.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar

from computefence.models import Changes, Report

# The --group-by choices (terminal and Markdown).
GROUP_BY = ("check", "pod")


class Renderer(ABC):
    # Whether the format has colour, to be turned on when it goes to a terminal.
    colors: ClassVar[bool] = False
    # Whether it can show a comparison alone (`report diff`): render_changes.
    shows_changes: ClassVar[bool] = False

    def __init__(self, *, color: bool = False, width: int = 100, group_by: str = "check", quiet: bool = False):
        self.color, self.width, self.group_by, self.quiet = color, width, group_by, quiet

    @abstractmethod
    def render(self, report: Report) -> str:
        """The report as this format's text."""

    def render_chunks(self, report: Report) -> Iterable[str]:
        """The same text in pieces to write one after another (a large report need not be one string)."""
        return [self.render(report)]

    def render_changes(self, changes: Changes) -> str:
        """What changed between two runs, alone; only where shows_changes."""
        raise NotImplementedError(f"{type(self).__name__} does not show changes alone")
