"""`--format html`: one self-contained page, valid HTML5, loaded in a real headless Chromium
at phone and desktop widths; hostile names stay text and fix commands paste as shown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import html5lib
import pytest
import sample_reports
from browser import WIDTHS, Browser, artifacts_dir, require_browser

from computefence.demo import DEMO_RECORDING
from computefence.demo.fleet import DEMO_PODS
from computefence.models import Fix, FixStep, Report, StepKind
from computefence.render import render


def computefence(*args: str) -> int:
    """The CLI in its own process: Playwright's sync API holds this process's event loop."""
    return subprocess.run([sys.executable, "-m", "computefence", *args], capture_output=True, timeout=120).returncode


def strict_parse(text: str):
    """html5lib in strict mode: the first parse error raises."""
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)


def test_strict_parsing_rejects_a_misnested_page():
    # So the validity tests below can fail.
    with pytest.raises(html5lib.html5parser.ParseError):
        strict_parse("<!DOCTYPE html><title>x</title><table><tr><td>a</td></tr><p>x</p></table>")


@pytest.mark.parametrize(
    "build",
    [
        sample_reports.fleet_report,
        sample_reports.doctor_report,
        sample_reports.hostile_report,
        sample_reports.html_hostile_report,
        sample_reports.perf_report,
    ],
)
def test_every_sample_report_is_valid_html5(build):
    page = render(build(), "html")
    strict_parse(page)
    assert page.startswith("<!DOCTYPE html>")


def test_the_page_loads_nothing_from_anywhere():
    page = render(sample_reports.fleet_report(), "html")
    tree = strict_parse(page)
    # No element that fetches: only the page's own inline style and script.
    assert not tree.findall(".//link") and not tree.findall(".//img") and not tree.findall(".//iframe")
    assert [s.get("src") for s in tree.iter("script")] == [None]
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    csp = next(m.get("content") for m in tree.iter("meta") if m.get("http-equiv") == "Content-Security-Policy")
    assert csp.startswith("default-src 'none';")


def test_control_characters_never_reach_the_page(hostile_report):
    page = render(hostile_report, "html")
    assert "\x1b" not in page and "\x07" not in page
    strict_parse(page)


def test_fix_commands_are_in_the_markup_exactly_as_pasted():
    tree = strict_parse(render(sample_reports.html_hostile_report(), "html"))
    blocks = ["".join(code.itertext()) for pre in tree.iter("pre") for code in pre.iter("code")]
    assert blocks and set(blocks) == {sample_reports.PASTE_FIX}


# ---------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser():
    require_browser()
    chromium = Browser()
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory) -> tuple[Path, Report]:
    """The demo fleet's recorded run through `fleet check --format html` and `--format json`."""
    folder = tmp_path_factory.mktemp("demo")
    page, saved = folder / "demo.html", folder / "demo.json"
    assert computefence("fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "html", "-o", str(page)) == 1
    assert computefence("fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "-o", str(saved)) == 1
    return page, Report.model_validate_json(saved.read_text())


def test_demo_page_in_chromium_at_both_widths(browser, demo_page, tmp_path):
    path, report = demo_page
    strict_parse(path.read_text())
    out = artifacts_dir(tmp_path)
    checks = {f.check for host in report.hosts for f in host.findings}
    problems = {f.check for host in report.hosts for f in host.findings if f.severity.value in ("block", "warn")}
    assert {"storage.output-dir", "gpu.torch-cpu-build"} <= problems
    for width in WIDTHS:
        loaded = browser.open(path, width, screenshot=out / f"demo-{width}.png")
        assert loaded.requests == [] and loaded.errors == []
        for pod in DEMO_PODS:
            assert pod.name in loaded.text
        # Every check id is in the DOM; blockers and warnings are on show, passes may be folded.
        assert {c for c in checks if c not in loaded.content} == set()
        assert {c for c in problems if c not in loaded.unfolded} == set()
        assert "BLOCKED" in loaded.text and "Money at risk" in loaded.text
        # Nothing pushes the page sideways on a phone: wide tables and code scroll in their own box.
        assert loaded.scroll_width <= width
        assert loaded.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert loaded.screenshot.stat().st_size > 20_000


def test_the_page_reads_without_javascript(browser, demo_page, tmp_path):
    path, report = demo_page
    loaded = browser.open(path, 1600, javascript=False)
    assert loaded.errors == [] and loaded.requests == []
    for host in report.hosts:
        assert host.name in loaded.text
    for host in report.hosts:
        for finding in host.findings:
            if finding.fix and finding.severity.value in ("block", "warn"):
                assert all(command in loaded.unfolded for command in finding.fix.commands)
    # The filters need the script; without it they stay hidden rather than dead.
    assert "Search" not in loaded.text


def test_pod_table_filters_and_sorts(browser, demo_page):
    path, _ = demo_page

    def filter_blocked(page):
        page.select_option("#pod-filters select[name=status]", "blocked")
        visible = page.eval_on_selector_all(
            "#pod-table tbody tr:not([hidden]) td:first-child", "c => c.map(x => x.innerText)"
        )
        page.select_option("#pod-filters select[name=status]", "")
        page.click("#pod-table th:first-child button")
        page.click("#pod-table th:first-child button")
        ordered = page.eval_on_selector_all("#pod-table tbody tr td:first-child", "c => c.map(x => x.innerText)")
        return visible, ordered, page.inner_text("#pod-shown")

    loaded = browser.open(path, 1600, actions=filter_blocked)
    visible, ordered, shown = loaded.result
    assert visible == ["pod-cpu-torch", "pod-driver-broken", "pod-ephemeral-ckpt", "pod-old-driver"]
    assert ordered == sorted(ordered, reverse=True) and len(ordered) == len(DEMO_PODS)
    assert shown == f"{len(DEMO_PODS)} of {len(DEMO_PODS)} pods shown"
    assert loaded.errors == []


def test_hostile_names_render_as_text(browser, tmp_path):
    path = tmp_path / "hostile.html"
    path.write_text(render(sample_reports.html_hostile_report(), "html"))

    def elements(page):
        return page.evaluate(
            """() => ({
                scripts: document.querySelectorAll('script').length,
                imgs: document.querySelectorAll('img').length,
                handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                fixes: [...document.querySelectorAll('.fix pre')].map(p => p.textContent),
                pwned: window.pwned === true,
            })"""
        )

    loaded = browser.open(path, 1600, actions=elements)
    assert loaded.errors == [] and loaded.requests == []
    found = loaded.result
    assert (found["scripts"], found["imgs"], found["handlers"]) == (1, 0, 0)
    assert set(found["fixes"]) == {sample_reports.PASTE_FIX}
    assert sample_reports.SCRIPT_NAME in loaded.text and sample_reports.IMG_NAME in loaded.text


def test_perf_chart_per_gpu_model_against_the_median(browser, tmp_path):
    path = tmp_path / "perf.html"
    path.write_text(render(sample_reports.perf_report(), "html"))

    def charts(page):
        return page.eval_on_selector_all(
            "figure svg",
            "svgs => svgs.map(s => ({label: s.getAttribute('aria-label'), bars: s.querySelectorAll('rect').length,"
            " warn: s.querySelectorAll('rect.bar-warn').length, titles: [...s.querySelectorAll('title')].map(t => t.textContent)}))",
        )

    loaded = browser.open(path, 1600, actions=charts)
    assert loaded.errors == []
    by_label = {c["label"].split(":")[0]: c for c in loaded.result}
    compute = by_label["NVIDIA H100 80GB HBM3 gpu.perf-compute"]
    assert compute["bars"] == 3 and compute["warn"] == 1
    assert "median 742.0" not in compute["label"] and "median 738.0" in compute["label"]
    assert "h100-slow: 402.0 TFLOPS (warn)" in compute["titles"]
    assert by_label["NVIDIA GeForce RTX 4090 gpu.perf-compute"]["bars"] == 2
    assert len(loaded.result) == 4  # compute and PCIe for each of the two models


def test_print_stylesheet_drops_controls_and_prints_to_pdf(browser, demo_page, tmp_path):
    path, _ = demo_page
    pdf = browser.pdf(path, artifacts_dir(tmp_path) / "demo.pdf")
    data = pdf.read_bytes()
    assert (
        data.startswith(b"%PDF-")
        and data.count(b"/Type /Page\n") + data.count(b"/Type /Page>") + data.count(b"/Type/Page") >= 1
    )

    def print_styles(page):
        page.emulate_media(media="print")
        return page.evaluate(
            "() => [getComputedStyle(document.querySelector('.copy')).display,"
            " getComputedStyle(document.getElementById('pod-filters')).display,"
            " document.documentElement.scrollWidth]"
        )

    # An A4 page is 794 CSS px wide: nothing on paper is cut off at the right edge.
    assert browser.open(path, 794, actions=print_styles).result == ["none", "none", 794]


def test_doctor_writes_an_html_page(tmp_path):
    page = tmp_path / "doctor.html"
    assert computefence("doctor", "--format", "html", "-o", str(page)) in (0, 1)
    tree = strict_parse(page.read_text())
    title = "".join(tree.find(".//h1").itertext())
    assert title == "ComputeFence doctor"


def test_steps_that_are_not_safe_on_the_pod_are_marked_but_paste_as_they_are(browser, tmp_path):
    steps = [
        FixStep.local("ssh-keygen -R '[203.0.113.10]:22022'", kind=StepKind.DESTRUCTIVE),
        FixStep.safe("mkdir -p /workspace/out"),
        FixStep.disruptive("nvidia-smi -r -i 0"),
    ]
    report = sample_reports.fleet_report()
    host = report.hosts[0]
    finding = host.findings[0].model_copy(update={"fix": Fix(steps=steps)})
    report = report.model_copy(update={"hosts": [host.model_copy(update={"findings": [finding]}), *report.hosts[1:]]})
    path = tmp_path / "steps.html"
    path.write_text(render(report, "html"))
    strict_parse(path.read_text())

    def marks(page):
        return page.evaluate(
            """() => {
                const pre = [...document.querySelectorAll('.fix pre')].find(p => p.textContent.includes('ssh-keygen'));
                return [pre.textContent, [...pre.querySelectorAll('.step')].map(s => getComputedStyle(s, '::after').content)];
            }"""
        )

    loaded = browser.open(path, 1600, actions=marks)
    text, after = loaded.result
    assert text == "\n".join(step.run for step in steps)
    assert after == ['"  # local, destructive"', '"  # disruptive"']
    assert loaded.errors == []
