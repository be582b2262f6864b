"""Running the user's own tools (`ssh -G`, `ansible-inventory`) under a deadline."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time


class ToolTimeout(Exception):
    """The tool gave no answer within its time."""


class ToolOverflow(Exception):
    """The tool printed more than it was allowed to."""


def run_tool(
    argv: list[str], timeout: float, max_bytes: int, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """(exit status, stdout, stderr) of `argv`; OSError when it cannot start, ToolTimeout on
    overrun, ToolOverflow when it prints over `max_bytes` on stdout (or on stderr), before its
    output fills memory.

    The tool gets its own session, so what it starts (a `Match exec` command, an inventory
    script) is killed with it.
    """
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = {out_fd: 0, err_fd: 0}
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(out_fd, selectors.EVENT_READ)
            selector.register(err_fd, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ToolTimeout
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    sizes[key.fd] += len(chunk)
                    if sizes[key.fd] > max_bytes:
                        raise ToolOverflow
                    chunks[key.fd].append(chunk)
        try:
            status = process.wait(max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise ToolTimeout from None
    except (ToolTimeout, ToolOverflow):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    finally:
        process.stdout.close()
        process.stderr.close()
    return status, b"".join(chunks[out_fd]), b"".join(chunks[err_fd])
