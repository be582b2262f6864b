"""A small bounded-retry JSON client for provider APIs, and the bounded read webhooks share.

Every failure becomes a one-line SourceError that names the provider and says what to do.
Every request has a total deadline (connecting, sending, headers and body together, not
per read: a server trickling a byte a second costs its timeout and no more) and reads at
most MAX_BODY_BYTES of body (a server sending 200 MB costs 1 MiB of memory).
The API key travels only in the Authorization header: it is never part of a URL, a message,
a repr or a log line, and any text a server echoes back is scrubbed of it before it is shown.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from computefence import jsontext
from computefence.errors import ConfigError, SourceError
from computefence.redaction import redact
from computefence.text import one_line
from computefence.version import __version__

T = TypeVar("T")

# Longest server-provided text quoted in an error message.
_QUOTE_CHARS = 160
# The most body any API or webhook answer may hold; a provider's pod list is far below it.
MAX_BODY_BYTES = 1 << 20


class DeadlinePassed(Exception):
    """The request's total time ran out (raised in the caller's thread)."""


class BodyTooLarge(Exception):
    """The server sent more than the cap."""


def within_deadline(seconds: float, work: Callable[[Callable[[], bool]], T]) -> T:
    """`work(expired)` in a daemon thread, its result or exception; DeadlinePassed after `seconds`.

    Socket timeouts count per read, so a trickling server would never trip them: the caller
    waits for the whole exchange instead. A worker left behind stops at its next chunk
    (`expired()` is true) or at its own socket timeout, and holds at most the body cap."""
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work(done.is_set)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="computefence-http", daemon=True).start()
    if not done.wait(seconds):
        done.set()
        raise DeadlinePassed(f"no complete answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def read_capped(
    chunks: Iterable[bytes], expired: Callable[[], bool], cap: int = MAX_BODY_BYTES, *, truncate: bool = False
) -> bytes:
    """The chunks joined; past `cap` bytes BodyTooLarge (or, with `truncate`, the first `cap`
    bytes and no more reading); DeadlinePassed once `expired()`."""
    body = bytearray()
    for chunk in chunks:
        if expired():
            raise DeadlinePassed("deadline passed while reading the body")
        body += chunk
        if len(body) > cap:
            if truncate:
                return bytes(body[:cap])
            raise BodyTooLarge(f"more than {cap // 1024} KiB")
    return bytes(body)


def decoded_body(body: bytes, encoding: str | None, cap: int = MAX_BODY_BYTES) -> bytes:
    """`body` decoded by its Content-Encoding (we ask for identity; a server may gzip anyway),
    never to more than `cap` bytes: a 1 MiB gzip bomb is not 1 GB of memory."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate", "x-gzip"):
        raise BodyTooLarge(f"a body in the {encoding!r} encoding, which is not read")
    try:
        out = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(body, cap + 1)
    except zlib.error:
        raise BodyTooLarge(f"a {encoding} body that does not decode") from None
    if len(out) > cap:
        raise BodyTooLarge(f"more than {cap // 1024} KiB once decoded")
    return out


def bounded_request(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    deadline_s: float,
    cap: int = MAX_BODY_BYTES,
    truncate: bool = False,
    **kwargs: Any,
) -> tuple[int, httpx.Headers, bytes]:
    """(status, headers, body) of one request done within `deadline_s` in all, body capped.
    httpx.TimeoutException when the deadline passes, BodyTooLarge past the cap (with
    `truncate`, for a caller that needs only the status: the first `cap` bytes)."""

    def work(expired: Callable[[], bool]) -> tuple[int, httpx.Headers, bytes]:
        with client.stream(method, url, **kwargs) as response:
            # A transport that hands over a body already in memory (httpx.MockTransport) has no stream left.
            chunks = [response.content] if response.is_stream_consumed else response.iter_raw()
            raw = read_capped(chunks, expired, cap, truncate=truncate)
            if truncate:
                return response.status_code, response.headers, raw
            return response.status_code, response.headers, decoded_body(raw, response.headers.get("Content-Encoding"))

    try:
        return within_deadline(deadline_s, work)
    except DeadlinePassed as exc:
        raise httpx.ReadTimeout(str(exc)) from None


