"""Fix steps in the reports: JSON carries {run, on, kind} beside the older fields and reads back;
the terminal and Markdown reports mark every step that is not a safe step on the pod, as a
trailing shell comment, so each line still pastes into a shell as it is."""

import json

from computefence.models import (
    SCHEMA_VERSION,
    Finding,
    Fix,
    FixStep,
    HostReport,
    HostStatus,
    Report,
    Severity,
    StepKind,
)
from computefence.render import render

MIXED = Fix(
    steps=[
        FixStep.inspect("du -sh /workspace"),
        FixStep.safe("mkdir -p /workspace/hf"),
        FixStep.disruptive("systemctl restart nvidia-persistenced"),
        FixStep.destructive("rm -rf /root/.cache/huggingface"),
        FixStep.local("ssh-keygen -R pod-a"),
        FixStep.local("runpodctl stop pod x && runpodctl start pod x", StepKind.DISRUPTIVE),
    ],
    advice="then log in again",
)


def _report() -> Report:
    finding = Finding(check="storage.hf-cache", severity=Severity.WARN, message="HF cache is ephemeral", fix=MIXED)
    host = HostReport(name="pod-a", status=HostStatus.OK, findings=[finding])
    return Report(tool_version="0", generated_at="2026-12-01T00:00:00+00:00", hosts=[host])


def test_json_has_fix_steps_beside_the_older_fields_and_reads_back():
    text = render(_report(), "json")
    finding = json.loads(text)["hosts"][0]["findings"][0]
    assert finding["fix_commands"] == [step.run for step in MIXED.steps]
    assert finding["fix_steps"][2] == {
        "run": "systemctl restart nvidia-persistenced",
        "on": "pod",
        "kind": "disruptive",
    }
    assert finding["fix_steps"][5]["on"] == "local"
    assert Report.model_validate_json(text).hosts[0].findings[0].fix == MIXED


def test_a_schema_2_report_without_fix_steps_reads_its_commands_as_inspect():
    old = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": "0",
        "generated_at": "x",
        "hosts": [
            {
                "name": "p",
                "status": "ok",
                "findings": [
                    {"check": "c", "severity": "warn", "message": "m", "fix": "x", "fix_commands": ["rm -rf /"]}
                ],
            }
        ],
    }
    (step,) = Report.model_validate(old).hosts[0].findings[0].fix.steps
    # Never runnable: a command nobody classified is not something `fleet fix` may run.
    assert step.kind is StepKind.INSPECT and not step.runnable


def test_terminal_marks_the_steps_that_are_not_safe_pod_steps():
    text = render(_report(), "rich", width=200)
    lines = {line.strip() for line in text.splitlines()}
    assert "fix: mkdir -p /workspace/hf" in lines
    assert "fix: du -sh /workspace  # inspect" in lines
    assert "fix: systemctl restart nvidia-persistenced  # disruptive" in lines
    assert "fix: rm -rf /root/.cache/huggingface  # destructive" in lines
    assert "fix: ssh-keygen -R pod-a  # local" in lines
    assert "fix: runpodctl stop pod x && runpodctl start pod x  # local, disruptive" in lines


def test_markdown_marks_them_inside_the_code_block():
    text = render(_report(), "markdown")
    assert "mkdir -p /workspace/hf\nsystemctl restart nvidia-persistenced  # disruptive\n" in text
    assert "du -sh /workspace  # inspect\n" in text and "ssh-keygen -R pod-a  # local\n" in text
