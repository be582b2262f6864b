import json

from computefence.models import SCHEMA_VERSION, Report
from computefence.payload import parse_probe_output
from computefence.render import render


def test_json_round_trips_through_the_report_model(fleet_report):
    text = render(fleet_report, "json")
    assert Report.model_validate_json(text) == fleet_report


def test_json_carries_the_documented_fields(fleet_report):
    doc = json.loads(render(fleet_report, "json"))
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["summary"]["blockers"] == 3 and doc["summary"]["verdict"] == "block"
    host = doc["hosts"][0]
    for key in ("name", "status", "reason", "facts", "findings"):
        assert key in host
    assert host["findings"][0] == {
        "check": "storage.output-dir",
        "severity": "block",
        "message": fleet_report.hosts[0].findings[0].message,
        "fix": fleet_report.hosts[0].findings[0].fix,
        "subject": "/root/out",
    }
    assert doc["hosts"][3]["status"] == "unreachable" and doc["hosts"][3]["facts"] is None


def test_hostile_strings_survive_json_exactly(hostile_report):
    back = Report.model_validate_json(render(hostile_report, "json"))
    assert back.hosts[0].name == hostile_report.hosts[0].name
    assert back.hosts[0].findings[0].message == hostile_report.hosts[0].findings[0].message


def test_lone_surrogates_from_a_pod_do_not_break_json(fleet_report):
    # A lone "\udcff" escape and an undecodable byte, as a broken or hostile pod answers.
    fleet_report.hosts[0].facts = parse_probe_output(b'{"identity": {"hostname": "bad\\udcffname", "kernel": "k\xff"}}')
    back = Report.model_validate_json(render(fleet_report, "json"))
    assert (back.hosts[0].facts.identity.hostname, back.hosts[0].facts.identity.kernel) == ("bad?name", "k?")
    assert back.hosts[1] == fleet_report.hosts[1]
