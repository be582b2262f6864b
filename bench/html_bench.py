"""`--format html` on a 1,000-pod replayed fleet: how big the page is and how long headless
Chromium takes to show it, beside the Markdown and JSON reports of the same run.

The fleet is the demo recording (computefence/demo/recordings/fleet, six pods: one ready,
four blocked, one unreachable) repeated under new names, served by `fleet check --replay`,
so the whole CLI runs (replay, evaluation, report) with no pod anywhere.

    python3 bench/html_bench.py                 # 1,000 pods, 3 timed runs
    python3 bench/html_bench.py --pods 5000 --runs 5

Targets (issue #26): the page under 5 MB, shown by headless Chromium in under 2 s. "Shown" is
Playwright's page.goto(file://..., wait_until="load") and two animation frames after it (the
first paint is done), in a browser already started; the cold `chromium --headless
--screenshot` process a user could run is timed too, browser start included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "computefence" / "demo" / "recordings" / "fleet"
CHROMIUM = os.environ.get("COMPUTEFENCE_CHROMIUM", "/usr/bin/chromium")
SIZE_LIMIT = 5 * 10**6
SHOW_LIMIT_S = 2.0


def make_recording(folder: Path, pods: int) -> None:
    """`pods` recordings cycling through the demo's six, each under its own name."""
    sources = [json.loads(p.read_text()) for p in sorted(DEMO.glob("*.json"))]
    folder.mkdir(parents=True)
    width = len(str(pods))
    for index in range(pods):
        document = json.loads(json.dumps(sources[index % len(sources)]))
        name = f"{document['target']['name']}-{index:0{width}d}"
        document["target"]["name"] = name
        (folder / f"{index:0{width}d}-{name}.json").write_text(json.dumps(document))


def cli(*args: str) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "computefence", *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"computefence {' '.join(args)} failed ({result.returncode}): {result.stderr[-500:]}")
    return elapsed


def show_times(page: Path, runs: int, width: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    url = page.resolve().as_uri()
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for _ in range(runs + 1):  # the first is a warm-up
            context = browser.new_context(viewport={"width": width, "height": 900})
            tab = context.new_page()
            errors: list[str] = []
            tab.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            started = time.perf_counter()
            tab.goto(url, wait_until="load")
            tab.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            shown = time.perf_counter() - started
            timing = tab.evaluate(
                """() => {
                    const nav = performance.getEntriesByType('navigation')[0];
                    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
                    return {dom_content_loaded_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd,
                            fcp_ms: fcp ? fcp.startTime : null, elements: document.getElementsByTagName('*').length};
                }"""
            )
            out.append({"shown_s": shown, **timing, "console_errors": len(errors)})
            context.close()
        browser.close()
    return out[1:]


def cold_screenshot(page: Path, shot: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1600,900",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="cf-html-bench-"))
    try:
        recording = work / "recording"
        make_recording(recording, args.pods)
        replay = ["fleet", "check", "--replay", str(recording)]
        files = {fmt: work / f"report.{ext}" for fmt, ext in (("html", "html"), ("markdown", "md"), ("json", "json"))}
        render_s = {fmt: [] for fmt in files}
        for _ in range(args.runs):
            for fmt, path in files.items():
                render_s[fmt].append(cli(*replay, "--format", fmt, "-o", str(path)))
        sizes = {fmt: path.stat().st_size for fmt, path in files.items()}
        shows = {width: show_times(files["html"], args.runs, width) for width in (1600, 375)}
        cold = [cold_screenshot(files["html"], work / "shot.png") for _ in range(args.runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    results = {
        "pods": args.pods,
        "runs": args.runs,
        "cli_wall_s_median": {fmt: statistics.median(v) for fmt, v in render_s.items()},
        "bytes": sizes,
        "chromium": {str(w): v for w, v in shows.items()},
        "cold_chromium_screenshot_s": cold,
    }
    print(f"{args.pods} pods, median of {args.runs} runs (load {os.getloadavg()[0]:.1f})")
    print(f"{'format':10} {'bytes':>12} {'CLI wall s':>11}")
    for fmt in files:
        print(f"{fmt:10} {sizes[fmt]:12,} {results['cli_wall_s_median'][fmt]:11.2f}")
    for width, runs in shows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("shown_s", "dom_content_loaded_ms", "load_ms")}
        fcp = [r["fcp_ms"] for r in runs if r["fcp_ms"] is not None]
        print(
            f"chromium {width:>4} px: shown {med['shown_s']:.2f} s (DOMContentLoaded {med['dom_content_loaded_ms']:.0f} ms, "
            f"load {med['load_ms']:.0f} ms, first paint {statistics.median(fcp) if fcp else float('nan'):.0f} ms), "
            f"{runs[0]['elements']:,} elements, {max(r['console_errors'] for r in runs)} console errors"
        )
    print(f"cold `chromium --headless --screenshot` (browser start included): {statistics.median(cold):.2f} s")
    size_ok = sizes["html"] < SIZE_LIMIT
    worst_show = max(statistics.median(r["shown_s"] for r in runs) for runs in shows.values())
    show_ok = worst_show < SHOW_LIMIT_S
    print(
        f"page {sizes['html'] / 1e6:.2f} MB ({'under' if size_ok else 'OVER'} 5 MB), "
        f"shown in {worst_show:.2f} s ({'under' if show_ok else 'OVER'} 2 s)"
    )
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"html_bench_{args.pods}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if size_ok and show_ok else 1


if __name__ == "__main__":
    sys.exit(main())
