"""Services: games, the daily challenge, players, profiles, leaderboards (daily, weekly and
monthly), races, following and replays. They use the engine and the store, take a clock, and
know nothing of sockets or HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine.codes import RuleSet
from server.services.addresses import address_key
from server.services.analysis import Analyzer
from server.services.clock import Clock
from server.services.daily import DailyService
from server.services.friends import FriendService
from server.services.games import GameService
from server.services.ladder import LadderService
from server.services.leaderboards import LeaderboardService
from server.services.matchmaking import Matched, Matchmaker, QueueRules
from server.services.moderation import ModerationService
from server.services.period_boards import PeriodBoardService
from server.services.players import PlayerService
from server.services.presence import PresenceService
from server.services.profiles import ProfileService
from server.services.races import RaceLimits, RaceService
from server.services.ratings import RatingRules, RatingService
from server.services.replays import ReplayService
from server.services.welcomes import WelcomeService
from server.storage.commits import GroupCommitter
from server.storage.daily import PostgresDailyStore, ReplicaDailyStore
from server.storage.events import Publisher
from server.storage.follows import PostgresFollowStore
from server.storage.games import PostgresGameStore
from server.storage.ladder import PostgresLadderStore
from server.storage.leaderboards import PostgresLeaderboardStore, ReplicaLeaderboardStore
from server.storage.moderation import PostgresModerationStore
from server.storage.online import PostgresOnlineStore
from server.storage.period_boards import PostgresPeriodBoardStore
from server.storage.players import PostgresPlayerStore
from server.storage.presence_postgres import PostgresPresenceStore
from server.storage.profiles import PostgresProfileStore, ReplicaProfileStore
from server.storage.queue import PostgresQueueStore
from server.storage.races_postgres import PostgresRaceStore
from server.storage.ratings import PostgresRatingStore
from server.storage.replays import ReplicaReplayStore
from server.storage.replicas import ReadRouter
from server.storage.sessions import Sessions
from server.storage.welcome import PostgresWelcomeStore


@dataclass(frozen=True, slots=True)
class Services:
    """Every service of one server process, sharing one database engine and one clock."""

    db: AsyncEngine
    clock: Clock
    players: PlayerService
    daily: DailyService
    games: GameService
    leaderboards: LeaderboardService
    races: RaceService
    ratings: RatingService
    matchmaker: Matchmaker
    presence: PresenceService
    moderation: ModerationService
    replays: ReplayService
    profiles: ProfileService
    friends: FriendService
    boards: PeriodBoardService
    ladder: LadderService
    welcomes: WelcomeService
    analyzer: Analyzer | None = None
    reads: ReadRouter | None = None

    @classmethod
    def build(
        cls,
        db: AsyncEngine,
        clock: Clock,
        *,
        daily_secret: bytes,
        daily_rules: RuleSet,
        race_limits: RaceLimits | None = None,
        rating_rules: RatingRules | None = None,
        queue_rules: QueueRules | None = None,
        analyzer: Analyzer | None = None,
        write_timeout_s: float = 5.0,
        instance: str | None = None,
        observe_batch: Callable[[int, float], None] | None = None,
        reads: ReadRouter | None = None,
        publisher: Publisher | None = None,
        observe_match: Callable[[RuleSet, int, Sequence[Matched]], None] | None = None,
    ) -> Services:
        """Wire the services together over one database engine.

        Args:
            db: the async database engine.
            clock: the UTC clock.
            daily_secret: the secret daily deals are derived from.
            daily_rules: the rule set of new daily deals.
            race_limits: room limits and timings of races.
            rating_rules: how ratings are kept and shown.
            queue_rules: how quick races are matched.
            analyzer: the solver's process pool (dailies winnable and of their level, par,
                hints), or None.
            write_timeout_s: how long an action on a game whose row is locked elsewhere keeps
                being tried before it fails (see :class:`GroupCommitter`).
            instance: this process's id in the presence records (default: a new random one).
            observe_batch: called after each committed group-commit batch with its number of
                writes and its statement's time in seconds (see :class:`GroupCommitter`).
            reads: the router of the reads that tolerate lag (leaderboards, profiles, replays,
                the daily's counts) between ``db`` and its replicas, or None: every read on
                ``db``.
            publisher: where events between processes go once their writes commit
                (:mod:`server.storage.events`); None: nowhere (no other process to tell).
            observe_match: called after each quick-race matcher pass (see :class:`Matchmaker`).
        """
        sessions = Sessions(db, publisher)
        daily = DailyService(
            PostgresDailyStore(sessions) if reads is None else ReplicaDailyStore(reads),
            clock,
            daily_secret,
            daily_rules,
            analyzer,
        )
        game_store = PostgresGameStore(sessions)
        games = GameService(
            game_store,
            GroupCommitter(
                db, timeout_s=write_timeout_s, observe=observe_batch, publisher=publisher
            ),
            clock,
            daily,
            analyzer=analyzer,
        )
        limits = race_limits or RaceLimits()
        rooms, presence = PostgresRaceStore(sessions), PostgresPresenceStore(sessions)
        leaderboards = LeaderboardService(
            PostgresLeaderboardStore(sessions) if reads is None else ReplicaLeaderboardStore(reads)
        )
        instance = instance or uuid.uuid4().hex
        follows = PostgresFollowStore(sessions)
        ratings = RatingService(PostgresRatingStore(sessions), rating_rules)
        races = RaceService(rooms, presence, clock, games, limits, ratings)
        return cls(
            db=db,
            clock=clock,
            players=PlayerService(PostgresPlayerStore(sessions), clock),
            daily=daily,
            games=games,
            leaderboards=leaderboards,
            races=races,
            ratings=ratings,
            matchmaker=Matchmaker(
                PostgresQueueStore(sessions),
                rooms,
                races,
                ratings,
                clock,
                instance,
                limits.instance_timeout_s,
                queue_rules,
                observe_match,
            ),
            presence=PresenceService(
                presence,
                rooms,
                clock,
                games,
                instance,
                limits.grace_s,
                limits.instance_timeout_s,
            ),
            moderation=ModerationService(
                PostgresModerationStore(sessions), address_key(daily_secret)
            ),
            replays=ReplayService(
                game_store if reads is None else ReplicaReplayStore(reads), daily, analyzer
            ),
            profiles=ProfileService(
                PostgresProfileStore(sessions) if reads is None else ReplicaProfileStore(reads),
                daily,
                analyzer,
            ),
            friends=FriendService(
                follows,
                PostgresOnlineStore(sessions),
                leaderboards,
                clock,
                instance=instance,
                instance_timeout_s=limits.instance_timeout_s,
            ),
            boards=PeriodBoardService(PostgresPeriodBoardStore(sessions), follows),
            ladder=LadderService(
                PostgresLadderStore(sessions), follows, ratings.rules.provisional_races
            ),
            welcomes=WelcomeService(PostgresWelcomeStore(db), games, daily, clock),
            analyzer=analyzer,
            reads=reads,
        )

    async def close(self) -> None:
        """Stop background work (the group committer's writer)."""
        await self.games.close()
