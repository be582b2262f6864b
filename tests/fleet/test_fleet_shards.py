"""`fleet check --shard I/N` on three runners and `report merge`: one report equal to one run."""

from __future__ import annotations

import functools
import operator

import pytest
from fleet_helpers import HEALTHY, SPOTLESS, host_entry, write_inventory
from sshfleet import PodSpec, closed_port

from computefence.models import Report
from computefence.render import FORMATS

pytestmark = pytest.mark.sshd


def _outcome(report: Report) -> dict:
    return {
        h.name: (h.status, sorted((f.check, f.severity, f.subject or "") for f in h.findings)) for h in report.hosts
    }


def test_three_shards_merged_equal_one_unsharded_run(ssh_fleet, start_pods, run_cli, tmp_path):
    pods = start_pods(
        PodSpec("shard-a", **SPOTLESS),
        PodSpec("shard-b", **HEALTHY),
        PodSpec("shard-c", **dict(SPOTLESS, torch="cpu")),
        PodSpec("shard-d", **SPOTLESS),
        PodSpec("shard-e", **HEALTHY),
    )
    entries = [host_entry(p) for p in pods] + [{"name": "shard-f", "host": "127.0.0.1", "port": closed_port()}]
    inventory = write_inventory(tmp_path / "pool.yaml", ssh_fleet, entries, trusted=pods)

    whole = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")
    shards = []
    for i in (1, 2, 3):
        path = tmp_path / f"shard-{i}.json"
        result = run_cli(
            "fleet", "check", "-i", str(inventory), "--shard", f"{i}/3", "--format", "json", "-o", str(path)
        )
        assert result.code in (0, 1)
        shards.append(path)
    names = [[h.name for h in Report.model_validate_json(p.read_text()).hosts] for p in shards]
    assert all(names) and sorted(functools.reduce(operator.iadd, names, [])) == sorted(
        _outcome(whole.report)
    )  # disjoint, nothing lost

    merged_path = tmp_path / "fleet.json"
    merge = run_cli("report", "merge", *map(str, shards), "-o", str(merged_path))
    merged = Report.model_validate_json(merged_path.read_text())
    assert merge.code == whole.code == 1
    assert _outcome(merged) == _outcome(whole.report)
    assert merged.summary == whole.report.summary
    assert [(row.component, row.values) for row in merged.drift] == [
        (row.component, row.values) for row in whole.report.drift
    ]
    for fmt in FORMATS:
        shown = run_cli("report", str(merged_path), "--format", fmt)
        assert shown.code == 1 and all(name in shown.stdout for name in _outcome(whole.report)), fmt
