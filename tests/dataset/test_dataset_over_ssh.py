"""The probe scans a dataset on a real sshd pod through `computefence fleet check`."""

from __future__ import annotations

import pytest
import yaml
from dataset_helpers import jsonl_text
from sshfleet import PodSpec

from computefence.cli import main
from computefence.models import Report, Severity

pytestmark = pytest.mark.sshd

ROWS = [{"text": f"review {i}", "label": "pos" if i % 3 else "neg"} for i in range(30)]
DIRTY = ROWS + [ROWS[4], ROWS[5], {"text": "review 7", "label": "neg"}]


def test_fleet_check_scans_the_dataset_on_the_pod(start_pods, ssh_fleet, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (pod,) = start_pods(PodSpec("data-pod", files={"/data/train.jsonl": jsonl_text(DIRTY)}))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(pod.known_hosts_line())
    inventory = tmp_path / "pods.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "known_hosts": str(known_hosts),
                "defaults": {
                    "user": "root",
                    "identity_file": str(ssh_fleet.identity_file),
                    "checks": {"dataset": "/data/train.jsonl"},
                },
                "hosts": [{"name": pod.name, "host": pod.host, "port": pod.port}],
            }
        )
    )

    capsys.readouterr()
    main(["fleet", "check", "-i", str(inventory), "--format", "json"])
    report = Report.model_validate_json(capsys.readouterr().out)

    (host,) = report.hosts
    assert host.status.value == "ok"
    data = host.facts.dataset
    assert (data.rows, data.duplicate_rows, data.conflicting_inputs) == (33, 2, 1)
    assert data.conflict_examples[0].input == "review 7" and data.conflict_examples[0].lines == [8, 33]
    findings = {f.check: f for f in host.findings if f.check.startswith("dataset.")}
    assert findings["dataset.duplicates"].severity is Severity.WARN
    assert findings["dataset.duplicates"].fix.commands == [
        "computefence dataset dedupe /data/train.jsonl /data/train.dedup.jsonl"
    ]
    assert findings["dataset.conflicting-labels"].severity is Severity.WARN
    assert findings["dataset.label-skew"].severity is Severity.PASS
