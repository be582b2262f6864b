"""No false changes from history (class 7): the demo fleet keeps each pod's files under a folder
made fresh for every run (/tmp/cf-demo-XXXX/POD/...), so two identical runs name the same
problems under new paths. Findings are compared by their identity (check, key), so the second
run reports nothing changed and alerts nobody; a real change still shows, and reports saved
before findings carried a key compare as stably.
"""

from __future__ import annotations

import json
from pathlib import Path

from webhook_server import Answer, WebhookServer

from computefence.cli import main


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _demo(capsys, history: Path, *extra: str) -> tuple[int, dict, str]:
    code, out, err = _cli(capsys, "fleet", "check", "--demo", "--history", str(history), "--format", "json", *extra)
    return code, json.loads(out), err


def _temp_paths(report: dict) -> set[str]:
    """The per-run folders the report's finding subjects sit in."""
    return {
        f["subject"].split("/")[2]
        for h in report["hosts"]
        for f in h["findings"]
        if (f.get("subject") or "").startswith("/tmp/cf-demo-")
    }


def test_two_identical_demo_runs_report_no_changes_and_alert_nobody(tmp_path, capsys, monkeypatch):
    history = tmp_path / "runs"
    with WebhookServer(Answer(204)) as hook:
        monkeypatch.setenv("COMPUTEFENCE_NOTIFY", hook.url)
        first_code, first, _ = _demo(capsys, history, "--notify-on", "change")
        second_code, second, err = _demo(capsys, history, "--notify-on", "change")
    assert first_code == second_code == 1
    # The runs really did name their findings under different folders.
    assert len(_temp_paths(first)) == len(_temp_paths(second)) == 1
    assert _temp_paths(first) != _temp_paths(second)
    changes = second["changes"]
    assert changes["since"] == first["generated_at"]
    assert {k: v for k, v in changes.items() if k != "since"} == {
        "new": [],
        "cleared": [],
        "appeared": [],
        "vanished": [],
        "status": [],
        "versions": [],
    }
    assert hook.received == [], err
    # The terminal report of the saved run says so too.
    saved = sorted(history.glob("*.json"))
    assert len(saved) == 2
    _, shown, _ = _cli(capsys, "report", "diff", str(saved[0]), str(saved[1]))
    assert "nothing changed" in shown and "new blocker" not in shown and "cleared" not in shown


def test_a_path_key_names_the_pods_own_place(tmp_path, capsys):
    _, report, _ = _demo(capsys, tmp_path / "runs")
    ephemeral = next(h for h in report["hosts"] if h["name"] == "pod-ephemeral-ckpt")
    keys = {f["check"]: f["key"] for f in ephemeral["findings"] if f["severity"] in ("warn", "block")}
    assert keys["storage.output-dir"] == "<output_dir>"
    assert keys["storage.hf-cache"] == "<hf_cache>"
    assert keys["accelerate.num-processes"] == "~/.cache/huggingface/accelerate/default_config.yaml"


def test_a_real_change_between_demo_runs_still_shows_and_alerts(tmp_path, capsys, monkeypatch):
    history = tmp_path / "runs"
    with WebhookServer(Answer(204)) as hook:
        monkeypatch.setenv("COMPUTEFENCE_NOTIFY", hook.url)
        _demo(capsys, history, "--limit", "!pod-ephemeral-ckpt", "--notify-on", "change")
        _, second, _ = _demo(capsys, history, "--notify-on", "change")
    changes = second["changes"]
    assert changes["appeared"] == ["pod-ephemeral-ckpt"]
    new = {(c["host"], c["finding"]["check"], c["severity_after"]) for c in changes["new"]}
    assert ("pod-ephemeral-ckpt", "storage.output-dir", "block") in new
    assert changes["cleared"] == []
    assert len(hook.received) == 1


def _edited(path: Path, edit) -> Path:
    report = json.loads(path.read_text())
    edit(report)
    path.write_text(json.dumps(report))
    return path


def _finding(report: dict, pod: str, check: str) -> dict:
    host = next(h for h in report["hosts"] if h["name"] == pod)
    return next(f for f in host["findings"] if f["check"] == check)


def test_a_report_saved_before_keys_compares_stably_and_a_changed_finding_shows(tmp_path, capsys):
    history = tmp_path / "runs"
    _demo(capsys, history)
    _demo(capsys, history)
    older, newer = sorted(history.glob("*.json"))

    def without_keys(report: dict) -> None:
        for host in report["hosts"]:
            for finding in host["findings"]:
                finding.pop("key", None)

    _edited(older, without_keys)
    code, shown, err = _cli(capsys, "report", "diff", str(older), str(newer), "--format", "json")
    assert code == 0, err
    assert json.loads(shown)["new"] == [] and json.loads(shown)["cleared"] == []

    # The output dir's blocker eases to a warning: a change, whatever the folders are called.
    _edited(newer, lambda r: _finding(r, "pod-ephemeral-ckpt", "storage.output-dir").update(severity="warn"))
    code, shown, _ = _cli(capsys, "report", "diff", str(older), str(newer), "--format", "json")
    diff = json.loads(shown)
    assert [(c["finding"]["check"], c["severity_before"], c["severity_after"]) for c in diff["cleared"]] == [
        ("storage.output-dir", "block", "warn")
    ]


def test_a_different_path_outside_the_pods_places_is_a_different_finding(tmp_path, capsys):
    history = tmp_path / "runs"
    _demo(capsys, history)
    _demo(capsys, history)
    older, newer = sorted(history.glob("*.json"))

    def moved(report: dict) -> None:
        finding = _finding(report, "pod-ephemeral-ckpt", "storage.output-dir")
        finding.update(subject="/mnt/elsewhere/checkpoints", key="/mnt/elsewhere/checkpoints")

    _edited(newer, moved)
    _, shown, _ = _cli(capsys, "report", "diff", str(older), str(newer), "--format", "json")
    diff = json.loads(shown)
    assert [c["finding"]["subject"] for c in diff["new"]] == ["/mnt/elsewhere/checkpoints"]
    assert [c["finding"]["key"] for c in diff["cleared"]] == ["<output_dir>"]
