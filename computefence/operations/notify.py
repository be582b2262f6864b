"""`fleet check --notify URL`: POST the run to chat or any webhook, when it matters.

The URL is a secret (a Slack webhook URL is its own credential): it is never printed,
logged or written; messages name only its host. A failed delivery is one warning line on
stderr and never changes the exit status: the report, not the alert, is the result.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from computefence.errors import ConfigError, SourceError
from computefence.models import Report
from computefence.policy import POLICY_FILE, NotifySettings
from computefence.version import __version__

if TYPE_CHECKING:
    from computefence.http import RetryPolicy

NOTIFY_ON = ("change", "always", "block")
TIMEOUT_S = 10.0
RETRIES = 3
# A Retry-After longer than this is not waited for: a cron run must end.
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class Webhook:
    url: str

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "?"

    def __repr__(self) -> str:  # never the URL
        return f"Webhook(host={self.host!r})"


def webhooks(urls: Sequence[str], origin: str = "--notify (or COMPUTEFENCE_NOTIFY)") -> list[Webhook]:
    """Checked URLs; ConfigError naming only the position of a bad one (its text may be a secret)."""
    if not urls:  # every run without alerts asks: httpx (70 ms) is not loaded for it
        return []
    from computefence.http import url_problem  # httpx: loaded only when there is a URL

    hooks = []
    for position, url in enumerate(urls, 1):
        problem = url_problem(url)
        if problem:
            raise ConfigError(f"{origin} URL #{position} {problem}")
        hooks.append(Webhook(url.strip()))
    return hooks


def wanted(report: Report, on: str) -> bool:
    """Whether this run is worth a message: `always`; `block` when the run fails;
    `change` when blockers appeared or cleared, or pods stopped or started answering or vanished
    (for fleet watch also when warnings appeared: a stalled or plateaued run costs its hours)."""
    # Imported here: every command that prints a report imports this module for NOTIFY_ON,
    # and these load the evaluator's GPU areas (~45 ms before doctor's probe starts).
    from computefence.evaluate.changes import newsworthy
    from computefence.evaluate.fleet import fails

    if on == "always":
        return True
    if on == "block":
        return fails(report.summary.verdict, report.fail_on)
    return report.changes is not None and newsworthy(report.changes, warnings=report.kind == "watch")


def notify(
    report: Report,
    hooks: Sequence[Webhook],
    payload: Callable[[Report], object],
    *,
    timeout_s: float = TIMEOUT_S,
    sleep: Callable[[float], None] | None = None,
) -> list[str]:
    """POST the payload to every hook; returns one warning line per hook that failed."""
    from computefence.http import RetryPolicy

    body = json.dumps(payload(report)).encode()
    policy = RetryPolicy(
        attempts=RETRIES + 1,
        timeout_s=timeout_s,
        max_retry_after_s=MAX_RETRY_AFTER_S,
    )
    if sleep is not None:
        policy = dataclasses.replace(policy, sleep=sleep)
    return [warning for hook in hooks if (warning := _deliver(hook, body, policy))]


def _deliver(hook: Webhook, body: bytes, policy: RetryPolicy) -> str | None:
    import httpx

    # httpx logs each request's URL at INFO: keep it out of any logging setup around us.
    logging.getLogger("httpx").setLevel(logging.WARNING)

    from computefence.http import Retry, bounded_request, call_with_retries, retry_after_seconds

    where = f"webhook at {hook.host}"

    def once() -> None:
        try:
            # Only the status matters: a webhook's body is read no further than 64 KiB.
            status, headers, _ = bounded_request(
                client, "POST", hook.url, deadline_s=policy.timeout_s, cap=1 << 16, truncate=True, content=body
            )
        except httpx.TimeoutException:
            raise Retry(f"{where} did not answer within {policy.timeout_s:g} s") from None
        except httpx.TransportError as exc:
            # The exception's text may quote the URL: only its kind is shown.
            raise Retry(f"cannot reach {where} ({type(exc).__name__})") from None
        if 200 <= status < 300:
            return
        if status == 429:
            raise Retry(
                f"{where} kept rate limiting (HTTP 429)",
                wait_s=retry_after_seconds(headers.get("Retry-After")),
            )
        if status >= 500:
            raise Retry(f"{where} failed with HTTP {status}")
        if 300 <= status < 400:
            raise SourceError(f"{where} answered a redirect (HTTP {status}), which is not followed: check the URL")
        raise SourceError(f"{where} refused the message (HTTP {status}): check the URL")

    try:
        with httpx.Client(
            timeout=policy.timeout_s,
            follow_redirects=False,
            headers={
                "Content-Type": "application/json",
                "Accept-Encoding": "identity",
                "User-Agent": f"computefence/{__version__}",
            },
        ) as client:
            call_with_retries(where, policy, once)
    except SourceError as exc:
        return f"computefence: warning: notification not delivered: {exc}"
    return None


@dataclass(frozen=True)
class Alerts:
    hooks: tuple[Webhook, ...]
    on: str
    fmt: str

    def send(self, report: Report, payloads: Mapping[str, Callable[[Report], object]]) -> None:
        """Notify when `on` says so, with the message `payloads[fmt]` makes (the renderers'
        render.webhook.PAYLOADS); failures are warnings on stderr only."""
        if wanted(report, self.on):
            for warning in notify(report, self.hooks, payloads[self.fmt]):
                print(warning, file=sys.stderr)


def alert_settings(
    urls: Sequence[str], on: str | None, fmt: str | None, policy: NotifySettings | None, *, history: bool
) -> Alerts | None:
    """The run's alerts from --notify* over the policy's `notify:`; None without any URL.
    ConfigError (before connecting) for a bad URL or `change` without a history to compare with."""
    settings = policy or NotifySettings()
    hooks = webhooks(urls) if urls else webhooks(settings.url, origin=f"{POLICY_FILE} notify:")
    if not hooks:
        return None
    on = on or settings.when or ("change" if history else "block")
    if on == "change" and not history:
        raise ConfigError(
            "--notify-on change compares with the last run: add --history DIR, or use --notify-on block or always"
        )
    return Alerts(tuple(hooks), on, fmt or settings.format or "slack")
