"""Pages loaded in a real headless Chromium (Debian's, driven by Playwright's protocol client):
every request, console message and page error recorded, screenshots kept as artefacts."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("COMPUTEFENCE_CHROMIUM", "/usr/bin/chromium")
# Screenshots go here when set (CI keeps the folder), else under pytest's tmp dir.
ARTIFACTS_ENV = "COMPUTEFENCE_TEST_ARTIFACTS"
WIDTHS = (375, 1600)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_browser() -> None:
    """Skip locally when there is no Chromium or Playwright; in CI that is a failure."""
    reason = None
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed (pip install -e '.[test]')"
    if reason is None:
        return
    if _in_ci():
        pytest.fail(f"the browser tests must run in CI, but: {reason}", pytrace=False)
    pytest.skip(reason)


def artifacts_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ[ARTIFACTS_ENV]) if os.environ.get(ARTIFACTS_ENV) else tmp_path / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Loaded:
    width: int
    text: str  # document.body.innerText: what is shown (closed <details> left out)
    content: str  # document.body.textContent: all the text in the DOM
    # The text outside closed <details>: what a reader sees without opening anything (innerText
    # would also leave out sections that content-visibility has not laid out yet).
    unfolded: str
    dom: str  # document.documentElement.outerHTML after scripts ran
    requests: list[str] = field(default_factory=list)  # every URL other than the page itself
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    screenshot: Path | None = None
    scroll_width: int = 0  # wider than the viewport: the page scrolls sideways
    result: object = None  # what `actions` returned


class Browser:
    def __init__(self):
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

    def close(self) -> None:
        self._browser.close()
        self._playwright.stop()

    def open(self, path: Path, width: int, *, javascript: bool = True, screenshot: Path | None = None, actions=None):
        """Load `path` at `width` px; `actions(page)` runs after the load (clicks, filters)."""
        context = self._browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=javascript)
        page = context.new_page()
        url = path.resolve().as_uri()
        loaded = Loaded(width=width, text="", content="", unfolded="", dom="")

        def route(route):
            if route.request.url == url:
                route.continue_()
            else:
                loaded.requests.append(route.request.url)
                route.abort()

        page.route("**/*", route)
        page.on("console", lambda m: loaded.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda exc: loaded.errors.append(f"page error: {exc}"))
        page.goto(url, wait_until="load")
        if actions is not None:
            loaded.result = actions(page)
        loaded.text = page.evaluate("document.body.innerText")
        loaded.content = page.evaluate("document.body.textContent")
        loaded.unfolded = page.evaluate(
            """() => {
                const body = document.body.cloneNode(true);
                body.querySelectorAll('details:not([open]) > :not(summary)').forEach(e => e.remove());
                return body.textContent;
            }"""
        )
        loaded.dom = page.evaluate("document.documentElement.outerHTML")
        loaded.scroll_width = page.evaluate("document.documentElement.scrollWidth")
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
            loaded.screenshot = screenshot
        context.close()
        return loaded

    def pdf(self, path: Path, out: Path) -> Path:
        """The page printed to PDF (A4), as a user's Print to PDF does."""
        context = self._browser.new_context()
        page = context.new_page()
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.emulate_media(media="print")
        page.pdf(path=str(out), format="A4")
        context.close()
        return out
