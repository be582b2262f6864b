"""No API key (nor a pod's env secrets or Jupyter token) ever reaches output, logs, JSON or exceptions."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import traceback

import pytest
from fake_api import JUPYTER_SECRET, POD_SECRET, Fault, lambda_instance, runpod_pod, vast_instance

from computefence.cli import main
from computefence.errors import SourceError
from computefence.http import ApiClient
from computefence.sources.registry import provider_source

KEYS = {p: f"cfLEAKCHECK-{p}-9f8e7d6c5b4a" for p in ("runpod", "vast", "lambda")}
KEY_VAR = {"runpod": "RUNPOD_API_KEY", "vast": "VAST_API_KEY", "lambda": "LAMBDA_API_KEY"}
URL_VAR = {"runpod": "RUNPOD_API_BASE_URL", "vast": "VAST_API_URL", "lambda": "LAMBDA_API_URL"}
SECRETS = (*KEYS.values(), POD_SECRET, JUPYTER_SECRET)


def echo_key(provider: str) -> Fault:
    """An error body that quotes the key back, as careless APIs do."""
    return Fault(400, json.dumps({"error": "invalid_request", "msg": f"bad key {KEYS[provider]}"}).encode())


FAULTS = {
    "401": None,  # a wrong key in the environment, set below
    "403": Fault(403, b'{"error": {"message": "Your account is inactive."}}'),
    "429": Fault(429, b"{}", {"Retry-After": "9999"}),
    "500": Fault(500),
    "echo": None,
    "not-json": Fault(200, b"<html>", {"Content-Type": "text/html"}),
    "timeout": Fault(200, b"{}", delay_s=0.6),
}


@pytest.fixture
def leaky(api, monkeypatch):
    """The fake API with distinctive keys and pods that carry secrets of their own."""
    api.keys.update(KEYS)
    for provider, key in KEYS.items():
        monkeypatch.setenv(KEY_VAR[provider], key)
        monkeypatch.setenv(URL_VAR[provider], api.base_url(provider))
    api.runpod_pods = [runpod_pod("rp1", "rp-one"), runpod_pod("rp2", "rp-proxy", ssh=None)]
    api.vast_instances = [vast_instance(i, f"v{i}") for i in range(1, 30)]
    api.lambda_instances = [lambda_instance("a" * 32, "lam", file_systems={"fs": "/lambda/nfs/fs"})]
    return api


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("provider", list(KEYS))
def test_sources_never_show_a_key(leaky, provider, fast, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    policy = dataclasses.replace(fast, timeout_s=0.3, attempts=2)
    seen_text: list[str] = []

    source = provider_source(provider, policy=policy)
    targets = source.targets()
    seen_text += [repr(source), json.dumps([t.model_dump(mode="json") for t in targets]), repr(targets)]

    for name, fault in FAULTS.items():
        if name == "401":
            monkeypatch.setenv(KEY_VAR[provider], KEYS[provider] + "-revoked")
        elif name == "echo":
            monkeypatch.setenv(KEY_VAR[provider], KEYS[provider])
            fault = echo_key(provider)
        if fault is not None:
            leaky.fail(provider, fault, times=policy.attempts)
        with pytest.raises(SourceError) as err:
            source.targets()
        seen_text += [str(err.value), repr(err.value), "".join(traceback.format_exception(err.value))]
        if name == "echo":
            assert "[redacted]" in str(err.value)
        leaky.clear_faults()
        monkeypatch.setenv(KEY_VAR[provider], KEYS[provider])

    # The key did go out, in the Authorization header, and only there.
    assert any(s.authorization == f"Bearer {KEYS[provider]}" for s in leaky.seen(provider))
    assert all(KEYS[provider] not in json.dumps(s.query) for s in leaky.seen(provider))
    seen_text.append(caplog.text)
    seen_text += [r.getMessage() for r in caplog.records]
    assert_clean("\n".join(seen_text))


def test_api_client_repr_leaves_the_key_out():
    with ApiClient("Vast.ai", "https://console.vast.ai", KEYS["vast"], key_help="x") as client:
        assert KEYS["vast"] not in repr(client) and KEYS["vast"] not in str(vars(client).get("_client"))


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "computefence", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_never_shows_a_key(leaky, tmp_path, capsys, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("COLUMNS", "200")
    # A fresh process, so the runpod SDK is imported as a user's run imports it.
    listed = run_cli(["inventory", "list", "--provider", "runpod,vast,lambda", "--format", "json"], dict(os.environ))
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert {t["name"] for t in document["targets"]} >= {"rp-one", "rp-proxy", "v1", "v29", "lam"}
    assert all(s["ok"] for s in document["sources"])
    # Importing the runpod SDK must not switch on INFO logging of every HTTP request.
    assert "HTTP Request" not in listed.stderr
    outputs = [listed.stdout, listed.stderr]

    def cli(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        outputs.extend([out, err])
        return code, out

    code, table = cli("inventory", "list", "--provider", "runpod,vast,lambda")
    assert code == 0 and "rp-proxy" in table and "root@203.0.113.10:22101" in table

    exported = tmp_path / "pods.yaml"
    assert cli("inventory", "export", "--provider", "runpod,vast,lambda", "-o", str(exported))[0] == 0
    assert cli("inventory", "export", "--provider", "vast", "--format", "ssh-config")[0] == 0

    # Failures: a key the API echoes back (Vast), a revoked key (RunPod), a rate limit (Lambda).
    leaky.fail("vast", echo_key("vast"))
    leaky.fail("lambda", Fault(429, b"{}", {"Retry-After": "9999"}))
    monkeypatch.setenv("RUNPOD_API_KEY", KEYS["runpod"] + "-revoked")
    code, _ = cli("inventory", "list", "--provider", "runpod,vast,lambda")
    # Every source failed and nothing is left to list: a configuration error, each reason named.
    failed = outputs[-1]
    assert code == 2 and failed.startswith("computefence: error: every target source failed")
    assert "Vast.ai API answered HTTP 400 (invalid_request: bad key [redacted])" in failed
    assert "RunPod API rejected the API key (HTTP 401)" in failed
    assert "Lambda Cloud API is rate limiting (HTTP 429)" in failed

    outputs += [exported.read_text(), caplog.text]
    assert_clean("\n".join(outputs))
