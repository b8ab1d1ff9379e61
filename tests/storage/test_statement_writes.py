"""Which statements may store something should their transaction commit
(:func:`server.storage.db.writes`): the engine's COMMIT is outcome unknown when unanswered only
for a transaction that ran one of them; a read's is ``unavailable``."""

from __future__ import annotations

import pytest

from server.storage.db import writes


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT games.id FROM games WHERE games.player_id = $1::BIGINT",
        "  select 1",
        "SELECT id FROM games WHERE id = $1 FOR UPDATE",
        "SELECT id FROM games WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED",
        "SELECT id FROM players FOR UPDATE OF players",
        "WITH w AS (SELECT 1 AS n) SELECT n FROM w",
        "SELECT pg_advisory_xact_lock($1, $2)",
        "SET LOCAL lock_timeout = 500",
        "RESET statement_timeout",
        "SHOW statement_timeout",
        "SELECT games.updated_at, games.deleted FROM games",
    ],
)
def test_a_query_or_a_setting_stores_nothing(statement: str) -> None:
    assert not writes(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO probe VALUES (1)",
        "UPDATE games SET hinted = true WHERE id = $1",
        "DELETE FROM player_tokens WHERE id = $1",
        "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "WITH moved AS (UPDATE games SET seq = 2 RETURNING id) SELECT id FROM moved",
        "with w as (insert into probe values (1) returning n) select n from w",
        "WITH x AS (SELECT 1) DELETE FROM probe",
        "SELECT pg_notify('c', 'p')",
        "NOTIFY c",
        "CREATE TABLE t (n integer)",
        "LOCK TABLE games IN ACCESS EXCLUSIVE MODE",
        "CALL some_procedure()",
        "",
    ],
)
def test_anything_else_may_store_something(statement: str) -> None:
    assert writes(statement)
