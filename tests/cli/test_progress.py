"""The progress a long run shows on stderr: plain `[i/n]` lines in a pipe, one live line on a
terminal (a real pty), and never markup or control characters taken from a pod."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

from computefence.cli.progress import LiveCount
from computefence.demo import DEMO_RECORDING

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _replay(stderr: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "computefence", "fleet", "check", "--replay", str(DEMO_RECORDING)],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"},
    )


def test_a_pipe_gets_one_plain_line_per_pod():
    proc = _replay(subprocess.PIPE)
    _, err = proc.communicate(timeout=120)
    lines = err.decode().splitlines()
    assert proc.returncode == 1
    assert [line.split("]")[0] for line in lines] == [f"computefence: [{i}/6" for i in range(1, 7)]
    assert "\x1b" not in err.decode()


def test_a_terminal_gets_one_live_line_and_no_per_pod_lines():
    leader, follower = pty.openpty()
    proc = _replay(follower)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty closes with the process
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.wait(timeout=30) == 1
    text = ANSI.sub("", seen.decode(errors="replace"))
    assert "checking pods: " in text and "[1/6]" not in text


def test_the_live_line_shows_a_pods_words_as_text_never_as_markup_or_escapes():
    count = LiveCount(2, "applying", "steps")
    count.live = True  # as on a terminal
    with count:
        count.advance(True, "plain", last=" · [link=http://evil.example]pod[/link]\x1b]0;title\x07")
        [task] = count._progress.tasks  # type: ignore[union-attr]
    assert task.description == ("applying: 1/2 steps · \\[link=http://evil.example]pod\\[/link]?]0;title?")
