"""Requests a page of another site could make its visitors' browsers send: a body not sent as
JSON (415 ``unsupported_media_type``), a request that changes something or opens the websocket
with a foreign ``Origin`` (403 ``origin_not_allowed``, docs/protocol.md §12.1)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from tests.conftest import ServerFactory
from tests.helpers import register

Client = TestClient[Any, Any]


async def _error(resp: aiohttp.ClientResponse) -> tuple[int, str]:
    return resp.status, (await resp.json())["error"]["code"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
async def test_a_body_not_sent_as_json_is_415_and_changes_nothing(
    client: Client, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = b'{"name": "Zed"}'
    for path in ("/api/v1/players", "/api/v1/sessions"):
        resp = await client.post(path, data=body, headers=headers)
        assert await _error(resp) == (415, "unsupported_media_type")
    info = await register(client, "Ann")
    resp = await client.post(
        "/api/v1/players/me/following",
        data=b'{"name": "Zed"}',
        headers={**headers, "Authorization": f"Bearer {info['token']}"},
    )
    assert await _error(resp) == (415, "unsupported_media_type")
    # Nothing was registered: the name is free.
    assert (await client.post("/api/v1/players", json={"name": "Zed"})).status == 201


async def test_json_with_a_charset_is_json(client: Client) -> None:
    resp = await client.post(
        "/api/v1/players",
        data='{"name": "Zoë"}'.encode(),
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert resp.status == 201, await resp.text()


async def test_a_page_of_another_site_cannot_register_sign_in_act_or_open_a_websocket(
    client: Client,
) -> None:
    elsewhere = {"Origin": "https://elsewhere.example"}
    resp = await client.post("/api/v1/players", json={"name": "Zed"}, headers=elsewhere)
    assert await _error(resp) == (403, "origin_not_allowed")
    resp = await client.post(
        "/api/v1/sessions", json={"name": "Zed", "recovery_code": "x"}, headers=elsewhere
    )
    assert await _error(resp) == (403, "origin_not_allowed")
    info = await register(client, "Ann")
    bearer = {"Authorization": f"Bearer {info['token']}"}
    for method, path in (
        ("POST", "/api/v1/players/me/token"),
        ("DELETE", "/api/v1/players/me/sessions"),
        ("PUT", f"/api/v1/players/me/following/{info['id']}"),
    ):
        resp = await client.request(method, path, headers={**bearer, **elsewhere})
        assert await _error(resp) == (403, "origin_not_allowed"), (method, path)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/ws", headers=elsewhere)
    assert refused.value.status == 403
    # The token still works: the refused rotation did nothing.
    assert (await client.get("/api/v1/players/me", headers=bearer)).status == 200
    # Reading is not refused (without CORS headers the page cannot read the answer anyway).
    assert (await client.get("/api/v1/daily", headers=elsewhere)).status == 200


async def test_the_servers_own_pages_and_programs_without_an_origin_are_let_through(
    client: Client,
) -> None:
    assert client.server.port is not None
    own = {"Origin": f"http://127.0.0.1:{client.server.port}"}
    resp = await client.post("/api/v1/players", json={"name": "Own"}, headers=own)
    assert resp.status == 201, await resp.text()
    ws = await client.ws_connect("/ws", headers=own)
    await ws.close()
    # Another port of the same host is another site.
    other_port = {"Origin": f"http://127.0.0.1:{client.server.port + 1}"}
    resp = await client.post("/api/v1/players", json={"name": "Port"}, headers=other_port)
    assert await _error(resp) == (403, "origin_not_allowed")
    assert (await client.post("/api/v1/players", json={"name": "Program"})).status == 201


async def test_the_allowed_origins_setting_lets_the_sites_it_names_through(
    make_server: ServerFactory,
) -> None:
    server = await make_server(allowed_origins="https://Friend.example, https://other.example/")
    async with TestClient(server) as client:
        for origin, status in (
            ("https://friend.example", 201),
            ("https://other.example", 201),
            ("http://friend.example", 403),
            ("null", 403),
        ):
            resp = await client.post(
                "/api/v1/players",
                json={"name": f"From{status}{len(origin)}"},
                headers={"Origin": origin},
            )
            assert resp.status == status, (origin, await resp.text())
    server = await make_server(allowed_origins="*")
    async with TestClient(server) as client:
        resp = await client.post(
            "/api/v1/players", json={"name": "Anyone"}, headers={"Origin": "null"}
        )
        assert resp.status == 201


def test_an_allowed_origin_must_be_an_origin() -> None:
    from pydantic import ValidationError

    from server.config import Settings

    with pytest.raises(ValidationError, match="not a web origin"):
        Settings(allowed_origins="https://ok.example, elsewhere.example/path")
    assert Settings(allowed_origins="https://A.example/ , *").origins == {"https://a.example", "*"}
