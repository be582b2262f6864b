"""What the provider modules (runpod, vast, lambda_cloud) share: base URLs, API keys, target
names and lenient readers of API values. The registry that picks a provider's source is
computefence.sources.registry, which imports those modules; this one imports none of them.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from computefence.errors import ConfigError
from computefence.http import ApiClient, RetryPolicy, check_base_url

_Held = TypeVar("_Held", bound="HeldClient")


class HeldClient:
    """A provider source that keeps one ApiClient for every call between __enter__ and
    __exit__ (listings included), so the provider's pacing (Lambda: a request a second) spans
    them all; outside a `with`, each call makes its own."""

    default_policy = RetryPolicy()
    # The provider's name in messages, and where its API key is and how to get one.
    title: str
    key_env: str
    key_how_to: str
    # What to check when the API refuses the key.
    key_help: str
    # The base URL: --api-url, else the first of these variables that is set, else default_api.
    url_envs: tuple[str, ...]
    default_api: str
    # The shape of the provider's pod ids: only ids of this shape are ever sent.
    pod_id_shape: re.Pattern[str]

    def __init__(
        self,
        api_url: str | None = None,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url
        self.transport = transport
        self.policy = policy or self.default_policy
        self._api: ApiClient | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(api_url={self.api_url!r})"

    def _base(self) -> str:
        url_env = next((name for name in self.url_envs if os.environ.get(name)), self.url_envs[0])
        return base_url(self.title, self.api_url, url_env, self.default_api)

    def accepts(self, pod_id: str) -> bool:
        return self.pod_id_shape.fullmatch(pod_id) is not None

    def key_files(self) -> list[Path]:
        """Files that may hold the key when `key_env` is not set, in the order they are read."""
        return []

    def _client(self) -> ApiClient:
        base = self._base()  # a bad URL is reported before a missing key
        key = find_api_key(self.title, self.key_env, self.key_files(), self.key_how_to)
        return ApiClient(self.title, base, key, key_help=self.key_help, policy=self.policy, transport=self.transport)

    def __enter__(self: _Held) -> _Held:
        self._api = self._client()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._api is not None:
            self._api.__exit__()
            self._api = None

    def _session(self) -> contextlib.AbstractContextManager[ApiClient]:
        return contextlib.nullcontext(self._api) if self._api is not None else self._client()


def base_url(provider: str, api_url: str | None, env_var: str, default: str) -> str:
    """`api_url`, else `env_var`, else `default`, checked and without a trailing slash."""
    return check_base_url(api_url or os.environ.get(env_var) or default, provider)


def find_api_key(provider: str, env_var: str, files: Iterable[Path], how_to: str) -> str:
    """The key from `env_var`, else the first key file that exists. No key is the user's own
    configuration to fix (ConfigError, exit 2, before anything connects), not a failing API."""
    key = os.environ.get(env_var, "").strip()
    if key:
        return key
    for path in files:
        try:
            key = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{provider}: cannot read the API key file {path} ({type(exc).__name__})") from None
        if key:
            return key
    where = " or ".join([env_var, *(str(p) for p in files)])
    raise ConfigError(f"{provider}: no API key found (looked in {where}): {how_to}")


def target_names(raw: Sequence[tuple[str | None, str]], provider: str) -> list[str]:
    """Stable, unique, shell-friendly names from (pod name, pod id) pairs.

    Unnamed pods are "<provider>-<id>"; names shared by several pods get "-<id>" appended.
    """
    cleaned = [re.sub(r"\s+", "-", (name or "").strip()) or f"{provider}-{pod_id}" for name, pod_id in raw]
    counts = Counter(cleaned)
    return [name if counts[name] == 1 else f"{name}-{pod_id}" for name, (_, pod_id) in zip(cleaned, raw)]


def as_int(value: object) -> int | None:
    """An API number as int, None when absent, not a number or beyond 2**63 (never a crash on odd data)."""
    number = as_float(value)
    return int(number) if number is not None and abs(number) < 2**63 else None


def as_float(value: object) -> float | None:
    """An API number as a finite float; None when absent, not a number, NaN or infinite."""
    try:
        number = None if value is None or isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is not None and math.isfinite(number) else None


def as_str(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
