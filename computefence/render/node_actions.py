"""What `fleet drain` and `fleet resume` print: one entry per node (the plan, with
its exact commands, or how each call went), then a summary line. Text from reports and
from Slurm goes in cleaned."""

from __future__ import annotations

import json
from collections import Counter

from rich.console import RenderableType
from rich.text import Text

from computefence.models import NodeAction, NodeActionReport
from computefence.render.columns import Hanging
from computefence.render.console import console_text
from computefence.text import clean, one_line, plural

NODE_ACTION_FORMATS = ("rich", "json")

_LABEL = {
    "planned": "would {action}",
    "drained": "drained",
    "resumed": "resumed",
    "kept_drained": "KEPT DRAINED",
    "already_drained": "already drained",
    "not_drained": "not drained",
    "left_alone": "left alone",
    "gone": "gone",
    "failed": "FAILED",
}
_STYLE = {
    "planned": "bold yellow",
    "drained": "bold green",
    "resumed": "bold green",
    "kept_drained": "bold red",
    "already_drained": "green",
    "not_drained": "dim",
    "left_alone": "dim",
    "gone": "dim",
    "failed": "bold red",
}


def render_node_actions(
    result: NodeActionReport, fmt: str, *, color: bool = False, width: int = 100, title: str = ""
) -> str:
    if fmt == "json":
        return json.dumps(result.model_dump(mode="json"), indent=2) + "\n"
    return console_text(_rich(result, title), color=color, width=width)


def label(node: NodeAction) -> str:
    return _LABEL[node.outcome].format(action=node.action)


def _rich(result: NodeActionReport, title: str) -> list[RenderableType]:
    head = Text(f"ComputeFence fleet {result.kind}", style="bold")
    head.append(" · plan" if result.dry_run else " · acting")
    if title:
        head.append(f" · {clean(title)}", style="dim")
    out: list[RenderableType] = [head, Text()]
    if not result.nodes:
        what = "blocked by a machine fault" if result.kind == "drain" else "of the report"
        out.append(Text(f"No Slurm node {what}: nothing to {result.kind}."))
        return out
    width = max(len(label(n)) for n in result.nodes)
    for node in result.nodes:
        body = Text(clean(node.name), style="bold")
        if node.selected_by:
            body.append(f" · {clean(', '.join(node.selected_by))}", style="cyan")
        if node.detail:
            body.append(f": {one_line(node.detail, 400)}")
        out.append(Hanging(Text(label(node).ljust(width + 1), style=_STYLE[node.outcome]), body, under=4))
        for reason in node.reasons if node.outcome == "planned" else ():
            out.append(Hanging(Text("    "), Text(one_line(reason, 400), style="dim")))
        for command in node.commands if node.outcome == "planned" else ():
            # Pasted or read as is: never folded.
            line = Text("    $ ", style="dim", no_wrap=True)
            line.append(clean(command))
            out.append(line)
    out += [Text(), Text(clean(summary_line(result)), style="bold")]
    return out


def summary_line(result: NodeActionReport) -> str:
    counts = Counter(node.outcome for node in result.nodes)
    if result.dry_run:
        n = counts.get("planned", 0)
        if not n:
            return f"Plan: nothing to {result.kind}."
        return f"Plan: {plural(n, 'node')} to {'drain' if result.kind == 'drain' else 'prove and resume'}; nothing was run."
    return ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in counts.items()) + "."
