"""The HTML page has what the terminal has (the pods to give back with $/h, the pods not
checked with reason and fix), and at 1280 px and 390 px nothing overlaps or is clipped: the
Copy button beside a long command, the history chart on a phone, one rule over the first pod.
Loaded in headless Chromium; screenshots kept as artefacts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from browser import Browser, artifacts_dir, require_browser

from computefence.demo import DEMO_RECORDING

WIDTHS = (1280, 390)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "computefence", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def browser():
    require_browser()
    chromium = Browser()
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> tuple[Path, Path]:
    """The demo recording as a report page, and a history page of three of its runs."""
    folder = tmp_path_factory.mktemp("pages")
    report, saved = folder / "fleet.html", folder / "fleet.json"
    assert _cli("fleet", "check", "--replay", str(DEMO_RECORDING), "-f", "html", "-o", str(report)).returncode == 1
    assert _cli("fleet", "check", "--replay", str(DEMO_RECORDING), "-f", "json", "-o", str(saved)).returncode == 1
    runs = folder / "runs"
    runs.mkdir()
    for stamp in ("20261201T120000Z", "20261201T121500Z", "20261201T123000Z"):
        (runs / f"{stamp}.json").write_text(saved.read_text())
    history = folder / "history.html"
    done = _cli("report", "history", str(runs), "-o", str(history))
    assert done.returncode == 0, done.stderr
    return report, history


_LAYOUT = """() => {
    const box = e => e.getBoundingClientRect();
    const overlaps = [...document.querySelectorAll('.fix')].filter(f => {
        const b = f.querySelector('.copy'), p = f.querySelector('pre');
        if (!b || !p || b.offsetParent === null) return false;
        const x = box(b), y = box(p);
        return x.left < y.right && y.left < x.right && x.top < y.bottom && y.top < x.bottom;
    }).length;
    const pod = document.querySelector('section.pod');
    const rules = pod ? [getComputedStyle(pod.previousElementSibling).borderBottomWidth,
                         getComputedStyle(pod).borderTopWidth] : [];
    return {overlaps, rules, fixes: document.querySelectorAll('.fix .copy').length};
}"""

_CHART = """() => [...document.querySelectorAll('svg.trend')].map(svg => {
    const wrap = svg.closest('.svg-wrap');
    return {svg: svg.getBoundingClientRect().width, box: wrap.clientWidth};
})"""


@pytest.mark.parametrize("width", WIDTHS)
def test_report_page_has_the_terminal_sections_and_nothing_overlaps(browser, pages, width, tmp_path):
    report, _ = pages
    loaded = browser.open(
        report, width, screenshot=artifacts_dir(tmp_path) / f"report-{width}.png", actions=lambda p: p.evaluate(_LAYOUT)
    )

    layout = loaded.result
    assert layout["fixes"] > 3 and layout["overlaps"] == 0, layout
    # The "Each pod" heading draws the rule over the first pod; the pod draws no second one.
    assert layout["rules"] == ["1px", "0px"], layout
    text = loaded.text
    give_back = text[text.index("Give these pods back") :][:300]
    assert "pod-old-driver" in give_back and "$1.29/h" in give_back and "gpu.driver-too-old" in give_back
    not_checked = text[text.index("Pods not checked") :]
    assert "pod-unreachable" in not_checked[:400] and "connection refused" in not_checked[:400]
    assert "ssh -o ConnectTimeout=10" in not_checked[:800]
    assert loaded.scroll_width <= width and loaded.errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_history_chart_is_whole_at_this_width(browser, pages, width, tmp_path):
    _, history = pages
    loaded = browser.open(
        history,
        width,
        screenshot=artifacts_dir(tmp_path) / f"history-{width}.png",
        actions=lambda p: p.evaluate(_CHART),
    )

    assert loaded.result, "no trend chart on the page"
    for chart in loaded.result:
        assert chart["svg"] <= chart["box"] + 0.5, chart  # drawn inside its box, not cut at its edge
    assert loaded.scroll_width <= width and loaded.errors == []
