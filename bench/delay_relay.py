"""A TCP relay that delays every byte by half a round trip each way: latency for the fleet
benchmark where the kernel has no `tc netem` (fleet_bench.py --rtt, --delay relay).

One relay process listens on a port of its own for each pod and forwards to the pod's sshd.
What arrives on one side is written to the other side RTT/2 later, in order, so every
round trip of every protocol (SSH's key exchange, auth, channel requests, Ansible's many
sessions) costs the RTT, as on a real link. Bandwidth and loss are not modelled. The relay's
own CPU runs on the benchmark machine and is the same for every tool.
"""

from __future__ import annotations

import asyncio

from server_processes import HOST, ServerProcesses, free_ports, until_stopped

READ_SIZE = 65536


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_ms) -> None:
    """Copy reader -> writer, each chunk delivered half the current RTT after it arrived."""
    loop = asyncio.get_running_loop()
    line: asyncio.Queue = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await line.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                break
            writer.write(data)
            await writer.drain()

    delivery = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(READ_SIZE)
            line.put_nowait((loop.time() + delay_ms.value / 2000, data))
            if not data:
                break
        await delivery
    except (ConnectionError, OSError):
        delivery.cancel()
    finally:
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            writer.close()


def serve(routes: list[tuple[int, str, int]], delay_ms, ready, stop) -> None:
    """Listen on each routes' first port and relay to its (host, port); until `stop` is set."""

    async def main() -> None:
        async def relay(port: int, host: str, pod_port: int) -> asyncio.AbstractServer:
            async def one(client_reader, client_writer) -> None:
                try:
                    pod_reader, pod_writer = await asyncio.open_connection(host, pod_port)
                except OSError:
                    client_writer.close()
                    return
                try:
                    await asyncio.gather(
                        _pump(client_reader, pod_writer, delay_ms),
                        _pump(pod_reader, client_writer, delay_ms),
                        return_exceptions=True,
                    )
                except asyncio.CancelledError:
                    pass  # the relay is stopping; a cancelled connection is not an error to report
                for writer in (client_writer, pod_writer):
                    writer.close()

            return await asyncio.start_server(one, HOST, port, backlog=4096)

        servers = [await relay(*route) for route in routes]
        ready.set()
        await until_stopped(stop)
        for server in servers:
            server.close()

    asyncio.run(main())


class DelayRelay:
    """The relay for a list of (host, port) pods; `ports[i]` reaches pod i with `rtt_ms` added."""

    def __init__(self, pods: list[tuple[str, int]]):
        self.ports = free_ports(len(pods))
        self._processes = ServerProcesses()
        self._delay_ms = self._processes.context.Value("d", 0.0)
        routes = [(port, host, pod_port) for port, (host, pod_port) in zip(self.ports, pods)]
        self._processes.start(serve, routes, self._delay_ms)

    def set_rtt(self, rtt_ms: float) -> None:
        self._delay_ms.value = float(rtt_ms)

    def close(self) -> None:
        self._processes.close()
