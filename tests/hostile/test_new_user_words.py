"""What a new user read and tripped on: counts that say "(s)" or "1 hosts", and a baseline
taken from one pod described as the baseline of the whole fleet."""

from __future__ import annotations

import json
from collections import Counter

from computefence.cli import main
from computefence.models import Target
from computefence.sources.export import export_yaml


def test_a_baseline_from_one_pod_names_that_pod(tmp_path, capsys):
    assert main(["fleet", "snapshot", "--demo", "--from", "pod-healthy", "-o", str(tmp_path / "l.json")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"computefence: wrote the baseline of pod-healthy to {tmp_path / 'l.json'}"


def test_a_majority_baseline_counts_its_pods_in_words(tmp_path, capsys):
    assert main(["fleet", "snapshot", "--demo", "-o", str(tmp_path / "l.json")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"computefence: wrote the majority baseline of 5 pods to {tmp_path / 'l.json'}"


def test_one_exported_host_is_one_host():
    assert export_yaml([Target(name="a", host="10.0.0.1")]).splitlines()[0].endswith("(1 host).")


def test_report_help_names_the_report_file_form(capsys):
    assert main(["report", "--help"]) == 0
    assert "`computefence report FILE.json` is `report show FILE.json`" in " ".join(capsys.readouterr().out.split())


def test_a_computefence_format_with_no_changes_form_leaves_report_diff_working(tmp_path, capsys, monkeypatch):
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    monkeypatch.setenv("COMPUTEFENCE_FORMAT", "junit")  # set for fleet check's CI step
    capsys.readouterr()
    code = main(["report", "diff", str(tmp_path / "r.json"), str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "") and "nothing changed" in out


def _shown(tmp_path, capsys, fmt: str) -> str:
    capsys.readouterr()
    main(["report", "show", str(tmp_path / "r.json"), "--format", fmt, "--no-policy"])
    return capsys.readouterr().out


def test_the_pod_counts_never_say_no_warnings_beside_pods_that_have_some(tmp_path, capsys):
    # The demo's blocked pods have warnings too; a pod counts once, under its worst finding,
    # and every format words that count the same way from the report's one summary.
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    verdicts = Counter(host["verdict"] for host in report["hosts"])
    assert any(h["verdict"] == "blocked" and h["warnings"] for h in report["hosts"])
    assert report["summary"]["hosts_warned"] == verdicts["warnings"]
    detail = (
        f"{verdicts['blocked']} of 6 pods blocked, {verdicts['not_checked']} not checked, "
        f"{verdicts['warnings']} with warnings only, {verdicts['ready']} clean"
    )
    assert _shown(tmp_path, capsys, "rich").splitlines()[-2].endswith(f"BLOCKED  {detail}")
    assert detail in _shown(tmp_path, capsys, "markdown")
    html = _shown(tmp_path, capsys, "html")
    assert f'<p class="detail">{detail}</p>' in html
    assert f'<b>{verdicts["warnings"]}</b><span class="state v-warnings">with warnings only</span>' in html
