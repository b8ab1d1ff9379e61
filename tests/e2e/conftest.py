"""A PostgreSQL server of the test's own, which the test may stop and start again.

The shared PostgreSQL of the other tests must never be disturbed; a test about the database
going away runs its own server from the binaries the ``pgserver`` package ships, in a
throw-away data directory, on a free loopback port, and stops it however the test ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from server.bench.process import free_port
from tests.freeze import thaw_all
from tests.pg import PrivatePostgres

__all__ = ["PrivatePostgres", "own_postgres", "private_postgres"]


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A running PostgreSQL of this test's own with an empty ``tripeaks`` database; stopped
    and deleted afterwards, however the test ends."""
    with own_postgres() as server:
        yield server


@contextmanager
def own_postgres(settings: Sequence[str] = ()) -> Iterator[PrivatePostgres]:
    """A running PostgreSQL of the caller's own (server ``settings`` as ``name=value``) with
    an empty ``tripeaks`` database; stopped (thawed first, if frozen) and deleted on leaving.

    Its directory is a fresh one under the system's temporary directory rather than under
    ``tmp_path``, whose parents only root may enter (the server runs as another user then).
    """
    root = Path(tempfile.mkdtemp(prefix="tripeaks-pg-"))
    server = PrivatePostgres(root, free_port(), settings)
    try:
        server.init()
        server.start()
        server.create_database("tripeaks")
        yield server
    finally:
        if server.data.exists() and server.running():
            thaw_all(server)  # a test that froze it and failed may have left it so
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
