"""The demo fleet and the replay tests share one recording: it must still say what the live demo says.

When this fails after a change to the probe or to a demo pod, record again:
`python3 bench/record_demo.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from computefence.demo import DEMO_RECORDING


def _verdicts(tmp_path, *source: str) -> dict[str, tuple]:
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "160"}
    done = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "check", *source, "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    verdicts = {}
    for host in json.loads(done.stdout)["hosts"]:
        # Disk headroom is the checking machine's own disk, then and now.
        findings = {(f["check"], f["severity"]) for f in host["findings"] if f["check"] != "storage.disk-headroom"}
        verdicts[host["name"]] = (host["status"], sorted(findings))
    return verdicts


def test_the_recording_says_what_the_live_demo_says(tmp_path):
    live = _verdicts(tmp_path, "--demo")
    replayed = _verdicts(tmp_path, "--replay", str(DEMO_RECORDING))
    assert list(replayed) == list(live)
    for name in live:
        assert replayed[name] == live[name], name
