"""Which PostgreSQL the tests use (``TRIPEAKS_TEST_PG``, ``tests/conftest.py``): a URL given,
else the one at 127.0.0.1:5432 when it answers, else one embedded for the run."""

from __future__ import annotations

import pytest

from tests.conftest import DEFAULT_PG, chosen_postgres

URL = "postgresql://postgres@db.example:5433/postgres"


def _never() -> bool:
    raise AssertionError("the default address is not asked about when a URL is given")


@pytest.mark.parametrize("given", [URL, f"  {URL}\n"])
def test_a_url_given_is_used_as_it_is(given: str) -> None:
    assert chosen_postgres(given, _never) == URL


def test_embedded_asks_for_one_even_when_the_default_answers() -> None:
    assert chosen_postgres("embedded", lambda: True) is None


@pytest.mark.parametrize("given", ["", "  "])
def test_unset_uses_the_default_when_it_answers_else_an_embedded_one(given: str) -> None:
    assert chosen_postgres(given, lambda: True) == DEFAULT_PG
    assert chosen_postgres(given, lambda: False) is None
