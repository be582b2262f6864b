"""Webhook payloads for `fleet check --notify URL`: a Slack/Mattermost incoming-webhook
message (`text` plus Block Kit `blocks`), or the report summary and changes as JSON.

Slack's limits: 50 blocks, 3000 characters in a section, 150 in a header; Mattermost shows
only `text` and cuts it at 16383 characters, Slack recommends 4000. Pod strings are cleaned
and `& < >` escaped, as Slack's mrkdwn wants, so a pod cannot forge a link or a mention.

render.views (and the evaluator's check areas it reads) is loaded when a payload is made:
every command that prints a report imports PAYLOADS for its --notify-format choices, doctor
before its probe starts.
"""

from __future__ import annotations

import json
from typing import Any

from computefence.models import Fix, Report, Severity
from computefence.text import one_line

TEXT_LIMIT = 4000
SECTION_LIMIT = 3000
HEADER_LIMIT = 150
MAX_BLOCKS = 50
_ICON = {Severity.BLOCK: ":red_circle:", Severity.WARN: ":warning:", Severity.PASS: ":large_green_circle:"}
_CHANGE_ICON = {True: ":red_circle:", False: ":large_green_circle:", None: ":white_small_square:"}


def _esc(text: object) -> str:
    return one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(text: object) -> str:
    return "`" + _esc(text).replace("`", "'") + "`"


def _fix(fix: Fix | None) -> str:
    """'\nfix: `cmd`' per command, '\nnote: advice' for what no command does; '' without a fix."""
    if fix is None:
        return ""
    out = [f"\nfix: {_code(command)}" for command in fix.commands]
    if fix.advice:
        out.append(f"\nnote: {_esc(fix.advice)}")
    return "".join(out)


def _lines(report: Report) -> list[str]:
    """One mrkdwn line per change, or without a change section, per blocked or unchecked pod."""
    from computefence.render import views

    if report.changes is not None:
        out = []
        for line in views.change_lines(report.changes):
            out.append(
                f"{_CHANGE_ICON[line.worse]} {_esc(line.label)} *{_esc(line.host)}*: {_esc(line.text)}" + _fix(line.fix)
            )
        return out
    out = []
    for host in report.hosts:
        if host.blockers:
            checks = ", ".join(_esc(f.check) for f in host.blocking_findings)
            fix = next((f.fix for f in host.blocking_findings if f.fix), None)
            out.append(f"{_ICON[Severity.BLOCK]} *{_esc(host.name)}*: {checks}" + _fix(fix))
        elif host in views.not_ok_hosts(report):
            out.append(
                f"{_ICON[Severity.BLOCK]} *{_esc(host.name)}*: {_esc(host.status.value)}: {_esc(host.reason or '')}"
            )
    return out


def _headline(report: Report) -> str:
    from computefence.render import views

    return f"ComputeFence fleet check: {views.verdict_word(report)}"


def _summary(report: Report) -> str:
    from computefence.render import views

    parts = [views.verdict_detail(report)]
    money = views.money_line(report)
    if money:
        parts.append(money)
    if report.changes is not None:
        parts.append(f"{views.since_title(report.changes)}: {views.changes_count_line(report.changes)}")
    return " · ".join(_esc(p) for p in parts)


def slack(report: Report) -> dict[str, Any]:
    """Slack/Mattermost incoming-webhook payload."""
    lines = _lines(report)
    text = _cut(
        "\n".join([f"{_ICON[report.summary.verdict]} *{_esc(_headline(report))}*", _summary(report), *lines]),
        TEXT_LIMIT,
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(_headline(report), HEADER_LIMIT)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(_summary(report), SECTION_LIMIT)}},
    ]
    room = MAX_BLOCKS - len(blocks) - 1  # one left for "and N more"
    for line in lines[:room]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(line, SECTION_LIMIT)}})
    if len(lines) > room:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"… and {len(lines) - room} more; see the full report"}],
            }
        )
    return {"text": text, "blocks": blocks}


def summary_json(report: Report) -> dict[str, Any]:
    """The report's summary and changes, without the facts."""
    return {
        "tool": "computefence",
        "tool_version": report.tool_version,
        "schema_version": report.schema_version,
        "generated_at": report.generated_at,
        "verdict": report.summary.verdict.value,
        "summary": json.loads(report.summary.model_dump_json()),
        "changes": json.loads(report.changes.model_dump_json()) if report.changes is not None else None,
    }


PAYLOADS = {"slack": slack, "json": summary_json}
