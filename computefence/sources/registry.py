"""Provider discovery: `--provider runpod,vast,lambda` -> sources that list pods as targets.

Base URLs: the `api_url` argument (the CLI's --api-url), else RUNPOD_API_BASE_URL (the runpod
SDK's own variable), VAST_URL (or the older VAST_API_URL) or LAMBDA_API_URL, else the provider's production API.
Each provider module is imported when its source is asked for, so the runpod SDK loads only for RunPod.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from computefence.errors import ConfigError, SourceError
from computefence.models import Target
from computefence.sources.interface import TargetSource

if TYPE_CHECKING:
    from computefence.http import RetryPolicy

# The providers by name: where each one's TargetSource class lives ("module:Class"). The
# class takes (api_url=None, *, policy=None). A new provider is one module and one row here.
PROVIDERS: dict[str, str] = {
    "runpod": "computefence.sources.runpod:RunPodSource",
    "vast": "computefence.sources.vast:VastSource",
    "lambda": "computefence.sources.lambda_cloud:LambdaSource",
}
PROVIDER_NAMES: tuple[str, ...] = tuple(PROVIDERS)


def provider_source(name: str, api_url: str | None = None, *, policy: RetryPolicy | None = None) -> TargetSource:
    """The discovery source for one provider; `api_url` overrides the API base URL."""
    where = PROVIDERS.get(name.strip().lower())
    if where is None:
        raise ConfigError(f"unknown provider {name!r}: choose from {', '.join(PROVIDERS)}")
    module, _, cls = where.partition(":")
    source: TargetSource = getattr(importlib.import_module(module), cls)(api_url=api_url, policy=policy)
    return source


@dataclass
class Listing:
    """A provider's pods as it lists them now, by pod id; or why it could not be listed."""

    targets: dict[str, Target] = field(default_factory=dict)
    error: str | None = None


def list_again(source: TargetSource) -> Listing:
    """The provider's pods now (before acting on them, or to see which are gone)."""
    try:
        found = source.targets()
    except SourceError as exc:
        return Listing(error=str(exc))
    return Listing(targets={t.provider.pod_id: t for t in found if t.provider is not None})


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
        listing = list_again(provider_source(provider, api_url, policy=policy))
        if listing.error is not None:
            continue
        current = listing.targets
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
