"""--quiet and --group-by on the commands that print a report, end to end on the demo recording."""

from __future__ import annotations

import json

from computefence.cli import main
from computefence.demo import DEMO_RECORDING


def _fleet(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["fleet", "check", "--replay", str(DEMO_RECORDING), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_quiet_prints_the_verdict_and_the_pods_that_are_not_ready_and_no_progress(capsys):
    code, out, err = _fleet(capsys, "--quiet")
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(" BLOCKED  4 of 6 pods blocked, 1 not checked")
    named = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert named == ["pod-cpu-torch", "pod-driver-broken", "pod-ephemeral-ckpt", "pod-old-driver", "pod-unreachable"]


def test_group_by_pod_and_the_ready_pods_named(capsys):
    code, out, _ = _fleet(capsys, "--group-by", "pod")
    assert code == 1
    assert "\nPods\n" in out and "Findings across pods" not in out
    assert out.rstrip().splitlines()[-1] == "Ready: pod-healthy"


def test_a_saved_report_re_renders_grouped_by_pod(capsys, tmp_path):
    _, out, _ = _fleet(capsys, "--format", "json")
    saved = tmp_path / "run.json"
    saved.write_text(out)
    assert {h["name"]: h["verdict"] for h in json.loads(out)["hosts"]}["pod-unreachable"] == "not_checked"
    capsys.readouterr()
    assert main(["report", "show", str(saved), "--group-by", "pod", "--format", "markdown"]) == 1
    assert "#### pod-unreachable: unreachable" in capsys.readouterr().out


def test_unknown_group_by_is_a_usage_error(capsys):
    code, _, err = _fleet(capsys, "--group-by", "gpu")
    assert code == 2 and "gpu" in err


def test_columns_sets_the_width_of_piped_output(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = _fleet(capsys)
    # At 80 columns the demo's one provider is said above the table, which keeps the rest.
    assert out.splitlines()[1] == "Provider of every pod: runpod"
    assert out.splitlines()[2].split() == ["Pod", "GPUs", "torch", "Status", "Blk", "Warn"]
    monkeypatch.delenv("COLUMNS")
    _, out, _ = _fleet(capsys)
    assert out.splitlines()[1].split()[:3] == ["Pod", "Prov.", "GPUs"]  # 100 columns without COLUMNS


def test_a_fleet_check_collects_less_often_while_it_runs_and_leaves_the_collector_as_it_found_it(capsys, monkeypatch):
    import gc

    from computefence import evaluate

    seen = []
    build_report = evaluate.build_report

    def recording_build_report(*args, **kwargs):
        seen.append(gc.get_threshold())
        return build_report(*args, **kwargs)

    monkeypatch.setattr(evaluate, "build_report", recording_build_report)
    before = gc.get_threshold()
    assert _fleet(capsys, "--format", "json")[0] == 1
    assert seen and seen[0][0] > before[0]
    assert gc.get_threshold() == before
