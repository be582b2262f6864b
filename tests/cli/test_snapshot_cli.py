"""`computefence fleet snapshot` end to end on the demo fleet."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from computefence.demo.fleet import DEMO_PODS


def test_snapshot_of_the_demo_fleet_writes_a_lock(tmp_path):
    lock = tmp_path / "computefence.lock.json"
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "snapshot", "--demo", "--no-policy", "--output", str(lock)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lock_document = json.loads(lock.read_text())
    reachable = [pod.name for pod in DEMO_PODS if pod.reachable]
    assert sorted(lock_document["pods"]) == sorted(reachable)
    assert "pod-unreachable left out (unreachable" in done.stderr
    # Three of the five pods run torch 2.5.1+cu124: the majority is recorded, the others listed.
    assert lock_document["fingerprint"]["torch"] == "2.5.1+cu124"
    assert lock_document["differing"]["torch"] == {"pod-cpu-torch": "2.5.1+cpu", "pod-old-driver": "2.6.0+cu126"}
