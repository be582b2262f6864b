"""Servers that answer slowly or too much: provider APIs and webhooks on loopback.

A hostile or broken server trickles a byte at a time (socket timeouts count per read, so
they never fire) or sends hundreds of megabytes. Each costs its own deadline and at most
the 1 MiB body cap, never a hang or the laptop's memory.
"""

from __future__ import annotations

import functools
import gzip
import socket
import threading
import time
import tracemalloc

import pytest

from computefence.errors import SourceError
from computefence.evaluate.fleet import build_report
from computefence.http import RetryPolicy
from computefence.operations.notify import notify, webhooks
from computefence.render.webhook import PAYLOADS
from computefence.sources.runpod import RunPodSource
from computefence.sources.vast import VastSource

TIMEOUT_S = 1.0


@functools.cache
def _bomb() -> bytes:
    """300 MB of blanks in about 300 KB of gzip."""
    return gzip.compress(b" " * 300_000_000, compresslevel=9)


def _read_request(conn: socket.socket) -> None:
    """The whole request, head and body: requests sends them in two writes."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


class HostileServer:
    """One behaviour for every connection: 'trickle-head', 'trickle-body', 'huge' or 'gzip-bomb'."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.sent = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        try:
            _read_request(conn)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            # At most 8 s of trickling: an unbounded client fails its timing assertion, not the suite.
            stop_at = time.monotonic() + 8
            if self.behaviour == "trickle-head":
                for byte in head:
                    if time.monotonic() > stop_at:
                        break
                    self._send(conn, bytes([byte]))
                    time.sleep(0.1)
            elif self.behaviour == "trickle-body":
                self._send(conn, head + b"Content-Length: 100000\r\n\r\n")
                while time.monotonic() < stop_at:
                    self._send(conn, b" ")
                    time.sleep(0.05)
            elif self.behaviour == "huge":
                self._send(conn, head + b"Content-Length: 200000000\r\n\r\n")
                chunk = b" " * 65536
                while self.sent < 200_000_000:
                    self._send(conn, chunk)
            elif self.behaviour == "gzip-bomb":
                body = _bomb()
                self._send(conn, head + f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n".encode())
                self._send(conn, body)
            # Read the rest of the request before closing: unread data would reset the connection.
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass
            # Closing with the client's bytes unread would send a reset that can overtake the answer.
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass
        except OSError:  # the client hung up: what a bounded client does
            pass
        finally:
            conn.close()


def _policy() -> RetryPolicy:
    return RetryPolicy(attempts=1, timeout_s=TIMEOUT_S, sleep=lambda _: None)


def _vast(url: str, monkeypatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", "k" * 32)
    VastSource(url, policy=_policy()).targets()


def _runpod(url: str, monkeypatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k" * 32)
    RunPodSource(url, policy=_policy()).targets()


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("RUNPOD_API_BASE_URL", "VAST_API_URL", "VAST_URL", "COMPUTEFENCE_NOTIFY", "COMPUTEFENCE_POLICY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("list_pods", [_vast, _runpod], ids=["vast-httpx", "runpod-sdk-requests"])
@pytest.mark.parametrize("behaviour", ["trickle-head", "trickle-body"])
def test_a_trickling_provider_api_costs_its_timeout_and_no_more(list_pods, behaviour, monkeypatch):
    import runpod  # noqa: F401 (seconds to import: not part of the request's time)

    with HostileServer(behaviour) as server:
        started = time.monotonic()
        with pytest.raises(SourceError, match=f"did not answer within {TIMEOUT_S:g} s"):
            list_pods(server.url, monkeypatch)
        assert time.monotonic() - started < TIMEOUT_S + 0.5


@pytest.mark.parametrize("list_pods", [_vast, _runpod], ids=["vast-httpx", "runpod-sdk-requests"])
@pytest.mark.parametrize("behaviour", ["huge", "gzip-bomb"])
def test_a_provider_api_sending_hundreds_of_megabytes_costs_at_most_the_cap(list_pods, behaviour, monkeypatch):
    import runpod  # noqa: F401

    _bomb()
    with HostileServer(behaviour) as server:
        tracemalloc.start()
        try:
            with pytest.raises(SourceError, match=r"sent more than 1024 KiB (once decoded )?of answer"):
                list_pods(server.url, monkeypatch)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 16 * 2**20


@pytest.mark.parametrize("behaviour", ["trickle-head", "trickle-body"])
def test_a_trickling_webhook_costs_its_timeout_per_try(behaviour):
    report = build_report([], kind="fleet")
    with HostileServer(behaviour) as server:
        started = time.monotonic()
        (warning,) = notify(
            report, webhooks([server.url + "/hook"]), PAYLOADS["json"], timeout_s=TIMEOUT_S, sleep=lambda _: None
        )
        elapsed = time.monotonic() - started
    assert warning == (
        "computefence: warning: notification not delivered: webhook at 127.0.0.1 did not answer within 1 s "
        "after 4 tries: retry later"
    )
    assert elapsed < 4 * TIMEOUT_S + 1


def test_a_webhook_answering_200_megabytes_is_delivered_without_reading_them():
    report = build_report([], kind="fleet")
    with HostileServer("huge") as server:
        assert notify(report, webhooks([server.url]), PAYLOADS["json"], timeout_s=5) == []
        time.sleep(0.2)
        assert server.sent < 32 * 2**20


MALFORMED = ["http://[::1", "http://pods.example:99999/hook", "https://exa mple.com/x", "http://h/\x1b[2J"]


@pytest.mark.parametrize(
    "origin, url",
    # In COMPUTEFENCE_NOTIFY a blank separates two URLs.
    [(origin, url) for origin in ("flag", "env", "policy") for url in MALFORMED if origin != "env" or " " not in url],
)
def test_a_malformed_webhook_url_is_one_config_error_line(url, origin, cli, tmp_path, monkeypatch):
    argv = ["fleet", "check", "--demo"]
    if origin == "flag":
        argv += ["--notify", url]
    elif origin == "env":
        monkeypatch.setenv("COMPUTEFENCE_NOTIFY", url)
    else:
        policy = tmp_path / "computefence.yaml"
        policy.write_text('notify:\n  url: "' + url.replace("\x1b", "\\e") + '"\n')
        argv += ["--policy", str(policy)]
    code, out, err = cli(*argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("computefence: error: ")
    assert "URL #" in err and "Traceback" not in err
    assert url.strip() not in err  # a webhook URL is a secret
    if origin == "policy":
        assert err.startswith(f"computefence: error: {policy}:2: notify.url: URL #1 ")


def test_a_webhook_url_is_checked_before_any_pod_is_contacted(cli):
    code, _, err = cli("fleet", "check", "--demo", "--notify", "http://[::1")
    assert code == 2 and "[1/" not in err  # no progress line: nothing was probed
