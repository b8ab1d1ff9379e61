"""The examples in the engine's docstrings are run as tests."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

import server.engine
from server.engine import actions, cards, codes, deals, errors, game, layout, rules

MODULES = [server.engine, actions, cards, codes, deals, errors, game, layout, rules]


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module, verbose=False)
    assert result.failed == 0


def test_engine_package_re_exports_its_public_names() -> None:
    for name in server.engine.__all__:
        assert hasattr(server.engine, name), name
    assert {"Game", "GameCode", "Card", "Rejection", "deal_tp1"} <= set(server.engine.__all__)
