"""The remedy class in reports: `remedy` on every JSON finding, and the terminal's
"Give these pods back" for pods blocked by a fault of the machine itself."""

from __future__ import annotations

import json

from recorded_fleets import recorded_fleet

from computefence import evaluate
from computefence.evaluate import CHECKS, Remedy
from computefence.evaluate.fleet import give_back
from computefence.render import render
from computefence.render.json import load_report


def test_every_finding_of_a_recorded_fleet_carries_its_checks_remedy():
    report = recorded_fleet(6)
    findings = [f for h in report.hosts for f in h.findings]
    assert findings
    for finding in findings:
        assert finding.remedy is not None, finding.check
        if finding.check in CHECKS and finding.check != "gpu.driver-too-old":
            assert finding.remedy is CHECKS[finding.check].remedy, finding.check


def test_json_findings_carry_remedy_and_a_report_saved_without_it_gets_its_checks(tmp_path):
    report = recorded_fleet(6)
    doc = json.loads(render(report, "json"))
    remedies = {f["check"]: f["remedy"] for h in doc["hosts"] for f in h["findings"]}
    assert remedies["storage.output-dir"] == "config" and remedies["gpu.torch-cpu-build"] == "fix"
    assert remedies["gpu.driver-too-old"] == "replace"
    for host in doc["hosts"]:
        for finding in host["findings"]:
            del finding["remedy"]
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(doc))
    loaded = evaluate.with_remedies(load_report(saved))
    assert {f.check: f.remedy for h in loaded.hosts for f in h.findings}["storage.output-dir"] is Remedy.CONFIG
    # A finding's own override (driver-too-old with no build) is not in an old report: the
    # registry's remedy is all it has, so that pod is not given back from it.
    assert [h.name for h in give_back(loaded)] == []
    assert [h.name for h in give_back(evaluate.with_remedies(report))] == ["pod-old-driver"]


def test_the_terminal_report_lists_the_pods_to_give_back_with_their_price_at_80_columns():
    text = render(recorded_fleet(6), "rich", width=80)
    section = text[text.index("Give these pods back") : text.index("Money at risk")]
    assert section.splitlines()[0] == "Give these pods back · 1 pod · $1.29/h"
    assert section.splitlines()[1].split() == ["pod-old-driver", "$1.29/h", "gpu.driver-too-old"]
    assert "computefence fleet release --from REPORT.json" in " ".join(section.split())
    assert all(len(line) <= 80 for line in section.splitlines())
