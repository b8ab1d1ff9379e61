"""The ``backend`` fixture: each test taking it runs twice, on the in-memory stores and on
PostgreSQL's (see :mod:`tests.backends`)."""

from __future__ import annotations

from tests.backends import backend, backend_url

__all__ = ["backend", "backend_url"]  # the fixtures, shared
