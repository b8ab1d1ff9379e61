"""Accounts that travel, in the page: registering shows the recovery code once (copied, and
downloaded as a .txt file); a fresh browser signs in with it; the first browser's "Sign out
other devices" signs the second out at once; a new recovery code replaces the old one. And a
banned player reads why in their own language."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from server.web.keys import SERVICES
from tests.browser.support import PHONE, no_overflow, open_page, register
from tests.conftest import ServerFactory

RECOVERY_CODE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){6}$")
SIGN_IN_FAILED = "That name and recovery code do not match. Check both and try again."


async def _status(page: Page, base: str, token: str) -> int:
    """The status of ``GET /api/v1/players/me`` with ``token``, asked from the page's context."""
    resp = await page.request.get(
        f"{base}/api/v1/players/me", headers={"Authorization": f"Bearer {token}"}
    )
    return resp.status


async def _token(page: Page) -> str:
    token: str = await page.evaluate("() => window.tripeaks.store.token")
    return token


async def _welcomed(page: Page) -> None:
    await page.wait_for_function(
        "() => window.tripeaks.connection && window.tripeaks.connection.welcomes >= 1"
    )


async def _sign_in(page: Page, name: str, code: str) -> None:
    await page.fill("#signin-name", name)
    await page.fill("#signin-code", code)
    await page.click("#signin-submit")


async def test_a_recovery_code_takes_the_account_to_another_browser_and_back_out(
    browser: Browser, make_server: ServerFactory, page_errors: list[str], tmp_path: Path
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")

    # Registering (on a phone) shows the recovery code once, with what it is for.
    first_ctx, first = await open_page(browser, base, page_errors, viewport=PHONE)
    await register(first, "Ada", keep_recovery_code=True)
    panel = first.locator("#recovery")
    await expect(panel.locator("#recovery-title")).to_have_text("Your recovery code")
    await expect(first.locator("#recovery-explain")).to_contain_text("With your name (Ada)")
    await expect(first.locator("#recovery-code")).to_have_text(RECOVERY_CODE)
    code = await first.inner_text("#recovery-code")
    await expect(first.locator("#view-home")).to_be_visible()  # the menu is there below it
    await no_overflow(first)

    # Copy puts it on the clipboard; Download saves it as a text file.
    await first_ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    await first.click("#recovery-copy")
    await expect(first.locator("#recovery-status")).to_have_text("Copied")
    assert await first.evaluate("() => navigator.clipboard.readText()") == code
    async with first.expect_download() as downloading:
        await first.click("#recovery-download")
    download = await downloading.value
    assert download.suggested_filename == "tripeaks-recovery-code.txt"
    saved = tmp_path / "code.txt"
    await download.save_as(saved)
    assert saved.read_text(encoding="utf-8").startswith(f"TriPeaks recovery code for Ada: {code}\n")
    await first.click("#recovery-done")
    await expect(panel).to_be_hidden()
    assert await first.locator("#recovery-code").inner_text() == ""  # the page forgets it
    first_token = await _token(first)
    await _welcomed(first)

    # A fresh browser (its own storage) signs in with the name and the code, typed loosely; a
    # wrong code first gets one clear answer.
    second_ctx, second = await open_page(browser, base, page_errors)
    await expect(second.locator("#view-register")).to_be_visible()
    await second.click("#signin summary")
    await _sign_in(second, "ada", "7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF")
    await expect(second.locator("#signin-error")).to_have_text(SIGN_IN_FAILED)
    await _sign_in(second, "ada", code.lower().replace("-", " "))
    await expect(second.locator("#view-home")).to_be_visible()
    await expect(second.locator("#who")).to_have_text("Playing as Ada")
    await expect(second.locator("#recovery")).to_be_hidden()  # no code shown on a sign-in
    second_token = await _token(second)
    assert second_token != first_token
    await _welcomed(second)
    await no_overflow(second)

    # The first browser signs the other devices out: the second is signed out at once (its
    # websocket closed, its token refused), the first plays on.
    await first.click("#nav-settings")
    await expect(first.locator("#account")).to_be_visible()
    await first.click("#btn-sign-out-others")
    await expect(first.locator("#account-status")).to_have_text("Signed out 1 other device.")
    await expect(second.locator("#view-register")).to_be_visible()
    await expect(second.locator("#register-signed-out")).to_have_text(
        "This device was signed out. Sign in again with your recovery code below, "
        "or pick a new name."
    )
    await expect(second.locator("#who")).to_have_text("")
    assert await _token(second) is None
    assert await _status(second, base, second_token) == 401
    assert await _status(first, base, first_token) == 200
    await first.click("#btn-sign-out-others")
    await expect(first.locator("#account-status")).to_have_text("No other device was signed in.")

    # A new recovery code: shown once again; the old one no longer signs in, the new one does.
    await first.click("#btn-new-recovery")
    await expect(first.locator("#recovery")).to_be_visible()
    await expect(first.locator("#recovery-code")).to_have_text(RECOVERY_CODE)
    new_code = await first.inner_text("#recovery-code")
    assert new_code != code
    await expect(first.locator("#account-status")).to_contain_text("the old one no longer works")
    await second.click("#signin summary")
    await _sign_in(second, "Ada", code)
    await expect(second.locator("#signin-error")).to_have_text(SIGN_IN_FAILED)
    await _sign_in(second, "Ada", new_code)
    await expect(second.locator("#who")).to_have_text("Playing as Ada")
    await expect(second.locator("#register-signed-out")).to_be_hidden()
    await _welcomed(second)
    assert await _status(first, base, first_token) == 200  # the first device stays signed in

    await first_ctx.close()
    await second_ctx.close()
    assert page_errors == []


async def test_a_banned_player_reads_the_ban_and_its_reason_in_their_language(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Mallory")
    ban = await server.app[SERVICES].moderation.ban("Mallory", "played with a solver", "mod")
    since = ban.action.at.date().isoformat()

    await page.click("#btn-daily")
    await expect(page.locator("#home-error")).to_have_text(
        f"You are banned from ranked play since {since}: played with a solver. "
        "Free play and watching races are still open to you."
    )
    await page.select_option("#lang-select", "zh-Hant")
    await page.click("#btn-daily")
    await expect(page.locator("#home-error")).to_have_text(
        f"你自 {since} 起被禁止參加排名賽：played with a solver。你仍可進行自由牌局及觀看競速賽。"
    )
    await context.close()
    assert page_errors == []
