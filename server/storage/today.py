"""The daily boundary's clock: the database's current UTC date, read by the very statement that
stores a daily game's row or action, so that every process agrees on when a date closes
whatever its own clock says (docs/rules.md §4 "Daily challenge"). The group commit's batch statement
(:mod:`server.storage.commits`), the games' and the daily's queries all read it from here.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ColumnElement, Date, cast, func, literal, literal_column

#: The database's current UTC date, as the statement that stores a daily game's row or action
#: sees it: the one clock every process's daily boundary follows.
DATABASE_TODAY_SQL = "(statement_timestamp() AT TIME ZONE 'UTC')::date"


def today_sql(pinned: dt.date | None) -> ColumnElement[dt.date]:
    """SQL for the daily boundary's current UTC date: the database's clock at the statement
    (the one authority for every process), or ``pinned`` when a simulated clock decides."""
    database = literal_column(DATABASE_TODAY_SQL, Date)
    if pinned is None:
        return database
    return func.coalesce(cast(literal(pinned), Date), database)


__all__ = ["DATABASE_TODAY_SQL", "today_sql"]
