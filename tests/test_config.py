"""Settings and the daily secret: weak or missing secrets are refused at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import (
    SECRET_MIN_BYTES,
    SecretError,
    Settings,
    check_daily_secret,
    load_or_create_daily_secret,
)


def test_a_random_secret_of_32_bytes_is_accepted() -> None:
    secret = b"0f3a9c1d7e5b2468ace13579bdf02468"
    assert len(secret) == SECRET_MIN_BYTES
    assert check_daily_secret(secret, "TRIPEAKS_DAILY_SECRET") == secret


@pytest.mark.parametrize(
    ("secret", "complaint"),
    [
        (b"x" * 31, "31 bytes"),
        (b"", "0 bytes"),
        (b"change-me-to-a-long-random-secret", "placeholder"),
        (b"please-change-me-before-production", "placeholder"),
        (b"test-daily-secret-0123456789", "bytes"),
        (b"abababababababababababababababab", "distinct"),
        (b"CHANGE_ME_TO_A_LONG_RANDOM_SECRET", "placeholder"),
        (b"please-change-this-secret-value!!", "placeholder"),
        (b"replace-this-with-a-long-random-value", "placeholder"),
        (b"abcdefghabcdefghabcdefghabcdefgh", "repeated"),
        (b"0123456789abcdef0123456789abcdef", "repeated"),
        (b"  0eb8c1d2e3f4a5b6c7d8e9f0a1b2c3d4  ", "whitespace"),
        (b"0eb8c1d2e3f4a5b6c7d8e9f0        ", "whitespace"),
    ],
)
def test_weak_secrets_are_refused_naming_the_source_and_how_to_make_one(
    secret: bytes, complaint: str
) -> None:
    with pytest.raises(SecretError) as raised:
        check_daily_secret(secret, "TRIPEAKS_DAILY_SECRET")
    message = str(raised.value)
    assert message.startswith("TRIPEAKS_DAILY_SECRET ")
    assert complaint in message
    assert "secrets.token_hex(32)" in message


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.ha.yml"])
def test_the_compose_files_former_default_is_refused(name: str) -> None:
    compose = (Path(__file__).resolve().parents[1] / name).read_text()
    assert "change-me-to-a-long-random-secret" not in compose
    assert "${TRIPEAKS_DAILY_SECRET:?" in compose
    with pytest.raises(SecretError, match="placeholder"):
        check_daily_secret(b"change-me-to-a-long-random-secret", "TRIPEAKS_DAILY_SECRET")


def test_an_external_database_needs_the_secret_in_the_environment(tmp_path: Path) -> None:
    settings = Settings(database_url="postgresql://db/x", data_dir=tmp_path)
    # Even a secret file left by an embedded run is not used: every process must share one.
    (tmp_path / "daily_secret").write_text("f" * 8 + "0123456789abcdef" * 4 + "\n")
    with pytest.raises(SecretError, match="TRIPEAKS_DAILY_SECRET is not set"):
        load_or_create_daily_secret(settings, generate=False)


def test_the_embedded_database_generates_a_secret_once_and_keeps_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = load_or_create_daily_secret(settings, generate=True)
    assert len(first) == 64
    assert load_or_create_daily_secret(settings, generate=True) == first
    path = tmp_path / "data" / "daily_secret"
    assert path.stat().st_mode & 0o077 == 0


def test_a_weak_secret_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    (tmp_path / "daily_secret").write_text("too-short\n")
    with pytest.raises(SecretError, match="daily_secret is 9 bytes long"):
        load_or_create_daily_secret(settings, generate=True)


def test_a_given_secret_is_checked_with_either_database(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, daily_secret="changeme")
    for generate in (True, False):
        with pytest.raises(SecretError, match="TRIPEAKS_DAILY_SECRET"):
            load_or_create_daily_secret(settings, generate=generate)


def test_read_urls_split_at_each_url_keeping_a_multi_host_url_whole() -> None:
    settings = Settings(
        database_read_urls=(
            "postgresql://u@r1:5432/db?host=a,b&port=1,2 , postgres://u@r2/db,"
            "postgresql+asyncpg://u@r3/db"
        )
    )
    assert settings.read_urls == [
        "postgresql://u@r1:5432/db?host=a,b&port=1,2",
        "postgres://u@r2/db",
        "postgresql+asyncpg://u@r3/db",
    ]
    assert Settings().read_urls == []


def test_a_read_url_of_another_database_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="'r2/db' is not a PostgreSQL URL"):
        Settings(database_read_urls="postgresql://u@r1/db,mysql://u@r2/db")


def test_the_operations_port_is_a_port_of_its_own() -> None:
    assert Settings().ops_port is None
    assert Settings(port=8080, ops_port=9090).ops_port == 9090
    with pytest.raises(ValueError, match="TRIPEAKS_OPS_PORT must differ from the main port"):
        Settings(port=8080, ops_port=8080)
    with pytest.raises(ValueError, match="ops_port"):
        Settings(ops_port=0)
    assert Settings(host="0.0.0.0", ops_port=9090).operations_host == "0.0.0.0"
    private = Settings(host="0.0.0.0", ops_port=9090, ops_host="10.0.0.5")
    assert private.operations_host == "10.0.0.5"
