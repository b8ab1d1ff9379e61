"""Browser fixtures: Debian's Chromium at /usr/bin/chromium, driven by Playwright (async API).

The browser tests never skip: without Chromium (or Playwright) they fail, naming what to install.
Playwright's own browser download is not used (``playwright install`` cannot fetch anything here).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser

CHROMIUM = Path(os.environ.get("TRIPEAKS_CHROMIUM", "/usr/bin/chromium"))
#: Longest a page may take to reach an expected state (``expect``), to get an element ready for
#: an action, or to load: generous, as a busy machine may be slow and a condition that holds
#: ends the wait at once (Playwright's own default for ``expect`` is only 5 s).
WAIT_MS = 30_000
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _missing(what: str) -> None:
    where = "CI" if os.environ.get("CI") == "true" else "this machine"
    pytest.fail(
        f"browser tests need {what} on {where}: install Debian's chromium "
        "(apt-get update && apt-get install -y chromium) and pip install -e '.[dev]'",
        pytrace=False,
    )


@pytest.fixture
def chromium_path() -> Path:
    """Chromium's executable; the test fails (never skips) when it or Playwright is missing."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        _missing("the playwright package")
    if not CHROMIUM.exists():
        _missing(f"Chromium at {CHROMIUM}")
    return CHROMIUM


@pytest.fixture
async def browser(chromium_path: Path) -> AsyncIterator[Browser]:
    """A headless Chromium (one per test, so each test runs on its own event loop)."""
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=WAIT_MS)
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def page_errors() -> list[str]:
    """JavaScript errors and failed requests seen by the pages of a test (must stay empty)."""
    return []


def watch(page: Any, errors: list[str], base_url: str) -> None:
    """Record page errors, console errors and any request that leaves the test server."""
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

    def console(msg: Any) -> None:
        # A REST error answer (404 not_ranked, 409 name_taken) is logged by Chromium as a
        # "Failed to load resource" console error; those are checked through responses below.
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            errors.append(f"console error: {msg.text}")

    def response(resp: Any) -> None:
        path = resp.url[len(base_url) :] if resp.url.startswith(base_url) else resp.url
        if resp.status >= 400 and not path.startswith("/api/"):
            errors.append(f"HTTP {resp.status} for {resp.url}")

    page.on("console", console)
    page.on("response", response)

    def request(req: Any) -> None:
        local = (base_url, base_url.replace("http", "ws", 1), "data:", "blob:", "about:")
        if not req.url.startswith(local):
            errors.append(f"external request: {req.url}")

    page.on("request", request)
