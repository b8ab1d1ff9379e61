"""The page reads the server's message catalogue: ``GET /i18n/<locale>.json`` serves the very
files ``server/catalogue/`` holds, revalidated on every load like the page's modules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from server.catalogue import Locale, path


@pytest.mark.parametrize("locale", list(Locale))
async def test_each_catalogue_is_served_as_the_server_reads_it(
    client: TestClient[Any, Any], locale: Locale
) -> None:
    resp = await client.get(f"/i18n/{locale.value}.json")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    assert resp.headers["Cache-Control"] == "no-cache"
    body = await resp.read()
    assert body == path(locale).read_bytes()
    assert json.loads(body)["rejected.blocked"]

    etag = {"If-None-Match": resp.headers["ETag"]}
    again = await client.get(f"/i18n/{locale.value}.json", headers=etag)
    assert again.status == 304


@pytest.mark.parametrize(
    "name", ["fr.json", "EN.json", "__init__.json", "__init__.py", "en", "../catalogue/en.json"]
)
async def test_only_a_known_locales_catalogue_is_served(
    client: TestClient[Any, Any], name: str
) -> None:
    resp = await client.get(f"/i18n/{name}")
    assert resp.status == 404
