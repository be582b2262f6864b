"""Fixtures for the provider discovery tests: the fake provider API and a clean environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_api import FakeProviderApi

from computefence.http import RetryPolicy

ENV_VARS = (
    "RUNPOD_API_KEY",
    "VAST_API_KEY",
    "LAMBDA_API_KEY",
    "RUNPOD_API_BASE_URL",
    "VAST_API_URL",
    "VAST_URL",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "LAMBDA_API_URL",
)


class SleepLog:
    """Stands in for time.sleep: records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepLog:
    return SleepLog()


@pytest.fixture
def fast(sleeps: SleepLog) -> RetryPolicy:
    """Three tries, a 1 s timeout, waits recorded rather than slept."""
    return RetryPolicy(
        attempts=3, timeout_s=1.0, backoff_s=0.5, max_backoff_s=2.0, max_retry_after_s=10.0, sleep=sleeps
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with no key files and no provider variables, and the runpod SDK's config file inside it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    from runpod.cli.groups.config import functions

    # The SDK resolves ~/.runpod/config.toml once, at import; point it into this HOME.
    monkeypatch.setattr(functions, "CREDENTIAL_FILE", str(home / ".runpod" / "config.toml"))
    return home


@pytest.fixture
def api(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderApi]:
    """The fake API running, with each provider's key exported as the user would."""
    with FakeProviderApi() as fake:
        monkeypatch.setenv("RUNPOD_API_KEY", fake.keys["runpod"])
        monkeypatch.setenv("VAST_API_KEY", fake.keys["vast"])
        monkeypatch.setenv("LAMBDA_API_KEY", fake.keys["lambda"])
        yield fake
