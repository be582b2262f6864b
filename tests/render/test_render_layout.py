"""The fleet report at 80, 100 and 140 columns for 1, 6, 31 and 200 pods, as snapshots a
person can read (tests/render/snapshots/*.txt), and the rules every layout keeps.

After an intended change: CF_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/render/test_render_layout.py,
then read the diff of the snapshots before committing them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from recorded_fleets import recorded_fleet

from computefence.render import render, views
from computefence.render.columns import Column, fit_table, wrap
from computefence.text import plural

SNAPSHOTS = Path(__file__).parent / "snapshots"
WIDTHS = (80, 100, 140)
SIZES = (1, 6, 31, 200)
# A fix line is never folded (it is pasted into a shell); the terminal wraps it softly.
FIX_LINE = re.compile(r"^ +fix: ")


def _snapshot(name: str, text: str) -> str:
    path = SNAPSHOTS / name
    if os.environ.get("CF_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pods", SIZES)
def test_fleet_report_matches_its_snapshot(pods, width):
    text = render(recorded_fleet(pods), "rich", width=width)
    assert text == _snapshot(f"fleet-{pods}-pods-{width}-columns.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pods", SIZES)
def test_no_line_is_wider_than_the_terminal_except_fix_commands(pods, width):
    lines = render(recorded_fleet(pods), "rich", width=width).splitlines()
    assert [line for line in lines if len(line) > width and not FIX_LINE.match(line)] == []


def _fragments(words: set[str]) -> set[str]:
    """Pieces a word would leave if it were split: every proper prefix and suffix."""
    pieces = {word[:i] for word in words for i in range(2, len(word))} | {
        word[i:] for word in words for i in range(1, len(word) - 1)
    }
    return pieces - words


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pods", SIZES)
def test_gpu_names_and_torch_versions_are_never_split_mid_word(pods, width):
    report = recorded_fleet(pods)
    cells = {views.gpu_cell(h) for h in report.hosts} | {views.torch_cell(h) for h in report.hosts}
    words = {word for cell in cells for word in cell.split()}
    table = render(report, "rich", width=width).split("\n\n")[0]
    seen = set(table.split())
    assert seen & _fragments(words) == set()


def test_narrow_terminals_shorten_headers_and_say_a_one_value_column_once():
    wide = render(recorded_fleet(6), "rich", width=140).splitlines()[1]
    assert wide.split() == ["Pod", "Provider", "GPUs", "torch", "/", "CUDA", "Status", "Blockers", "Warnings"]
    narrow = render(recorded_fleet(6), "rich", width=80).splitlines()[1:3]
    assert narrow[0] == "Provider of every pod: runpod"
    assert narrow[1].split() == ["Pod", "GPUs", "torch", "Status", "Blk", "Warn"]
    # Too narrow for any table: each pod over two lines, nothing cut.
    report = recorded_fleet(6)
    stacked = render(report, "rich", width=50).splitlines()
    old = next(h for h in report.hosts if h.name == "pod-old-driver")
    counts = f"{plural(old.blockers, 'blocker')}, {plural(old.warnings, 'warning')}"
    assert f"pod-old-driver  blocked  {counts}" in stacked
    assert "  1x A100-SXM4-40GB · 2.6.0+cu126 · runpod" in stacked


def test_the_summary_names_few_ready_pods_and_points_at_healthy_out_for_many():
    text = render(recorded_fleet(31), "rich", width=140)
    assert text.rstrip().splitlines()[-1] == (
        "Ready: pod-healthy-01, pod-healthy-02, pod-healthy-03, pod-healthy-04, pod-healthy-05, pod-healthy-06"
    )
    assert render(recorded_fleet(200), "rich", width=100).rstrip().splitlines()[-1] == (
        "34 pods ready: --healthy-out FILE writes their names"
    )


def test_group_by_pod_lists_each_pods_verdict_and_its_fixes_in_order():
    text = render(recorded_fleet(6), "rich", width=80, group_by="pod")
    assert text == _snapshot("fleet-6-pods-80-columns-by-pod.txt", text)
    pods = text[text.index("\nPods\n") : text.index("\nGive these pods back")]
    # Worst first, ready pods not repeated, each pod's fixes right under its findings.
    heads = [line.split(" · ")[0] for line in pods.splitlines() if " · " in line and not line.startswith(" ")]
    assert heads == ["pod-cpu-torch", "pod-driver-broken", "pod-ephemeral-ckpt", "pod-old-driver", "pod-unreachable"]
    cpu = pods[pods.index("pod-cpu-torch") : pods.index("pod-driver-broken")]
    assert (
        "gpu.torch-cpu-build" in cpu
        and "fix: /root/.pyenv/versions/3.11.7/bin/python3 -m pip uninstall -y torch" in cpu
    )


def test_quiet_is_the_verdict_and_the_pods_that_are_not_ready():
    text = render(recorded_fleet(6), "rich", width=80, quiet=True)
    assert text == _snapshot("fleet-6-pods-80-columns-quiet.txt", text)
    lines = text.rstrip().splitlines()
    pods = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert lines[0].startswith(" BLOCKED ")
    assert pods == ["pod-cpu-torch", "pod-driver-broken", "pod-ephemeral-ckpt", "pod-old-driver", "pod-unreachable"]


def test_wrap_breaks_only_between_tokens():
    assert wrap("1x GeForce RTX 4090", 14, " ") == ["1x GeForce RTX", "4090"]
    assert wrap("~/.ssh/id_ed25519", 8, ", ") == ["~/.ssh/id_ed25519"]
    assert wrap("a, b, c", 4, ", ") == ["a,", "b, c"]


def test_fit_table_gives_up_when_no_layout_fits():
    from rich.text import Text

    rows = [[Text("a-very-long-unbreakable-name"), Text("x")]]
    assert fit_table([Column("Name"), Column("X")], rows, 20) is None
    assert fit_table([Column("Name"), Column("X")], rows, 40) is not None
