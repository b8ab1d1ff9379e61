"""Selected rows as the typed rows the stores answer with: one conversion for the boards whose
entries are a player and whole numbers (the ladder's and the period boards')."""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Row = TypeVar("Row", bound="DataclassInstance")


def _as_read(value: Any) -> Any:
    return value


def _convert(convert: Callable[[Any], Any], value: Any) -> Any:
    return convert(value)


@functools.cache
def _reader(
    kind: type[DataclassInstance],
) -> tuple[Callable[[Any], Any], tuple[Callable[[Any], Any], ...]]:
    """How to read a ``kind`` from a row: the getter of its fields' columns (by name, in the
    fields' order, which is that of ``kind``'s arguments) and each value's conversion."""
    hints = get_type_hints(kind)
    fields = dataclasses.fields(kind)
    get = operator.attrgetter(*(f.name for f in fields))
    return get, tuple(int if hints[f.name] is int else _as_read for f in fields)


def typed_rows(kind: type[Row], rows: Sequence[Any]) -> tuple[Row, ...]:
    """``rows`` (as a statement read them, with a column named as each field of the dataclass
    ``kind``, which has two fields or more) as ``kind``s, in their order; an ``int`` field's
    value goes through ``int()`` (whatever type of number the driver read it as), any other is
    taken as read.

    Raises:
        AttributeError: a row lacks one of the columns.
    """
    get, converts = _reader(kind)
    return tuple([kind(*map(_convert, converts, get(row))) for row in rows])


__all__ = ["typed_rows"]
