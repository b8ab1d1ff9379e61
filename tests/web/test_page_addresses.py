"""Every view of the page has an address the server answers with the page itself (revalidated
on every load), so a reload or a shared link shows that view; the API and other routes keep
their own answers."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from server.web.app import STATIC_DIR


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/daily/2026-12-04",
        "/boards/week/2026-W49",
        "/boards/month/2026-12",
        "/games/17",
        "/players/3",
        "/race/WW9Q3T",
        "/replay/42",
        "/settings",
        "/following",
        "/ladder/E",
        "/ladder/C",
    ],
)
async def test_each_views_address_serves_the_page(client: TestClient[Any, Any], path: str) -> None:
    resp = await client.get(path)
    assert resp.status == 200
    assert resp.content_type == "text/html"
    assert resp.headers["Cache-Control"] == "no-cache"
    assert await resp.read() == (STATIC_DIR / "index.html").read_bytes()


async def test_the_api_and_unknown_paths_are_not_the_page(client: TestClient[Any, Any]) -> None:
    daily = await client.get("/api/v1/daily/2026-03-14")
    assert daily.status == 200
    assert daily.content_type == "application/json"
    assert daily.headers["Cache-Control"] == "no-store"
    missing = await client.get("/api/v1/daily/2026-03-14/nothing")
    assert missing.status == 404
    assert missing.content_type == "application/json"
    # The page's week and month boards beside the API's.
    board = await client.get("/api/v1/boards/week/2026-W11")
    assert board.status == 200
    assert board.content_type == "application/json"
    assert board.headers["Cache-Control"] == "no-store"
    for path in (
        "/daily",
        "/games/17/x",
        "/settings/x",
        "/nowhere",
        "/boards",
        "/boards/week",
        "/boards/day/2026-12-04",
        "/boards/week/2026-W49/x",
        "/ladder/X",
        "/ladder",
    ):
        resp = await client.get(path)
        assert resp.status == 404, path
        assert resp.content_type != "text/html", path
