"""What `fleet release` prints: one entry per selected pod (the plan, or each
provider's answer), then the money it saves. Text from reports and APIs goes in cleaned."""

from __future__ import annotations

import json
from collections import Counter

from rich.console import RenderableType
from rich.text import Text

from computefence.models import ReleasePod, ReleaseReport
from computefence.render.columns import Hanging
from computefence.render.console import console_text
from computefence.text import clean, one_line, plural

RELEASE_FORMATS = ("rich", "json")

_DONE = {"stop": "stopped", "terminate": "terminated"}
_LABEL = {
    "would_release": "would {action}",
    "released": "{done}",
    "already_stopped": "already stopped",
    "gone": "gone",
    "changed": "changed",
    "refused": "refused",
    "failed": "FAILED",
}
_STYLE = {
    "would_release": "bold yellow",
    "released": "bold green",
    "already_stopped": "green",
    "gone": "green",
    "changed": "bold magenta",
    "refused": "dim",
    "failed": "bold red",
}
_SAVES = ("would_release", "released")


def render_release(result: ReleaseReport, fmt: str, *, color: bool = False, width: int = 100, title: str = "") -> str:
    if fmt == "json":
        return json.dumps(result.model_dump(mode="json"), indent=2) + "\n"
    return console_text(_rich(result, title), color=color, width=width)


def label(pod: ReleasePod) -> str:
    action = pod.action or "release"
    return _LABEL[pod.outcome].format(action=action, done=_DONE.get(action, "released"))


def _rich(result: ReleaseReport, title: str) -> list[RenderableType]:
    head = Text("ComputeFence fleet release", style="bold")
    head.append(" · plan" if result.dry_run else " · acting")
    if title:
        head.append(f" · {clean(title)}", style="dim")
    out: list[RenderableType] = [head, Text()]
    if not result.pods:
        out.append(Text("No pod to release: no provider pod is blocked by a machine fault (or by the --checks named)."))
        return out
    width = max(len(label(p)) for p in result.pods)
    for pod in result.pods:
        where = " ".join(x for x in (pod.provider, pod.pod_id) if x)
        price = f"${pod.cost_per_hour:.2f}/h" if pod.cost_per_hour is not None else None
        body = Text.assemble((clean(pod.name), "bold"), f" ({', '.join(x for x in (clean(where), price) if x)})")
        body.append(f" · {clean(', '.join(pod.selected_by))}", style="cyan")
        if not (result.dry_run and pod.outcome == "would_release"):
            body.append(f": {one_line(pod.detail, 400)}")
        out.append(Hanging(Text(label(pod).ljust(width + 1), style=_STYLE[pod.outcome]), body, under=4))
        if result.dry_run and pod.outcome == "would_release":
            for reason in pod.reasons:
                out.append(Hanging(Text("    "), Text(one_line(reason, 400), style="dim")))
            # The call is pasted or read as is: never folded.
            call = Text("    call: ", style="dim", no_wrap=True)
            call.append(clean(pod.detail))
            out.append(call)
    out += [Text(), Text(clean(summary_line(result)), style="bold")]
    return out


def summary_line(result: ReleaseReport) -> str:
    counts = Counter(pod.outcome for pod in result.pods)
    saved = sum(p.cost_per_hour or 0.0 for p in result.pods if p.outcome in _SAVES)
    refused = f"; {counts['refused']} refused" if counts.get("refused") else ""
    if result.dry_run:
        n = counts.get("would_release", 0)
        if not n:
            return f"Plan: nothing to release{refused}."
        return f"Plan: {plural(n, 'pod')} to release, saving ${saved:.2f}/h{refused}; nothing was called."
    parts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in counts.items())
    if not counts.get("released"):
        return f"{parts}: nothing released."
    return f"{parts}: ${saved:.2f}/h no longer billed for GPUs."
