"""The provider ApiClient's many small cases, through httpx.MockTransport (no server).

The end-to-end tests against the loopback fake API (test_provider_errors.py and friends)
stay; these pin each rule of the client on its own."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from fake_api import lambda_instance, vast_instance

from computefence.errors import SourceError
from computefence.http import ApiClient
from computefence.sources.lambda_cloud import LambdaSource
from computefence.sources.vast import VastSource

KEY = "sk-test-0123456789abcdef"
BASE = "https://api.example.test"


class Script:
    """Answers requests in order from a list of responses or exceptions, and keeps the requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _client(script: Script, policy) -> ApiClient:
    return ApiClient(
        "Example", BASE, KEY, key_help="check EXAMPLE_KEY", policy=policy, transport=httpx.MockTransport(script)
    )


def _fails(script: Script, policy) -> str:
    with _client(script, policy) as client, pytest.raises(SourceError) as caught:
        client.get_json("/v1/things")
    message = str(caught.value)
    assert "\n" not in message and KEY not in message
    return message


def test_sends_the_key_only_in_the_authorization_header(fast):
    script = Script(httpx.Response(200, json={"ok": True}))
    with _client(script, fast) as client:
        assert client.get_json("/v1/things", {"limit": "25"}) == {"ok": True}
    (request,) = script.requests
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"].startswith("computefence/")
    assert str(request.url) == f"{BASE}/v1/things?limit=25" and KEY not in str(request.url)
    assert KEY not in repr(client)


@pytest.mark.parametrize(
    "status, expected",
    [
        (401, "Example API rejected the API key (HTTP 401) (bad key): check EXAMPLE_KEY"),
        (403, "Example API refused access (HTTP 403) (bad key): check that the key may list instances"),
        (404, f"Example API answered HTTP 404 (bad key): check the API URL ({BASE})"),
        # Redirects are not followed: a login page is not an API answer.
        (302, f"Example API answered HTTP 302 (bad key): check the API URL ({BASE})"),
    ],
)
def test_final_statuses_fail_at_once_with_the_servers_words(fast, status, expected):
    script = Script(httpx.Response(status, json={"error": "bad key"}, headers={"Location": "https://login.test/"}))
    assert _fails(script, fast).startswith(expected)
    assert len(script.requests) == 1


def test_an_echoed_key_is_scrubbed_from_the_message(fast):
    script = Script(httpx.Response(401, json={"msg": f"key {KEY} is not valid"}))
    assert "key [redacted] is not valid" in _fails(script, fast)


def test_429_waits_as_retry_after_says(fast, sleeps):
    script = Script(httpx.Response(429, headers={"Retry-After": "3"}), httpx.Response(200, json=[1]))
    with _client(script, fast) as client:
        assert client.get_json("/v1/things") == [1]
    assert sleeps.waits == [3.0]


def test_429_asking_for_a_long_wait_fails_now(fast, sleeps):
    script = Script(httpx.Response(429, headers={"Retry-After": "3600"}))
    assert "asks to wait 3600 s, more than 10 s: retry later" in _fails(script, fast)
    assert sleeps.waits == []


def test_5xx_backs_off_then_gives_up_after_the_tries(fast, sleeps):
    script = Script(*[httpx.Response(503, text="down")] * 3)
    assert _fails(script, fast) == "Example API failed with HTTP 503 after 3 tries: retry later"
    assert sleeps.waits == [0.5, 1.0] and len(script.requests) == 3


@pytest.mark.parametrize(
    "error, expected",
    [
        (httpx.ReadTimeout("slow"), f"Example API at {BASE} did not answer within 1 s after 3 tries"),
        (
            httpx.ConnectError("[Errno 111] Connection refused"),
            f"cannot reach Example API at {BASE} ([Errno 111] Connection refused) after 3 tries",
        ),
    ],
)
def test_transport_failures_are_retried_then_reported(fast, error, expected):
    script = Script(error, error, error)
    assert _fails(script, fast).startswith(expected)
    assert len(script.requests) == 3


def test_a_body_that_is_not_json_is_not_retried(fast):
    script = Script(
        httpx.Response(200, text="<html>login</html>", headers={"Content-Type": "text/html; charset=utf-8"})
    )
    message = _fails(script, fast)
    assert (
        message
        == f"Example API at {BASE} returned a body that is not JSON (text/html): check the API URL or retry later"
    )
    assert len(script.requests) == 1


def test_requests_are_spaced_by_the_minimum_interval(fast, sleeps):
    spaced = dataclasses.replace(fast, min_interval_s=1.0)
    script = Script(httpx.Response(200, json=[]), httpx.Response(200, json=[]))
    with _client(script, spaced) as client:
        client.get_json("/v1/a")
        client.get_json("/v1/b")
    assert len(sleeps.waits) == 1 and 0.9 < sleeps.waits[0] <= 1.0


def test_vast_follows_next_token_through_after_token(home, monkeypatch, fast):
    monkeypatch.setenv("VAST_API_KEY", KEY)
    first = [vast_instance(i, f"pod-{i}") for i in range(1, 26)]

    def pages(request: httpx.Request) -> httpx.Response:
        if "after_token" not in request.url.params:
            return httpx.Response(200, json={"success": True, "next_token": "t25", "instances": first})
        assert request.url.params["after_token"] == "t25"
        return httpx.Response(200, json={"success": True, "next_token": None, "instances": [vast_instance(26, None)]})

    targets = VastSource(BASE, policy=fast, transport=httpx.MockTransport(pages)).targets()
    assert [t.name for t in targets][:2] == ["pod-1", "pod-2"] and targets[-1].name == "vast-26"
    assert len(targets) == 26


def test_vast_stops_a_listing_whose_token_repeats(home, monkeypatch, fast):
    monkeypatch.setenv("VAST_API_KEY", KEY)
    loop = httpx.MockTransport(
        lambda request: httpx.Response(
            200, json={"success": True, "next_token": "same", "instances": [vast_instance(1, "a")]}
        )
    )
    with pytest.raises(SourceError, match="repeated a page token"):
        VastSource(BASE, policy=fast, transport=loop).targets()


def test_lambda_without_a_data_list_names_the_url(home, monkeypatch, fast):
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    odd = httpx.MockTransport(lambda request: httpx.Response(200, json={"instances": []}))
    with pytest.raises(SourceError, match=f"returned no `data` list of instances: check the API URL \\({BASE}\\)"):
        LambdaSource(BASE, policy=fast, transport=odd).targets()
    listing = httpx.MockTransport(
        lambda request: httpx.Response(
            200, json={"data": [lambda_instance("0920582c7ff041399e34823a0be62549", "lambda-one")]}
        )
    )
    (target,) = LambdaSource(BASE, policy=fast, transport=listing).targets()
    assert target.name == "lambda-one" and target.host == "192.0.2.30"