def iter_chunks(read: Callable[[int], bytes], size: int = 65536) -> Iterator[bytes]:
    """A file-like `read` as chunks up to its end."""
    while chunk := read(size):
        yield chunk


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try before giving up on a provider API."""

    # Tries in all for a retryable failure (429, 5xx, timeout, connection error); with the
    # defaults an API that never answers fails the source after about 33 s.
    attempts: int = 3
    timeout_s: float = 10.0
    # Backoff before the 2nd try; doubles each time up to max_backoff_s.
    backoff_s: float = 1.0
    max_backoff_s: float = 8.0
    # A Retry-After longer than this is not waited for: the source fails with the wait in the message.
    max_retry_after_s: float = 30.0
    # Least time between two requests (Lambda Cloud allows about one request a second).
    min_interval_s: float = 0.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def backoff(self, failures: int) -> float:
        return min(self.backoff_s * 2.0 ** (failures - 1), self.max_backoff_s)


# A run this long of the key, in any case or reversed, is the key echoed back.
_SECRET_RUN = 8


def scrub(text: str, secret: str | None) -> str:
    """`text` on one line, shortened, with `secret` removed: the exact key, and any run of
    _SECRET_RUN or more of its characters, in any case, forwards or reversed (an API that
    echoes the key lowercased, reversed or cut to a prefix); then any other secret it holds
    (computefence.redaction: another key, a password, credentials in a URL)."""
    if secret:
        text = _redact_runs(text.replace(secret, "[redacted]"), secret)
    return one_line(redact(text), _QUOTE_CHARS)


def _redact_runs(text: str, secret: str) -> str:
    if len(secret) < _SECRET_RUN:
        return text
    forms = (secret.lower(), secret.lower()[::-1])
    starts = {form[i : i + _SECRET_RUN] for form in forms for i in range(len(form) - _SECRET_RUN + 1)}
    lowered = text.lower()
    out, i, copied = [], 0, 0
    while i <= len(lowered) - _SECRET_RUN:
        if lowered[i : i + _SECRET_RUN] not in starts:
            i += 1
            continue
        end = i + _SECRET_RUN
        while end < len(lowered) and any(lowered[i : end + 1] in form for form in forms):
            end += 1
        out.append(text[copied:i] + "[redacted]")
        i = copied = end
    out.append(text[copied:])
    return "".join(out)


def check_base_url(url: str, provider: str) -> str:
    """A base URL without its trailing slash; ConfigError if it is not http(s)."""
    url = url.strip().rstrip("/")
    try:
        host = httpx.URL(url).host if url.startswith(("http://", "https://")) else ""
    except httpx.InvalidURL:
        host = ""
    if not host:
        raise ConfigError(f"{provider} API URL {url!r} is not an http:// or https:// URL")
    return url


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())


def error_detail(body: bytes, secret: str | None) -> str:
    """The human part of a JSON error body, scrubbed; "" when there is none."""
    try:
        return error_text(json.loads(body), secret)
    except ValueError:
        return ""


def error_text(data: Any, secret: str | None) -> str:
    """The message of a parsed API error: Vast `msg`/`error`, Lambda `error.message`, GraphQL `errors[0].message`."""
    parts: list[str] = []
    if isinstance(data, Mapping):
        err = data.get("error")
        if isinstance(err, Mapping):
            parts += [str(err[k]) for k in ("message", "suggestion") if isinstance(err.get(k), str)]
        elif isinstance(err, str):
            parts.append(err)
        parts += [str(data[k]) for k in ("msg", "detail", "message") if isinstance(data.get(k), str)]
        errors = data.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
            parts += [str(errors[0]["message"])] if isinstance(errors[0].get("message"), str) else []
    return scrub(": ".join(parts), secret)


class Retry(Exception):
    """A retryable failure: what to say if it is the last one, and the server's wish for a wait."""

    def __init__(self, message: str, wait_s: float | None = None):
        super().__init__(message)
        self.message = message
        self.wait_s = wait_s


def call_with_retries(provider: str, policy: RetryPolicy, once: Callable[[], T]) -> T:
    """`once()` until it returns, raises something other than Retry, or the tries run out."""
    failures = 0
    while True:
        try:
            return once()
        except Retry as retry:
            failures += 1
            if failures >= policy.attempts:
                raise SourceError(f"{retry.message} after {failures} tries: retry later") from None
            wait = retry.wait_s if retry.wait_s is not None else policy.backoff(failures)
            if wait > policy.max_retry_after_s:
                raise SourceError(
                    f"{provider} API is rate limiting (HTTP 429) and asks to wait {wait:.0f} s, "
                    f"more than {policy.max_retry_after_s:.0f} s: retry later"
                ) from None
            policy.sleep(wait)


