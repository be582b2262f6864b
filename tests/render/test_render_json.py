import json

from sample_reports import HF_ADVICE, HF_COMMANDS, OUTPUT_DIR_FIX

from computefence.connectors.payload import parse_probe_output
from computefence.models import SCHEMA_VERSION, Report
from computefence.render import render
from computefence.render.json import render_chunks


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
        "fix": OUTPUT_DIR_FIX,
        "fix_commands": [OUTPUT_DIR_FIX],
        "fix_advice": None,
        "fix_steps": [{"run": OUTPUT_DIR_FIX, "on": "pod", "kind": "safe"}],
        "subject": "/root/out",
        "remedy": "config",
        "key": None,  # set by the evaluator; this sample's findings are built by hand
    }
    # Schema 1's one-line `fix` stays for one more version: commands joined, advice as a comment.
    hf = host["findings"][1]
    assert hf["fix_commands"] == HF_COMMANDS and hf["fix_advice"] == HF_ADVICE
    assert hf["fix"] == f"{HF_COMMANDS[0]}; {HF_COMMANDS[1]}  # {HF_ADVICE}"
    assert doc["hosts"][3]["status"] == "unreachable" and doc["hosts"][3]["facts"] is None


def test_hostile_strings_survive_json_exactly(hostile_report):
    back = Report.model_validate_json(render(hostile_report, "json"))
    assert back.hosts[0].name == hostile_report.hosts[0].name
    assert back.hosts[0].findings[0].message == hostile_report.hosts[0].findings[0].message


def test_lone_surrogates_from_a_pod_do_not_break_json(fleet_report):
    # A lone "\udcff" escape and an undecodable byte, as a broken or hostile pod answers.
    fleet_report.hosts[0].facts = parse_probe_output(
        b'{"probe_schema_version": 1, "storage": {}, "gpu": {}, "identity": {"hostname": "bad\\udcffname", "kernel": "k\xff"}}'
    )
    back = Report.model_validate_json(render(fleet_report, "json"))
    assert (back.hosts[0].facts.identity.hostname, back.hosts[0].facts.identity.kernel) == ("bad?name", "k?")
    assert back.hosts[1] == fleet_report.hosts[1]


def test_a_schema_1_report_still_reads_with_its_fix_as_one_command(fleet_report):
    doc = json.loads(render(fleet_report, "json"))
    doc["schema_version"] = 1
    for host in doc["hosts"]:
        for item in [host, *host["findings"]]:
            item.pop("fix_commands"), item.pop("fix_advice")
    back = Report.model_validate(doc)
    assert back.hosts[0].findings[0].fix.commands == [OUTPUT_DIR_FIX]
    assert back.hosts[3].fix.commands == ["ssh -p 22 root@203.0.113.13 true"]


def test_skipped_checks_are_counted_apart_from_passes(doctor_report):
    doc = json.loads(render(doctor_report, "json"))
    assert (doc["summary"]["passed"], doc["summary"]["skipped"]) == (3, 1)
    assert [f["severity"] for f in doc["hosts"][0]["findings"]].count("skip") == 1


def test_every_host_carries_its_verdict_and_counts(fleet_report):
    hosts = {h["name"]: h for h in json.loads(render(fleet_report, "json"))["hosts"]}
    assert {name: (h["verdict"], h["blockers"], h["warnings"]) for name, h in hosts.items()} == {
        "pod-a": ("blocked", 1, 1),
        "pod-b": ("blocked", 1, 0),
        "pod-c": ("blocked", 1, 0),
        "pod-d": ("not_checked", 0, 0),
        "pod-e": ("ready", 0, 0),
    }


def test_the_streamed_report_is_exactly_pydantics_indented_dump(fleet_report, hostile_report):
    # The JSON report is written a host at a time; joined, it is the model's own JSON.
    for report in (fleet_report, hostile_report, fleet_report.model_copy(update={"hosts": []})):
        pieces = list(render_chunks(report))
        assert len(pieces) == len(report.hosts) + 2
        assert "".join(pieces) == report.model_dump_json(indent=2) + "\n"
