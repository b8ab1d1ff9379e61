"""Following in the browser: follow a player from a row of the daily leaderboard and by name,
see the friends' view with their ranks on the whole board, unfollow; and an invitation to a
race shown as a notice whose Join takes a seat."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from playwright.async_api import Browser, expect

from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import open_page, register
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer
from tests.helpers import register as register_over_rest

DATE = dt.date(2026, 3, 14)  # the test clock's day
Client = TestClient[Any, Any]


async def test_follow_from_a_board_row_and_see_the_friends_view(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    # (The client is kept open to the end: closing it would stop the server.)
    async with TestClient(server) as client:
        await _follow_and_see_the_friends_view(browser, base, server, client, page_errors)
    assert page_errors == []


async def _follow_and_see_the_friends_view(
    browser: Browser, base: str, server: TestServer, client: Client, page_errors: list[str]
) -> None:
    players = [await register_over_rest(client, n) for n in ("Cy", "Dee", "Bob", "Ada")]
    cy, dee, bob, ada = (p["id"] for p in players)
    done = dt.datetime(2026, 3, 14, 9, tzinfo=dt.UTC)
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(cy, 900, 30, 50_000, done, daily_date=DATE),
            Seed(dee, 800, 30, 50_000, done, daily_date=DATE),
            Seed(bob, 700, 30, 60_000, done, daily_date=DATE),
            Seed(ada, 600, 31, 70_000, done, daily_date=DATE),
        ]
    )
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Me")
    await page.click("#nav-leaderboard")
    await expect(page.locator("#lb-table tbody tr")).to_have_count(4)

    # Follow Bob from his row of the full board.
    bob_row = page.locator(f"#lb-table tr[data-player='{bob}']")
    await bob_row.get_by_role("button", name="Follow Bob").click()
    await expect(bob_row.get_by_role("button", name="Unfollow Bob")).to_have_attribute(
        "aria-pressed", "true"
    )

    # The friends' view: Bob alone (I have no result), at his rank on the whole board.
    await page.get_by_role("button", name="Friends", exact=True).click()
    await expect(page.locator("#lb-friends")).to_have_attribute("aria-pressed", "true")
    rows = page.locator("#lb-friends-table tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.nth(0).locator("td").nth(0)).to_have_text("3")
    await expect(rows.nth(0)).to_contain_text("Bob")
    await expect(page.locator(".lb-around")).to_be_hidden()

    # Follow Ada by name (any case): she joins the view, below Bob, at her own rank.
    await page.fill("#lb-follow-name", "  ADA ")
    await page.click("#lb-follow-submit")
    await expect(page.locator("#lb-follow-status")).to_have_text("You follow Ada now.")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(1)).to_contain_text("Ada")
    await expect(rows.nth(1).locator("td").nth(0)).to_have_text("4")
    await page.fill("#lb-follow-name", "Nobody")
    await page.click("#lb-follow-submit")
    await expect(page.locator("#lb-follow-status")).to_have_text("There is no such player.")

    # Unfollow Bob from his row here; back to everyone, the whole board again.
    await rows.nth(0).get_by_role("button", name="Unfollow Bob").click()
    await expect(rows).to_have_count(1)
    await expect(rows.nth(0)).to_contain_text("Ada")
    await page.get_by_role("button", name="Everyone").click()
    await expect(page.locator("#lb-table tbody tr")).to_have_count(4)
    await expect(
        page.locator(f"#lb-table tr[data-player='{ada}']").get_by_role("button")
    ).to_have_text("Unfollow")
    await context.close()


async def test_an_invitation_is_a_notice_whose_join_takes_a_seat(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    async with TestClient(server) as client:  # (closing it would stop the server)
        context, page = await open_page(browser, base, page_errors)
        await register(page, "Me")
        me: Any = await page.evaluate("() => window.tripeaks.store.player")
        host = await register_over_rest(client, "Host")
        followed = await client.put(
            f"/api/v1/players/me/following/{me['id']}",
            headers={"Authorization": f"Bearer {host['token']}"},
        )
        assert followed.status == 200, await followed.text()
        hosting, _ = await WsPlayer.connect(client, host["token"])
        room = (await hosting.request({"type": "race_create"}))["race"]
        reply = await hosting.request(
            {"type": "invite_to_race", "invite": room["invite"], "player_id": me["id"]}
        )
        assert reply["type"] == "invited", reply

        notice = page.locator(f"#invitations .invitation[data-invite='{room['invite']}']")
        await expect(notice).to_contain_text(f"Host invites you to race {room['invite']}.")
        await notice.get_by_role("button", name="Join").click()
        await expect(page.locator("#invitations")).to_be_hidden()
        await expect(page.locator("#race-invite-code")).to_have_text(room["invite"])
        await expect(page.locator("#race-players")).to_contain_text("Me")
        await hosting.close()
        await context.close()
    assert page_errors == []


async def test_the_lobby_lists_followed_players_online_and_invites_one(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    async with TestClient(server) as client:  # (closing it would stop the server)
        guest = await register_over_rest(client, "Gus")
        away = await register_over_rest(client, "Ola")
        context, page = await open_page(browser, base, page_errors)
        await register(page, "Hana")
        token: Any = await page.evaluate("() => window.tripeaks.store.token")
        for player in (guest, away):
            followed = await client.put(
                f"/api/v1/players/me/following/{player['id']}",
                headers={"Authorization": f"Bearer {token}"},
            )
            assert followed.status == 200, await followed.text()
        guest_ws, _ = await WsPlayer.connect(client, guest["token"])  # Gus is online, Ola not

        await page.click(".race-create summary")
        await page.click("#btn-race-create")
        invite = await page.locator("#race-invite-code").text_content()
        friends = page.locator("#race-friends li")
        await expect(friends).to_have_count(1)
        await expect(friends.nth(0)).to_contain_text("Gus")
        await friends.nth(0).get_by_role("button", name="Invite Gus to this race").click()
        await expect(friends.nth(0).get_by_role("button")).to_have_text("Invited")
        await expect(friends.nth(0).get_by_role("button")).to_be_disabled()
        told = await guest_ws.until("race_invite")
        assert told == {"type": "race_invite", "invite": invite, "from": told["from"]}
        assert told["from"]["name"] == "Hana"

        # Gus takes a seat: nobody online is missing, and the lobby does not say nobody is on.
        await guest_ws.request({"type": "race_join", "invite": invite})
        await expect(page.locator("#race-players")).to_contain_text("Gus")
        await expect(friends).to_have_count(0)
        await expect(page.locator("#race-friends-none")).to_have_text(
            "Everyone you follow who is online is already in this room."
        )
        await guest_ws.close()
        await context.close()
    assert page_errors == []
