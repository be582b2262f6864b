"""Servers the benchmarks run in processes of their own (the canned-answer SSH servers of
client_bench.py, the delay relay of fleet_bench.py --rtt), and the ports they listen on.

A server is a function `serve(*args, ready, stop)` that sets `ready` once it listens and
returns once `stop` is set (see `until_stopped`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket

HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Ports free on HOST right now (held together, so all differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


async def until_stopped(stop) -> None:
    """Until `stop` is set, or the benchmark that started this process is gone (killed
    before it could say so)."""
    parent = os.getppid()
    while not stop.is_set() and os.getppid() == parent:
        await asyncio.sleep(0.2)


class ServerProcesses:
    """Server processes started one after another, each ready before the next; one stop for all."""

    def __init__(self):
        self.context = multiprocessing.get_context("spawn")
        self._stop = self.context.Event()
        self._processes: list = []

    def start(self, serve, *args) -> None:
        ready = self.context.Event()
        process = self.context.Process(target=serve, args=(*args, ready, self._stop), daemon=True)
        process.start()
        self._processes.append(process)
        if not ready.wait(60):
            self.close()
            raise RuntimeError(f"{serve.__module__}.{serve.__name__}: the server did not start within 60 s")

    def close(self) -> None:
        self._stop.set()
        for process in self._processes:
            process.join(10)
            if process.is_alive():
                process.kill()
