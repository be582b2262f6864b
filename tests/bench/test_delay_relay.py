"""The fleet benchmark's delay relay (bench/delay_relay.py): bytes pass unchanged and in
order, and a round trip through it costs at least the RTT it is set to."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from delay_relay import DelayRelay
from server_processes import HOST


@pytest.fixture
def echo_server():
    server = socket.create_server((HOST, 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _round_trip(port: int, payload: bytes) -> tuple[bytes, float]:
    with socket.create_connection((HOST, port), timeout=10) as conn:
        started = time.monotonic()
        conn.sendall(payload)
        received = b""
        while len(received) < len(payload):
            received += conn.recv(65536)
        return received, time.monotonic() - started


def test_bytes_come_back_unchanged_and_a_round_trip_costs_the_rtt(echo_server):
    relay = DelayRelay([(HOST, echo_server)])
    try:
        payload = bytes(range(256)) * 1024
        relay.set_rtt(0)
        assert _round_trip(relay.ports[0], payload)[0] == payload
        relay.set_rtt(300)
        echoed, seconds = _round_trip(relay.ports[0], b"ping")
        assert echoed == b"ping" and seconds >= 0.3
    finally:
        relay.close()
