"""Database URLs with several hosts, in each form users write, and the errors of malformed ones."""

from __future__ import annotations

import time

import pytest

from server.config import Settings
from server.storage import db
from server.storage.db import (
    HOST_SET_ASIDE_S,
    DatabaseConfigError,
    DatabaseHost,
    async_url,
    direct_dsn,
    hosts_in_turn,
    parse_database_url,
)

TWO_HOSTS = (DatabaseHost("h1", 5433), DatabaseHost("h2", 5434))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@h1:5433,h2:5434/db?target_session_attrs=read-write",
        "postgresql+asyncpg://u:pw@/db?host=h1:5433&host=h2:5434&target_session_attrs=read-write",
        "postgres://u:pw@/db?host=h1,h2&port=5433,5434&target_session_attrs=read-write",
    ],
)
def test_each_form_of_a_host_list_names_the_same_servers(url: str) -> None:
    target = parse_database_url(url)
    assert target.hosts == TWO_HOSTS
    assert (target.user, target.password, target.database) == ("u", "pw", "db")
    assert target.target_session_attrs == "read-write"
    # The listener's DSN and the engine's URL carry the same list.
    assert direct_dsn(url) == "postgresql://u:pw@h1:5433,h2:5434/db?target_session_attrs=read-write"
    assert parse_database_url(direct_dsn(url)) == target
    assert parse_database_url(async_url(url).render_as_string(hide_password=False)) == target


def test_one_port_applies_to_every_host_and_a_missing_one_is_postgres_default() -> None:
    assert parse_database_url("postgresql:///db?host=a,b&port=6000").hosts == (
        DatabaseHost("a", 6000),
        DatabaseHost("b", 6000),
    )
    assert parse_database_url("postgresql://a,[::1]:7000/db").hosts == (
        DatabaseHost("a", 5432),
        DatabaseHost("::1", 7000),
    )


def test_a_socket_directory_and_other_options_are_kept() -> None:
    target = parse_database_url("postgresql://postgres:@/tripeaks?host=/tmp/pg&sslmode=disable")
    assert target.hosts == (DatabaseHost("/tmp/pg", 5432),)
    assert target.options == (("sslmode", "disable"),)
    assert target.host_dsn(target.hosts[0]) == (
        "postgresql://postgres:@/tripeaks?sslmode=disable&host=%2Ftmp%2Fpg&port=5432"
    )


def test_the_listeners_dsn_drops_the_engine_only_options() -> None:
    url = "postgresql://u@h1:1,h2:2/db?prepared_statement_cache_size=0&sslmode=disable"
    assert direct_dsn(url) == "postgresql://u@h1:1,h2:2/db?sslmode=disable"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://u@h/db", "must be a PostgreSQL URL, got backend 'mysql'"),
        ("postgresql://u@h1:5433/db?host=h2", "names its hosts twice"),
        ("postgresql://u@/db?host=a,b,c&port=1,2", "3 hosts but 2 ports"),
        ("postgresql://u@h1:99999/db", "the port '99999'"),
        ("postgresql://u@h1:x,h2/db", "the port 'x'"),
        ("postgresql://u@h1,,h2/db", "an empty host"),
        ("postgresql://u@[::1/db", "malformed IPv6 host"),
        ("postgresql://u@h/db?target_session_attrs=writable", "target_session_attrs='writable'"),
        (
            "postgresql://u@h/db?connect_timeout=1",
            "connect_timeout=, .*CONNECT_TIMEOUT_S",
        ),
        ("postgres://u@h/db?sslmode=require&keepalives=1", "keepalives=, which this server"),
    ],
)
def test_a_malformed_url_is_refused_naming_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(DatabaseConfigError, match=says.replace("(", r"\(").replace("[", r"\[")):
        parse_database_url(url)


def test_the_settings_refuse_a_malformed_url_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="TRIPEAKS_DIRECT_DATABASE_URL has 2 hosts but 3 ports"):
        Settings(direct_database_url="postgresql://u@/db?host=a,b&port=1,2,3")
    with pytest.raises(ValueError, match="DATABASE_URL names its hosts twice"):
        Settings(database_url="postgresql://u@h:1/db?host=g")


def test_hosts_that_failed_lately_are_tried_last_and_forgotten_after_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts = parse_database_url("postgresql://u@10.0.0.1:5432,10.0.0.2:5432,10.0.0.3:5432/db").hosts
    assert hosts_in_turn(hosts) == list(hosts)
    now = time.monotonic()
    monkeypatch.setattr(
        db,
        "_failed_hosts",
        {(hosts[0], "read-write"): now, (hosts[2], "read-write"): now - HOST_SET_ASIDE_S},
    )
    assert hosts_in_turn(hosts, "read-write") == [hosts[1], hosts[2], hosts[0]]
    assert hosts_in_turn(hosts) == list(hosts)  # what failed one kind of session, not another
