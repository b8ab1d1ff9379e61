"""Selected rows as the typed rows the stores answer with: one conversion for the boards whose
entries are a player and whole numbers (the ladder's and the period boards')."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Row = TypeVar("Row", bound="DataclassInstance")


@functools.cache
def _columns(kind: type[DataclassInstance]) -> tuple[tuple[str, bool], ...]:
    """Each field of ``kind`` by name, and whether it holds an ``int``."""
    hints = get_type_hints(kind)
    return tuple((f.name, hints[f.name] is int) for f in dataclasses.fields(kind))


def typed_rows(kind: type[Row], rows: Sequence[Any]) -> tuple[Row, ...]:
    """``rows`` (as a statement read them, with a column named as each field of the dataclass
    ``kind``) as ``kind``s, in their order; an ``int`` field's value goes through ``int()``
    (whatever type of number the driver read it as), any other is taken as read.

    Raises:
        AttributeError: a row lacks one of the columns.
    """
    columns = _columns(kind)
    return tuple(kind(**_values(row, columns)) for row in rows)


def _values(row: Any, columns: tuple[tuple[str, bool], ...]) -> dict[str, Any]:
    return {
        name: int(getattr(row, name)) if whole else getattr(row, name) for name, whole in columns
    }


__all__ = ["typed_rows"]
