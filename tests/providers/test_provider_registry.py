"""The provider registry, re-listing vanished pods, and the base install without the runpod SDK."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest
from fake_api import lambda_instance, runpod_pod, vast_instance

from computefence.errors import ConfigError
from computefence.http import check_base_url, retry_after_seconds, scrub
from computefence.sources.interface import TargetSource
from computefence.sources.providers import target_names
from computefence.sources.registry import PROVIDER_NAMES, provider_source, recheck_vanished


@pytest.mark.parametrize("name", [*PROVIDER_NAMES, " RunPod ", "VAST"])
def test_each_provider_is_a_target_source(name):
    source = provider_source(name)
    assert isinstance(source, TargetSource)
    assert source.name == name.strip().lower()


def test_unknown_provider():
    with pytest.raises(ConfigError, match=r"unknown provider 'aws': choose from runpod, vast, lambda"):
        provider_source("aws")


def test_names():
    raw = [("a b", "1"), (None, "2"), ("dup", "3"), ("dup", "4"), ("  ", "5")]
    assert target_names(raw, "vast") == ["a-b", "vast-2", "dup-3", "dup-4", "vast-5"]


def test_retry_after_forms():
    now = datetime(2025, 6, 3, 10, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("1.5") == 1.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds("Tue, 03 Jun 2025 10:00:30 GMT", now) == 30.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_scrub_and_urls():
    assert scrub("key=abc123\nsecond   line", "abc123") == "key=[redacted] second line"
    assert len(scrub("x" * 500, None)) == 160
    assert check_base_url(" https://cloud.lambda.ai/ ", "Lambda Cloud") == "https://cloud.lambda.ai"
    with pytest.raises(ConfigError, match="Lambda Cloud API URL 'cloud.lambda.ai'"):
        check_base_url("cloud.lambda.ai", "Lambda Cloud")
    for bad in ("http://", "https://[::1"):
        with pytest.raises(ConfigError):
            check_base_url(bad, "Vast.ai")


def test_recheck_vanished(api, fast, monkeypatch):
    api.runpod_pods = [runpod_pod("gone", "rp-gone"), runpod_pod("stays", "rp-stays"), runpod_pod("stops", "rp-stops")]
    api.vast_instances = [vast_instance(1, "moves", direct=("198.51.100.20", 40022))]
    api.lambda_instances = [lambda_instance("a" * 32, "lam")]
    for provider, var in (("runpod", "RUNPOD_API_BASE_URL"), ("vast", "VAST_API_URL"), ("lambda", "LAMBDA_API_URL")):
        monkeypatch.setenv(var, api.base_url(provider))
    discovered = [t for p in PROVIDER_NAMES for t in provider_source(p, policy=fast).targets()]

    api.runpod_pods = [runpod_pod("stays", "rp-stays"), runpod_pod("stops", "rp-stops", status="EXITED")]
    api.vast_instances = [vast_instance(1, "moves", direct=("198.51.100.20", 41022))]
    api.keys["lambda"] = "revoked"  # Lambda cannot be asked now: nothing is said about its pods

    vanished = recheck_vanished(discovered, policy=fast)
    assert vanished == {
        "rp-gone": "runpod pod gone is no longer listed by the provider (terminated since discovery)",
        "rp-stops": "runpod pod stops stopped running since discovery (now exited)",
        "moves": "vast pod 1 moved to 198.51.100.20:41022 since discovery (restarted?)",
    }


def test_base_install_does_not_import_the_runpod_sdk():
    code = (
        "import sys\n"
        "import computefence.cli, computefence.sources\n"
        "from computefence.sources.registry import provider_source\n"
        "for name in ('runpod', 'vast', 'lambda'): provider_source(name)\n"
        "print('runpod' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
