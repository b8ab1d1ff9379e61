"""How a commit whose outcome is not known is answered: the error middleware answers a storage
failure as :func:`server.errors.refusal` says, whatever the method — ``outcome_unknown`` for a
write that may have been stored (docs/protocol.md §5.6), ``unavailable`` for a failure that
changed nothing — and storage itself never raises an unknown outcome for a transaction that
stored nothing: a read (``GET``) whose COMMIT is lost is ``unavailable``."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from server.errors import StorageOutcomeUnknown, StorageUnavailable
from server.web.http import PREFIX, error_middleware
from tests.conftest import ServerFactory
from tests.helpers import register


async def _unconfirmed(request: web.Request) -> web.Response:
    raise StorageOutcomeUnknown("a transaction's commit is unconfirmed: ConnectionResetError")


async def _unavailable(request: web.Request) -> web.Response:
    raise StorageUnavailable("database failure: ConnectionRefusedError")


async def test_an_unconfirmed_commit_is_outcome_unknown_and_a_failure_unavailable() -> None:
    app = web.Application(middlewares=[error_middleware])
    app.router.add_route("*", f"{PREFIX}/thing", _unconfirmed)
    app.router.add_get(f"{PREFIX}/down", _unavailable)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for method in ("POST", "DELETE"):
            resp = await client.request(method, f"{PREFIX}/thing")
            assert resp.status == 503, method
            assert (await resp.json())["error"]["code"] == "outcome_unknown", method
        resp = await client.get(f"{PREFIX}/down")
        assert resp.status == 503
        body = await resp.json()
        assert body["error"]["code"] == "unavailable"
        assert "may or may not" not in body["error"]["message"]


async def test_a_read_whose_commit_is_lost_is_unavailable_and_a_write_outcome_unknown(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile is read in a transaction of its own, committed: its COMMIT lost (the
    connection closed once it was sent) is answered 503 ``unavailable``; a registration's,
    503 ``outcome_unknown``."""
    server = await make_server()
    async with TestClient(server) as client:
        player = await register(client, "Reader")
        real_commit = asyncpg.transaction.Transaction.commit

        async def lost(transaction: Any) -> None:
            transaction._connection.terminate()  # (asyncpg's own attribute)
            raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")

        monkeypatch.setattr(asyncpg.transaction.Transaction, "commit", lost)
        resp = await client.get(f"{PREFIX}/players/{player['id']}")
        assert resp.status == 503, await resp.text()
        assert (await resp.json())["error"]["code"] == "unavailable"
        resp = await client.post(f"{PREFIX}/players", json={"name": "Writer"})
        assert resp.status == 503, await resp.text()
        assert (await resp.json())["error"]["code"] == "outcome_unknown"
        monkeypatch.setattr(asyncpg.transaction.Transaction, "commit", real_commit)
        resp = await client.get(f"{PREFIX}/players/{player['id']}")
        assert resp.status == 200, await resp.text()
