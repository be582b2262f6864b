"""What a renderer is: a pure function from a Report to text.

Renderers present; they never decide. Verdicts, counts and money at risk come from
report.summary and the findings the evaluator produced.
"""

from __future__ import annotations

from typing import Protocol

from computefence.models import Report


class Renderer(Protocol):
    def __call__(self, report: Report) -> str: ...
