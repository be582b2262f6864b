"""A pod answers for the probe: an interpreter that prints `{}`, or an answer with sections cut
off. Every field of the facts has a default, so such an answer would validate and pass; it is
probe_failed with a one-line reason instead (fail closed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from computefence.connectors.payload import parse_probe_output
from computefence.errors import ProbeOutputError
from computefence.models import PROBE_SCHEMA_VERSION

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
from fleet_helpers import CLI, cli_subprocess_env, host_entry, json_hosts, write_inventory
from sshfleet import PodSpec

COMPLETE = {"probe_schema_version": PROBE_SCHEMA_VERSION, "identity": {"hostname": "pod"}, "storage": {}, "gpu": {}}


@pytest.mark.parametrize(
    "document,reason",
    [
        ({}, "no probe_schema_version"),
        ({k: v for k, v in COMPLETE.items() if k != "probe_schema_version"}, "no probe_schema_version"),
        ({**COMPLETE, "probe_schema_version": 99}, "probe_schema_version 99"),
        ({k: v for k, v in COMPLETE.items() if k != "identity"}, "lacks the identity section"),
        ({k: v for k, v in COMPLETE.items() if k not in ("storage", "gpu")}, "lacks the storage, gpu sections"),
    ],
)
def test_an_answer_without_the_probes_stamp_or_sections_fails_closed(document, reason):
    with pytest.raises(ProbeOutputError, match=reason):
        parse_probe_output(json.dumps(document).encode())


def test_a_section_its_collector_accounts_for_is_not_missing():
    # A hung nvidia-smi: no gpu facts, but the collector says it timed out; that is an answer.
    document = {k: v for k, v in COMPLETE.items() if k != "gpu"}
    document["collectors"] = {"gpu": {"ok": False, "timed_out": True, "duration_s": 8.0}}
    assert parse_probe_output(json.dumps(document).encode()).collectors["gpu"].timed_out


def test_a_pod_whose_python_prints_an_empty_object_is_probe_failed(ssh_fleet, start_pods, tmp_path):
    (pod,) = start_pods(
        PodSpec("empty-answer", files={"/usr/local/bin/python3": "#!/bin/sh\ncat >/dev/null\necho '{}'\n"})
    )
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    result = subprocess.run(
        [*CLI, "fleet", "check", "-i", str(inventory), "--format", "json"],
        capture_output=True,
        text=True,
        env=cli_subprocess_env(home),
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    host = json_hosts(result.stdout)["empty-answer"]
    assert host["status"] == "probe_failed"
    assert host["reason"] == "probe output has no probe_schema_version: not the probe's answer"
