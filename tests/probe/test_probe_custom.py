"""The probe's custom-check runner: `sh -c` as written, own process group, timeout, capped output."""

from __future__ import annotations

import os
import time

from computefence.probe.custom import collect_custom


def run(*checks: dict, budget: float = 30.0) -> dict[str, dict]:
    params = {"custom": list(checks), "_deadline": time.time() + budget}
    return {r["id"]: r for r in collect_custom(params)}


def test_exit_status_output_and_shell_syntax_as_written():
    results = run(
        {"id": "ok", "run": "echo 'a  b' \"$((1+2))\"; echo err >&2"},
        {"id": "fails", "run": "exit 7"},
        {"id": "missing", "run": "no-such-command-xyz"},
    )
    assert results["ok"]["exit_code"] == 0 and results["ok"]["stdout"] == "a  b 3\n"
    assert results["ok"]["stderr"] == "err\n" and not results["ok"]["timed_out"]
    assert results["fails"]["exit_code"] == 7
    assert results["missing"]["exit_code"] == 127


def test_timeout_kills_the_whole_process_group_and_side_by_side_checks_do_not_add_up(tmp_path):
    marker = tmp_path / "child.pid"
    started = time.monotonic()
    results = run(
        {"id": "hangs", "run": f"sleep 300 & echo $! > {marker}; wait", "timeout": 1},
        {"id": "also", "run": "sleep 300", "timeout": 1},
    )
    assert time.monotonic() - started < 6
    assert results["hangs"]["timed_out"] and results["hangs"]["signal"] == 9
    assert results["hangs"].get("exit_code") is None and results["also"]["timed_out"]
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}") or "Z" in open(f"/proc/{child}/stat").read().split()[2]


def test_output_is_capped_at_64_kib_and_a_signal_is_reported():
    results = run(
        {"id": "floods", "run": "head -c 10000000 /dev/zero | tr '\\0' x"}, {"id": "crashes", "run": "kill -SEGV $$"}
    )
    assert results["floods"]["exit_code"] == 0 and results["floods"]["output_truncated"]
    assert results["floods"]["stdout"] == "x" * 512  # only the tail comes back
    assert results["crashes"]["signal"] == 11 and results["crashes"].get("exit_code") is None


def test_the_pattern_is_matched_on_the_pod_over_the_whole_capped_output():
    results = run(
        {"id": "early", "run": "echo token=abc; seq 1 5000", "stdout_matches": "^token=abc$"},
        {"id": "absent", "run": "echo nope", "stdout_matches": "yes"},
        {"id": "none", "run": "echo hi"},
    )
    assert results["early"]["stdout_matched"] is True and "token=abc" not in results["early"]["stdout"]
    assert results["absent"]["stdout_matched"] is False
    assert "stdout_matched" not in results["none"]


def test_a_check_never_outlives_the_probes_budget():
    results = run({"id": "long", "run": "sleep 300", "timeout": 600}, budget=1.5)
    assert results["long"]["timed_out"] and results["long"]["timeout_s"] <= 1.5
