"""`computefence doctor` with a policy: the real probe on this machine, its packages and custom checks."""

from __future__ import annotations

import sys

from computefence.cli import main
from computefence.models import Report, Severity


def test_doctor_applies_the_policy_found_in_the_current_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # the repository root: discovery stops here
    lock = tmp_path / "computefence.lock.json"
    (tmp_path / "computefence.yaml").write_text("""\
requirements:
  python: ">=3.8"
  numpy: "<1"
  not-a-real-package-xyz: "*"
custom:
  - {id: echo, run: "echo ready", expect: {stdout_matches: "^ready$"}}
  - {id: fails, run: "false", severity: warn}
""")
    code = main(
        [
            "doctor",
            "--format",
            "json",
            "--python",
            sys.executable,
            "--only",
            "policy",
            "--only",
            "custom",
            "--snapshot",
            str(lock),
        ]
    )
    out, err = capsys.readouterr()
    report = Report.model_validate_json(out)

    assert code == 1, err
    assert report.policy.path.endswith("computefence.yaml")
    findings = {(f.check, f.subject): f for f in report.hosts[0].findings}
    assert findings[("policy.requirement", "python")].severity is Severity.PASS
    numpy = findings[("policy.requirement", "numpy")]
    assert numpy.severity is Severity.BLOCK and numpy.fix.commands == [f"{sys.executable} -m pip install 'numpy<1'"]
    missing = findings[("policy.requirement", "not-a-real-package-xyz")]
    assert "is not installed" in missing.message
    assert findings[("custom.echo", None)].severity is Severity.PASS
    assert findings[("custom.fails", None)].severity is Severity.WARN
    assert {f.check for f in report.hosts[0].findings} <= {"policy.requirement", "custom.echo", "custom.fails"}
    assert '"numpy"' in lock.read_text() and "computefence: wrote the baseline of " in err and "pod(s)" not in err

    assert main(["doctor", "--no-policy", "--format", "json", "--python", sys.executable, "--only", "policy"]) == 0
    assert not Report.model_validate_json(capsys.readouterr().out).hosts[0].findings
