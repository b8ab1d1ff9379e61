"""The rules the browser page needs, taken from the engine: ``GET /static/js/engine-rules.js``.

The page's ``static/js/rules.js`` imports this module instead of writing the rules again: the
layout's rows, cover map and peaks (docs/rules.md §1, from :mod:`server.engine.layout`), the
score every game starts at (§2 "Score") and, for each rule set, which ranks neighbour which
(§2, worked out with :func:`server.engine.is_neighbour` over every pair of ranks). It is an ES
module (``export default {...}``), so the page imports it like its other modules, before any of
them runs; it is built once, when this module is imported.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from aiohttp import web

from server.engine import (
    COVERED_BY,
    PEAKS,
    POSITION_COUNT,
    ROWS,
    START_SCORE,
    Card,
    Rank,
    RuleSet,
    Suit,
    is_neighbour,
)

__all__ = ["PATH", "add_routes", "page_rules"]

PATH: Final = "/static/js/engine-rules.js"


def page_rules() -> dict[str, Any]:
    """The rules as data: ``positions`` (28), ``rows`` (the positions of each row, top first),
    ``covered_by`` (for each position, the positions covering it), ``peaks`` (the positions of
    the left, middle and right peak, ascending) and ``neighbours`` (for each rule-set letter,
    each rank symbol's neighbouring rank symbols) and ``start_score`` (every game's score before
    its first action, §2 "Score")."""

    def card(rank: Rank) -> Card:
        return Card(rank, Suit.CLUBS)  # suits never matter to the neighbour rule

    return {
        "positions": POSITION_COUNT,
        "rows": [list(row) for row in ROWS],
        "covered_by": [list(above) for above in COVERED_BY],
        "peaks": [sorted(peak) for peak in PEAKS],
        "neighbours": {
            rules.value: {
                rank.symbol: [
                    other.symbol for other in Rank if is_neighbour(card(rank), card(other), rules)
                ]
                for rank in Rank
            }
            for rules in RuleSet
        },
        "start_score": START_SCORE,
    }


_BODY: Final = (
    "// The engine's layout and neighbour rule for static/js/rules.js, made by the server from\n"
    "// server/engine (server/web/page_rules.py): not a file, not to be edited.\n"
    f"export default {json.dumps(page_rules(), separators=(',', ':'))};\n"
).encode()
_ETAG: Final = f'"{hashlib.sha256(_BODY).hexdigest()[:32]}"'


async def _serve(request: web.Request) -> web.Response:
    # Revalidated on every load, like the page's other modules (app.py's cache headers).
    if request.headers.get("If-None-Match") == _ETAG:
        return web.Response(status=304, headers={"ETag": _ETAG})
    return web.Response(body=_BODY, content_type="text/javascript", headers={"ETag": _ETAG})


def add_routes(app: web.Application) -> None:
    """Serve the module at :data:`PATH` (register before the static directory)."""
    app.router.add_get(PATH, _serve)