def raise_for_status(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    secret: str | None,
    key_help: str,
    base_url: str,
) -> None:
    """Nothing for HTTP 200; SourceError for a final failure; Retry for 429 and 5xx."""
    if status == 200:
        return
    detail = error_detail(body, secret)
    suffix = f" ({detail})" if detail else ""
    if status == 401:
        raise SourceError(f"{provider} API rejected the API key (HTTP 401){suffix}: {key_help}")
    if status == 403:
        raise SourceError(
            f"{provider} API refused access (HTTP 403){suffix}: "
            f"check that the key may list instances and the account is active; {key_help}"
        )
    if status == 429:
        raise Retry(
            f"{provider} API kept rate limiting (HTTP 429)", wait_s=retry_after_seconds(headers.get("Retry-After"))
        )
    if status >= 500:
        raise Retry(f"{provider} API failed with HTTP {status}{suffix}")
    raise SourceError(f"{provider} API answered HTTP {status}{suffix}: check the API URL ({base_url})")


class ApiClient:
    """GET JSON from one provider API with a bearer key, bounded retries and one-line errors.

    Use it as a context manager: one connection pool serves all the pages of a listing.
    """

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: str,
        *,
        key_help: str,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url
        self._key = api_key
        # What the user should do about a rejected key, e.g. "check VAST_API_KEY".
        self._key_help = key_help
        self.policy = policy or RetryPolicy()
        self._last_request: float | None = None
        self._client = httpx.Client(
            timeout=self.policy.timeout_s,
            headers={
                "Authorization": f"Bearer {api_key}",
                "Accept": "application/json",
                "Accept-Encoding": "identity",
                "User-Agent": f"computefence/{__version__}",
            },
            follow_redirects=False,
            # Tests hand in an httpx.MockTransport; None is httpx's own network transport.
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"ApiClient(provider={self.provider!r}, base_url={self.base_url!r})"

    def error_text(self, data: Any) -> str:
        """error_text() of a parsed body, scrubbed of this client's key."""
        return error_text(data, self._key)

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        url = self.base_url + path
        return call_with_retries(self.provider, self.policy, lambda: self._once("GET", url, params)[1])

    def send_json(self, method: str, path: str, body: Any = None, *, answered: tuple[int, ...] = ()) -> tuple[int, Any]:
        """(status, parsed body) of a request that changes something, with the same retries
        (every call made through here is idempotent: stop, destroy, terminate). A status in
        `answered` (a 404 meaning "gone") comes back instead of raising; its body may be None."""
        url = self.base_url + path
        return call_with_retries(self.provider, self.policy, lambda: self._once(method, url, None, body, answered))

    def _once(
        self,
        method: str,
        url: str,
        params: Mapping[str, str] | None,
        body: Any = None,
        answered: tuple[int, ...] = (),
    ) -> tuple[int, Any]:
        policy = self.policy
        if self._last_request is not None and policy.min_interval_s > 0:
            gap = self._last_request + policy.min_interval_s - time.monotonic()
            if gap > 0:
                policy.sleep(gap)
        where = f"{self.provider} API at {self.base_url}"
        try:
            status, headers, content = bounded_request(
                self._client, method, url, deadline_s=policy.timeout_s, params=params, json=body
            )
        except httpx.TimeoutException:
            raise Retry(f"{where} did not answer within {policy.timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise Retry(f"cannot reach {where} ({scrub(str(exc) or type(exc).__name__, self._key)})") from None
        except BodyTooLarge as exc:
            raise SourceError(f"{where} sent {exc} of answer: check the API URL") from None
        finally:
            # Spaced from the end of the last request, so arrivals at the API are spaced too.
            self._last_request = time.monotonic()
        if status in answered:
            try:
                return status, jsontext.loads(content)
            except ValueError:
                return status, None
        raise_for_status(self.provider, status, headers, content, self._key, self._key_help, self.base_url)
        try:
            return status, jsontext.loads(content)
        except ValueError:
            kind = headers.get("Content-Type", "no content type").split(";")[0]
            raise SourceError(
                f"{where} returned a body that is not JSON ({kind}): check the API URL or retry later"
            ) from None


def url_problem(url: str) -> str | None:
    """Why `url` cannot be posted to, in words that never quote it (it may be a secret); None if it can.
    Checked by both parsers a delivery meets (urllib's and httpx's), so none fails later."""
    url = url.strip()
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "holds a blank or control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is not a number in 0-65535)
        parsed = httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname or not parsed.host:
        return "is not an http:// or https:// URL"
    return None
