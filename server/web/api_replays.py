"""The REST handler of a game's replay, ``GET /api/v1/games/{game_id}/replay`` (JSON). No
rules here: :mod:`server.services.replays` says when a replay is public and finds the optimal
line.

:mod:`server.web.routes_games` registers and describes it; the bodies are
:mod:`server.protocol.rest_replays`'s; errors are ``{"error": {"code", "message"}}`` with a
fitting HTTP status.
"""

from __future__ import annotations

from aiohttp import web

from server.protocol.rest_replays import DealLayout, Replay, ReplayAction, ReplayGame
from server.protocol.rest_types import LineStep, Player
from server.services.replays import Replay as GameReplay
from server.web.http import path_id, respond, utc
from server.web.keys import SERVICES


def _replay(replay: GameReplay) -> Replay:
    game, deal = replay.game, replay.deal
    return Replay(
        game=ReplayGame(
            id=game.id,
            player=Player(game.player_id, game.player_name),
            mode=game.mode.value,
            daily_date=game.daily_date,
            race_invite=game.race_invite,
            code=str(game.code),
            rules=game.code.rules,
            status=game.status,
            score=game.score,
            moves=game.moves,
            undos=game.undos,
            elapsed_ms=game.elapsed_ms,
            created_at=utc(game.created_at),
            finished_at=None if game.finished_at is None else utc(game.finished_at),
            hinted=game.hinted,
        ),
        layout=DealLayout(
            tableau=[str(card) for card in deal.tableau],
            waste=str(deal.waste),
            stock=[str(card) for card in deal.stock],
        ),
        actions=[
            ReplayAction(
                seq=s.seq,
                action=s.kind,
                pos=s.pos,
                card=s.card,
                score_after=s.score_after,
                at=utc(s.at),
                undoes=s.undoes,
                undone=s.undone,
            )
            for s in replay.steps
        ],
        par=replay.par,
        line=None
        if replay.line is None
        else [LineStep(s.action, s.pos, s.card) for s in replay.line],
        diverged_at=replay.diverged_at,
    )


async def game_replay(request: web.Request) -> web.Response:
    """A finished game whose deal is public, to replay move by move: the game, every card of
    its deal, every stored action (undos tied to what they took back), the solver's optimal
    line, and the first action that left every optimal path. A daily game is replayable once
    its UTC date is over, a race game once its race has finished, a free game once it has
    ended; before that 409 ``replay_not_public``, which names nothing of the deal."""
    game_id = path_id(request, "game_id")
    return respond(_replay(await request.app[SERVICES].replays.replay(game_id)))
