"""``GET /api/v1/players/{player_id}`` on a real server, built by real play over faked dates:
the daily history with each date's rank as the leaderboard ranks it, the streaks, the races;
nothing secret in it (today's daily and a running race show no card and no code); hidden and
banned results neither shown nor counted; bad and unknown ids refused with their codes."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text

from server.config import Settings
from server.engine import Action, GameCode, RuleSet
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, blocking_line, daily_code, find_winning_line, register

Client = TestClient[Any, Any]
#: A host's deal for the finished race (winnable).
RACE_CODE = GameCode.parse("TP1-E-AAAAAAB")


async def _finish_daily(ws: WsPlayer, code: GameCode, *, win: bool) -> dict[str, Any]:
    """Join today's daily and end it (won when ``win`` and the deal allows, else blocked)."""
    game = (await ws.request({"type": "join_daily"}))["game"]
    deal = code.deal()
    line = (find_winning_line(deal, code.rules) if win else None) or blocking_line(deal, code.rules)
    assert line is not None
    final = await ws.play(game, line)
    assert final["status"] in ("won", "blocked")
    return final


async def _profile(client: Client, player_id: int) -> tuple[str, dict[str, Any]]:
    resp = await client.get(f"/api/v1/players/{player_id}")
    assert resp.status == 200, await resp.text()
    return await resp.text(), await resp.json()


async def _board_rank(client: Client, date: str, player_id: int) -> int | None:
    resp = await client.get(f"/api/v1/daily/{date}/leaderboard/around/{player_id}?radius=0")
    if resp.status == 404:
        return None
    entries = (await resp.json())["entries"]
    return int(entries[0]["rank"])


def _secrets_of(code: GameCode, visible: set[str]) -> list[str]:
    """What must not appear while ``code`` is secret: every card of its deal not in
    ``visible`` (as text anywhere), the code, its letters without hyphens, and each group of
    seven."""
    deal = code.deal()
    cards = {str(c) for c in (*deal.tableau, deal.waste, *deal.stock)} - visible
    text = str(code)
    letters = text.split("-", 2)[2]
    groups = [g for g in letters.split("-") if len(g) == 7]
    return [*sorted(cards), text, letters.replace("-", ""), *groups]


async def test_a_profile_shows_the_daily_history_streaks_and_races_and_no_secret(
    make_server: ServerFactory, settings: Settings, clock: FakeClock
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.2, race_sweep_s=0.05)
    secret = (settings.daily_secret or "").encode()
    async with TestClient(server) as client:
        ada_info, bob_info = await register(client, "ada"), await register(client, "bob")
        ada, _ = await WsPlayer.connect(client, ada_info["token"])
        bob, _ = await WsPlayer.connect(client, bob_info["token"])
        first = clock.now().date()

        # 03-14: both finish the daily. A race on a host's deal: ada wins it, bob resigns.
        code = daily_code(secret, first, RuleSet.EASY)
        await _finish_daily(ada, code, win=True)
        await _finish_daily(bob, code, win=False)
        invite = (
            await ada.request({"type": "race_create", "code": str(RACE_CODE), "time_limit_s": 300})
        )["race"]["invite"]
        await bob.request({"type": "race_join", "invite": invite})
        await ada.request({"type": "race_start", "invite": invite})
        ada_game = (await ada.until("race_go"))["game"]
        bob_game = (await bob.until("race_go"))["game"]
        clock.advance(seconds=1)
        line = find_winning_line(RACE_CODE.deal(), RACE_CODE.rules)
        assert line is not None
        await ada.play(ada_game, line)
        await bob.request({"type": "resign", "game_id": bob_game["game_id"]})
        assert (await ada.until("race_results"))["race"]["results"][0]["name"] == "ada"

        # 03-15: ada blocks; bob does not play. 03-16 (today): ada has only begun.
        clock.advance(days=1)
        await _finish_daily(ada, daily_code(secret, clock.now().date(), RuleSet.EASY), win=False)
        clock.advance(days=1)
        today = clock.now().date()
        today_code = daily_code(secret, today, RuleSet.EASY)
        open_game = (await ada.request({"type": "join_daily"}))["game"]
        open_game = await ada.play(open_game, [Action.draw()])

        # A race on a secret random deal, still running: ada has drawn a card in it.
        running = (await ada.request({"type": "race_create", "time_limit_s": 600}))["race"]
        await bob.request({"type": "race_join", "invite": running["invite"]})
        await ada.request({"type": "race_start", "invite": running["invite"]})
        race_game = (await ada.until("race_go"))["game"]
        await bob.until("race_go")
        clock.advance(seconds=1)
        race_game = await ada.play(race_game, [Action.draw()])
        async with server.app[SERVICES].db.connect() as conn:
            stored = await conn.scalar(
                text("SELECT code FROM races WHERE invite = :invite"),
                {"invite": running["invite"]},
            )
        race_code = GameCode.parse(stored)

        shown, body = await _profile(client, ada_info["id"])
        assert body["id"] == ada_info["id"] and body["name"] == "ada"
        assert body["member_since"] == first.isoformat() and body["today"] == today.isoformat()
        days = body["days"]
        assert [d["date"] for d in days] == [
            (first + dt.timedelta(days=n)).isoformat() for n in range(3)
        ]
        assert days[1]["status"] == "blocked" and days[2]["status"] == "playing"
        assert days[2]["rank"] is None and days[2]["par_share"] is None
        assert days[2]["score"] == open_game["score"]
        for day in days[:2]:
            assert day["rank"] == await _board_rank(client, day["date"], ada_info["id"])
            assert day["par"] is not None
            assert day["par_share"] == round(day["score"] / day["par"], 4)
        # Today has no ranked result yet: the streak ending yesterday is still alive.
        assert body["streak"] == {"current": 2, "best": 2}
        assert body["ranked_days"] == 2
        assert body["best_score"] == max(d["score"] for d in days[:2])
        assert body["average_par_share"] == round(sum(d["par_share"] for d in days[:2]) / 2, 4)
        assert (body["races_played"], body["races_won"]) == (1, 1)

        # No card of today's deal nor of the running race's (the public sees none of them),
        # and neither code.
        for secret_text in _secrets_of(today_code, set()) + _secrets_of(race_code, set()):
            assert secret_text not in shown, secret_text
        assert not re.search(r"\"[A2-9TJQK][CDHS]\"", shown)

        _, bob_body = await _profile(client, bob_info["id"])
        assert (bob_body["races_played"], bob_body["races_won"]) == (1, 0)
        assert bob_body["streak"] == {"current": 0, "best": 1}

        # Ada resigns today's daily: a resigned game has no rank and extends no streak.
        await ada.request({"type": "resign", "game_id": open_game["game_id"]})
        _, after = await _profile(client, ada_info["id"])
        assert after["days"][2]["status"] == "resigned"
        assert after["days"][2]["par_share"] == round(
            after["days"][2]["score"] / after["days"][2]["par"], 4
        )
        assert after["days"][2]["rank"] is None and after["streak"] == {"current": 2, "best": 2}
        await ada.close()
        await bob.close()


