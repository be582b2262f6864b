"""Provider discovery: `--provider runpod,vast,lambda` -> sources that list pods as targets.

Base URLs: the `api_url` argument (the CLI's --api-url), else RUNPOD_API_BASE_URL (the runpod
SDK's own variable), VAST_URL (or the older VAST_API_URL) or LAMBDA_API_URL, else the provider's production API.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from computefence.errors import ConfigError, SourceError
from computefence.models import Target
from computefence.sources.http import RetryPolicy, check_base_url
from computefence.sources.interface import TargetSource

PROVIDER_NAMES: tuple[str, ...] = ("runpod", "vast", "lambda")


def provider_source(name: str, api_url: str | None = None, *, policy: RetryPolicy | None = None) -> TargetSource:
    """The discovery source for one provider; `api_url` overrides the API base URL."""
    key = name.strip().lower()
    if key == "runpod":
        from computefence.sources.runpod import RunPodSource

        return RunPodSource(api_url=api_url, policy=policy)
    if key == "vast":
        from computefence.sources.vast import VastSource

        return VastSource(api_url=api_url, policy=policy)
    if key == "lambda":
        from computefence.sources.lambda_cloud import LambdaSource

        return LambdaSource(api_url=api_url, policy=policy)
    raise ConfigError(f"unknown provider {name!r}: choose from {', '.join(PROVIDER_NAMES)}")


def recheck_vanished(
    targets: Sequence[Target],
    api_url: str | None = None,
    *,
    policy: RetryPolicy | None = None,
) -> dict[str, str]:
    """Re-list the providers of `targets` (pods that could not be reached) and say which are gone.

    For `fleet check`: a provider pod that ends unreachable, timed out or with a lost connection
    may have been stopped or terminated after discovery; the names returned here are VANISHED.

    Returns target name -> why it vanished: no longer listed, no longer running, or now at a
    different SSH address. Targets the provider still lists unchanged are left out, and so are
    all the targets of a provider whose API cannot be read now (nothing can be said about them).
    """
    by_provider: dict[str, list[Target]] = {}
    for target in targets:
        if target.provider is not None and target.provider.provider in PROVIDER_NAMES:
            by_provider.setdefault(target.provider.provider, []).append(target)
    vanished: dict[str, str] = {}
    for provider, mine in by_provider.items():
        try:
            now = provider_source(provider, api_url, policy=policy).targets()
        except SourceError:
            continue
        current = {t.provider.pod_id: t for t in now if t.provider is not None}
        for target in mine:
            pod_id = target.provider.pod_id  # type: ignore[union-attr]
            label = f"{provider} pod {pod_id}"
            fresh = current.get(pod_id)
            if fresh is None:
                vanished[target.name] = f"{label} is no longer listed by the provider (terminated since discovery)"
            elif fresh.unreachable_reason is not None:
                state = fresh.provider.state if fresh.provider else None
                vanished[target.name] = f"{label} stopped running since discovery (now {state or 'not running'})"
            elif (fresh.host, fresh.port) != (target.host, target.port):
                vanished[target.name] = f"{label} moved to {fresh.host}:{fresh.port} since discovery (restarted?)"
    return vanished


# ---------------------------------------------------------------- shared by the provider modules


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
    """An API number as int, None when absent or not a number (never a crash on odd data)."""
    try:
        return None if value is None or isinstance(value, bool) else int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def as_float(value: object) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def as_str(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def as_dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}
