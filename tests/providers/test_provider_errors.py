"""Every way a provider API fails ends in one line that names the provider and what to do."""

from __future__ import annotations

import dataclasses
import socket

import pytest
from fake_api import Fault, lambda_instance, runpod_pod, vast_instance

from computefence.errors import ConfigError, SourceError
from computefence.sources.registry import provider_source

LABEL = {"runpod": "RunPod", "vast": "Vast.ai", "lambda": "Lambda Cloud"}
KEY_VAR = {"runpod": "RUNPOD_API_KEY", "vast": "VAST_API_KEY", "lambda": "LAMBDA_API_KEY"}
PROVIDERS = list(LABEL)


@pytest.fixture
def stocked(api):
    """The fake API with one running pod per provider."""
    api.runpod_pods = [runpod_pod("rp1", "rp-one")]
    api.vast_instances = [vast_instance(7, "vast-one")]
    api.lambda_instances = [lambda_instance("0920582c7ff041399e34823a0be62549", "lambda-one")]
    return api


def discover(api, provider, policy):
    return provider_source(provider, api.base_url(provider), policy=policy).targets()


def failure(api, provider, policy) -> str:
    with pytest.raises(SourceError) as err:
        discover(api, provider, policy)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(LABEL[provider]) or f" {LABEL[provider]} API" in message
    return message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_key_is_a_config_error_naming_the_variable_and_the_key_file(stocked, provider, fast, monkeypatch):
    monkeypatch.delenv(KEY_VAR[provider])
    with pytest.raises(ConfigError) as err:
        discover(stocked, provider, fast)
    message = str(err.value)
    assert "no API key found" in message and KEY_VAR[provider] in message and "\n" not in message
    # The key file each provider's own CLI writes (Lambda has none).
    assert {"runpod": ".runpod/config.toml", "vast": "vast_api_key", "lambda": "LAMBDA_API_KEY"}[provider] in message
    assert stocked.seen(provider) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rejected_key_401(stocked, provider, fast, monkeypatch):
    monkeypatch.setenv(KEY_VAR[provider], "not-the-right-key")
    message = failure(stocked, provider, fast)
    assert "rejected the API key (HTTP 401)" in message and KEY_VAR[provider] in message
    assert len(stocked.seen(provider)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_forbidden_403(stocked, provider, fast):
    body = b'{"error": {"code": "global/account-inactive", "message": "Your account is inactive."}}'
    stocked.fail(provider, Fault(403, body))
    message = failure(stocked, provider, fast)
    assert "refused access (HTTP 403) (Your account is inactive.)" in message
    assert KEY_VAR[provider] in message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_waits_as_retry_after_says_then_succeeds(stocked, provider, fast, sleeps):
    stocked.fail(provider, Fault(429, b'{"detail": "API requests too frequent"}', {"Retry-After": "3"}))
    assert len(discover(stocked, provider, fast)) == 1
    assert sleeps.waits == [3.0]
    assert len(stocked.seen(provider)) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_with_a_long_retry_after_fails_at_once(stocked, provider, fast, sleeps):
    stocked.fail(provider, Fault(429, b"slow down", {"Retry-After": "3600"}))
    message = failure(stocked, provider, fast)
    assert "rate limiting (HTTP 429) and asks to wait 3600 s, more than 10 s" in message
    assert sleeps.waits == [] and len(stocked.seen(provider)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_without_retry_after_backs_off_a_bounded_number_of_times(stocked, provider, fast, sleeps):
    stocked.fail(provider, Fault(429, b"{}"), times=5)
    message = failure(stocked, provider, fast)
    assert "kept rate limiting (HTTP 429) after 3 tries: retry later" in message
    assert sleeps.waits == [0.5, 1.0]
    assert len(stocked.seen(provider)) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_500_then_success(stocked, provider, fast, sleeps):
    stocked.fail(provider, Fault(500))
    assert len(discover(stocked, provider, fast)) == 1
    assert sleeps.waits == [0.5]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_5xx_until_the_tries_run_out(stocked, provider, fast):
    stocked.fail(provider, Fault(503, b"<html>Service Unavailable</html>", {"Content-Type": "text/html"}), times=3)
    message = failure(stocked, provider, fast)
    assert "failed with HTTP 503 after 3 tries: retry later" in message
    assert len(stocked.seen(provider)) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeouts_are_retried_then_reported(stocked, provider, fast):
    policy = dataclasses.replace(fast, timeout_s=0.3, attempts=2)
    stocked.fail(provider, Fault(200, b"{}", delay_s=0.8), times=2)
    message = failure(stocked, provider, policy)
    assert "did not answer within 0.3 s after 2 tries" in message
    assert stocked.base_url(provider) in message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_json_is_not_retried(stocked, provider, fast):
    stocked.fail(provider, Fault(200, b"<html>maintenance</html>", {"Content-Type": "text/html"}))
    message = failure(stocked, provider, fast)
    assert "returned a body that is not JSON" in message
    assert len(stocked.seen(provider)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_json_of_the_wrong_shape(stocked, provider, fast):
    stocked.fail(provider, Fault(200, b'{"unexpected": true}'))
    message = failure(stocked, provider, fast)
    assert "check the API URL" in message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_wrong_url_404(stocked, provider, fast):
    policy_url = stocked.url + "/nowhere"
    with pytest.raises(SourceError) as err:
        provider_source(provider, policy_url, policy=fast).targets()
    assert "HTTP 404" in str(err.value) and policy_url in str(err.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_nothing_listening(stocked, provider, fast):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(SourceError) as err:
        provider_source(provider, dead, policy=fast).targets()
    assert f"cannot reach {LABEL[provider]} API at {dead}" in str(err.value)
    assert "after 3 tries" in str(err.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_bad_api_url_is_a_config_error(provider, home):
    with pytest.raises(ConfigError, match="is not an http:// or https:// URL"):
        provider_source(provider, "ftp://example.com").targets()
