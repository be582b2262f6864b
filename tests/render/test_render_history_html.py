"""`computefence report history DIR -o pool.html`: a pool's saved runs as one page, built from
three replayed demo runs (and the README's cron line as pasted), loaded in headless Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sample_reports
from browser import WIDTHS, Browser, artifacts_dir, require_browser
from test_render_html import strict_parse

from computefence.demo import DEMO_RECORDING
from computefence.demo.fleet import DEMO_PODS
from computefence.models import Report

README = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
REPLAY = ["fleet", "check", "--replay", str(DEMO_RECORDING)]
# Three runs that differ: two pods appear in the second, a blocker clears in the third.
RUNS = (
    ["--limit", "pod-healthy,pod-cpu-torch,pod-driver-broken,pod-unreachable"],
    [],
    ["--skip", "storage.output-dir"],
)


def computefence(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "computefence", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, Path, list[Report]]:
    """The three runs saved with --history, and the page drawn from them."""
    folder = tmp_path_factory.mktemp("pool")
    runs = folder / "runs"
    for extra in RUNS:
        assert computefence(*REPLAY, "--history", str(runs), "--format", "json", *extra).returncode == 1
    page = folder / "pool.html"
    result = computefence("report", "history", str(runs), "-o", str(page))
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"computefence: wrote the history page to {page}\n"
    saved = [Report.model_validate_json(p.read_text()) for p in sorted(runs.glob("*.json"))]
    assert len(saved) == 3
    return runs, page, saved


@pytest.fixture(scope="module")
def browser():
    require_browser()
    chromium = Browser()
    yield chromium
    chromium.close()


def test_history_page_is_valid_html5(history):
    strict_parse(history[1].read_text())


def test_history_page_in_chromium_at_both_widths(browser, history, tmp_path):
    _, page, saved = history
    out = artifacts_dir(tmp_path)
    for width in WIDTHS:
        loaded = browser.open(page, width, screenshot=out / f"history-{width}.png")
        assert loaded.requests == [] and loaded.errors == []
        for pod in DEMO_PODS:
            assert pod.name in loaded.text
        # Every blocker and warning of every run is named in some cell's tooltip.
        problems = {
            f.check for r in saved for h in r.hosts for f in h.findings if f.severity.value in ("block", "warn")
        }
        assert {c for c in problems if c not in loaded.content} == set()
        assert loaded.scroll_width <= width
        assert loaded.screenshot.stat().st_size > 20_000


def test_matrix_has_a_cell_per_pod_and_run_with_its_findings(browser, history):
    _, page, _ = history

    def cells(page):
        return page.eval_on_selector_all(
            "svg.matrix g",
            "gs => gs.map(g => [g.querySelector('rect').getAttribute('class'), g.querySelector('title').textContent])",
        )

    found = browser.open(page, 1600, actions=cells).result
    assert len(found) == len(DEMO_PODS) * len(RUNS)
    by_pod: dict[str, list[tuple[str, str]]] = {}
    for css, title in found:
        by_pod.setdefault(title.split(" · ")[0], []).append((css, title))
    # Oldest run first: the two pods the first run left out are absent there.
    assert [css for css, _ in by_pod["pod-ephemeral-ckpt"]] == ["cell-absent", "cell-blocked", "cell-blocked"]
    assert [css for css, _ in by_pod["pod-healthy"]] == ["cell-ready"] * 3
    assert [css for css, _ in by_pod["pod-unreachable"]] == ["cell-not-checked"] * 3
    assert "gpu.torch-cpu-build (block)" in by_pod["pod-cpu-torch"][2][1]
    assert "storage.output-dir (block)" in by_pod["pod-ephemeral-ckpt"][1][1]
    assert "storage.output-dir" not in by_pod["pod-ephemeral-ckpt"][2][1]
    # Not by colour alone: blocked and unchecked cells carry a mark.
    marks = browser.open(
        page, 1600, actions=lambda p: p.eval_on_selector_all("svg.matrix text.cell-mark", "t => t.length")
    )
    assert marks.result == sum(1 for css, _ in found if css in ("cell-blocked", "cell-not-checked", "cell-warnings"))


def test_history_sections(browser, history):
    _, page, _ = history
    text = browser.open(page, 1600).text
    assert "3 runs" in text and "Ready now: pod-healthy" in text
    # Newest changes first: the third run cleared storage.output-dir on pod-ephemeral-ckpt.
    changes = text.split("Newest changes", 1)[1]
    assert changes.index("cleared blocker pod-ephemeral-ckpt: storage.output-dir") < changes.index(
        "appeared pod-old-driver"
    )
    failing = text.split("Pods that failed most", 1)[1]
    lines = [line for line in failing.splitlines() if line.startswith("pod-")]
    # Three runs blocked or unreachable first; pods seen in two runs after them.
    assert [line.split("\t")[0].split()[0] for line in lines][:3] == [
        "pod-cpu-torch",
        "pod-driver-broken",
        "pod-unreachable",
    ]
    assert "gpu.torch-cpu-build ×3" in failing


def test_hostile_names_in_history_are_text(browser, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    report = sample_reports.html_hostile_report()
    for stamp in ("20250601T120000Z", "20250601T121500Z"):
        (runs / f"{stamp}.json").write_text(report.model_dump_json())
    page = tmp_path / "pool.html"
    assert computefence("report", "history", str(runs), "-o", str(page)).returncode == 0
    strict_parse(page.read_text())

    def count(page):
        return page.evaluate(
            "() => [document.querySelectorAll('script').length, document.querySelectorAll('img').length]"
        )

    loaded = browser.open(page, 1600, actions=count)
    assert loaded.result == [1, 0] and loaded.errors == [] and loaded.requests == []
    assert sample_reports.SCRIPT_NAME in loaded.text and sample_reports.IMG_NAME in loaded.text


def test_unreadable_runs_are_skipped_and_no_runs_is_exit_2(tmp_path, history):
    runs = tmp_path / "runs"
    runs.mkdir()
    empty = computefence("report", "history", str(runs))
    assert (
        empty.returncode == 2 and empty.stderr.count("\n") == 1 and "holds no readable computefence run" in empty.stderr
    )
    (runs / "20250601T120000Z.json").write_text('{"hosts": "<script>"')
    (runs / "20250601T121500Z.json").write_bytes(sorted(history[0].glob("*.json"))[-1].read_bytes())
    result = computefence("report", "history", str(runs))
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert re.search(
        r"warning: history: skipping .*20250601T120000Z\.json is not a computefence JSON report", result.stderr
    )
    assert result.stdout.startswith("<!DOCTYPE html>") and "1 run," in result.stdout
    missing = computefence("report", "history", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a directory" in missing.stderr and "Traceback" not in missing.stderr


def _readme_cron_line() -> str:
    section = README.read_text().split("## Cron: history and what changed", 1)[1]
    [line] = [line for line in section.splitlines() if line.startswith("*/15 ")]
    return line


def test_readme_cron_recipe_writes_the_page_next_to_latest_md(tmp_path):
    line = _readme_cron_line()
    fields = line.split(None, 5)
    assert fields[:5] == ["*/15", "*", "*", "*", "*"]
    # cron hands the rest to /bin/sh, where a bare % would end the command.
    command = fields[5]
    assert "%" not in command
    # The one change: no pool here, so the demo's recorded pods stand in for the inventory.
    state = tmp_path / "var-lib-computefence"
    command = command.replace("-i /etc/computefence/pool.yaml", f"--replay {DEMO_RECORDING}")
    command = command.replace("/var/lib/computefence", str(state))
    state.mkdir()
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "computefence").write_text(f'#!/bin/sh\nexec {sys.executable} -m computefence "$@"\n')
    (shim / "computefence").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    for _ in range(3):
        run = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert (state / "latest.md").read_text().startswith("## ")
    assert len(list((state / "runs").glob("*.json"))) == 3
    page = (state / "pool.html").read_text()
    strict_parse(page)
    assert "3 runs" in page


def _on_machines(report: Report, machines: dict[str, str]) -> Report:
    hosts = [
        h.model_copy(update={"provider": h.provider.model_copy(update={"machine_id": machines[h.name]})})
        if h.name in machines
        else h
        for h in report.hosts
    ]
    return report.model_copy(update={"hosts": hosts})


def test_machines_that_failed_most_follow_the_provider_machine_id(history, tmp_path):
    saved = history[2][-1]
    runs = tmp_path / "runs"
    runs.mkdir()
    # pod-cpu-torch moves from m-2 to m-3; pod-old-driver stays on m-2; pod-healthy on m-1 never fails.
    placements = (
        {"pod-healthy": "m-1", "pod-cpu-torch": "m-2", "pod-old-driver": "m-2"},
        {"pod-healthy": "m-1", "pod-cpu-torch": "m-3", "pod-old-driver": "m-2"},
    )
    for stamp, machines in zip(("20250601T120000Z", "20250601T121500Z"), placements):
        (runs / f"{stamp}.json").write_text(_on_machines(saved, machines).model_dump_json())
    result = computefence("report", "history", str(runs))
    assert result.returncode == 0, result.stderr
    tree = strict_parse(result.stdout)
    section = next(s for s in tree.iter("section") if s.get("aria-labelledby") == "machines-title")
    rows = [
        ["".join(td.itertext()).strip() for td in tr.iter("td")]
        for tr in section.iter("tr")
        if tr.find("td") is not None
    ]
    # The pods given machine ids are on them; the others stand for their own machine (as in hosts).
    named = [row for row in rows if row[0].startswith("runpod m-")]
    assert [row[:4] for row in named] == [
        ["runpod m-2", "3", "3", "pod-old-driverpod-cpu-torch"],
        ["runpod m-3", "1", "1", "pod-cpu-torch"],
    ]
    assert named[0][4] == "gpu.driver-too-old ×2, gpu.torch-cpu-build ×1"
    assert rows[0][0] == "runpod m-2"


def test_without_machine_ids_each_pod_stands_for_its_own_machine_as_in_hosts(history):
    tree = strict_parse(history[1].read_text())
    section = next(s for s in tree.iter("section") if s.get("aria-labelledby") == "machines-title")
    text = "".join(section.itertext())
    assert "runpod demoolddriver" in text and "the pod's own id where none was recorded" in text
