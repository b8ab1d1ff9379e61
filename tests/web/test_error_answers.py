"""How the REST API's error middleware answers a commit whose outcome is not known: a write
(``POST`` and the like) gets ``outcome_unknown`` (docs/protocol.md §5.6), a read gets
``unavailable`` — it changed nothing, so nothing is in doubt."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from server.errors import StorageOutcomeUnknown, StorageUnavailable
from server.web.http import PREFIX, error_middleware


async def _unconfirmed(request: web.Request) -> web.Response:
    raise StorageOutcomeUnknown("a transaction's commit is unconfirmed: ConnectionResetError")


async def _unavailable(request: web.Request) -> web.Response:
    raise StorageUnavailable("database failure: ConnectionRefusedError")


async def test_an_unconfirmed_commit_is_outcome_unknown_for_a_write_but_not_a_read() -> None:
    app = web.Application(middlewares=[error_middleware])
    app.router.add_route("*", f"{PREFIX}/thing", _unconfirmed)
    app.router.add_get(f"{PREFIX}/down", _unavailable)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for method, code in (("POST", "outcome_unknown"), ("DELETE", "outcome_unknown")):
            resp = await client.request(method, f"{PREFIX}/thing")
            assert resp.status == 503, method
            assert (await resp.json())["error"]["code"] == code, method
        resp = await client.get(f"{PREFIX}/thing")
        assert resp.status == 503
        body = await resp.json()
        assert body["error"]["code"] == "unavailable"
        assert "may or may not" not in body["error"]["message"]
        resp = await client.get(f"{PREFIX}/down")
        assert (resp.status, (await resp.json())["error"]["code"]) == (503, "unavailable")