async def test_hidden_and_banned_results_are_neither_shown_nor_counted(
    make_server: ServerFactory, settings: Settings, clock: FakeClock
) -> None:
    server: TestServer = await make_server()
    moderation = server.app[SERVICES].moderation
    code = daily_code((settings.daily_secret or "").encode(), clock.now().date(), RuleSet.EASY)
    date = clock.now().date().isoformat()
    async with TestClient(server) as client:
        ada_info, bob_info = await register(client, "ada"), await register(client, "bob")
        ada, _ = await WsPlayer.connect(client, ada_info["token"])
        bob, _ = await WsPlayer.connect(client, bob_info["token"])
        ada_game = await _finish_daily(ada, code, win=False)
        await _finish_daily(bob, code, win=True)
        _, before = await _profile(client, ada_info["id"])
        assert before["days"][0]["rank"] == await _board_rank(client, date, ada_info["id"])
        assert await _board_rank(client, date, bob_info["id"]) is not None

        # Bob's ban hides his result: his profile shows no daily, and ada ranks as the board
        # ranks her without him.
        await moderation.ban(f"id:{bob_info['id']}", "played with a solver", "mod")
        _, bob_body = await _profile(client, bob_info["id"])
        assert bob_body["days"] == [] and bob_body["streak"] == {"current": 0, "best": 0}
        assert (bob_body["best_score"], bob_body["average_par_share"]) == (None, None)
        assert bob_body["ranked_days"] == 0
        _, after = await _profile(client, ada_info["id"])
        assert after["days"][0]["rank"] == await _board_rank(client, date, ada_info["id"]) == 1

        # A result hidden on its own is gone from its player's profile too.
        await moderation.hide(ada_game["game_id"], "duplicate account", "mod")
        _, hidden = await _profile(client, ada_info["id"])
        assert hidden["days"] == [] and hidden["streak"] == {"current": 0, "best": 0}
        await ada.close()
        await bob.close()


async def test_a_bad_or_unknown_player_id_is_refused_with_its_code(client: Client) -> None:
    for raw in ("abc", "-1", "0", "00", "1.5", "99999999999999999999"):
        resp = await client.get(f"/api/v1/players/{raw}")
        assert resp.status == 400, raw
        assert (await resp.json())["error"]["code"] == "bad_player_id"
    for unknown in ("4242", str(2**63 - 1)):
        resp = await client.get(f"/api/v1/players/{unknown}")
        assert resp.status == 404, unknown
        assert (await resp.json())["error"]["code"] == "unknown_player"
    player = await register(client, "ada")
    resp = await client.get(f"/api/v1/players/{player['id']}")
    assert resp.status == 200
    assert (await resp.json())["days"] == []
    page = await client.get(f"/players/{player['id']}")
    assert page.status == 200 and "view-profile" in await page.text()
