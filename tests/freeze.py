"""Freezing a test's own PostgreSQL: every one of its processes stopped (``SIGSTOP``), not
killed, as a host that hangs — its sockets stay open and take connections into their backlog,
and nothing ever answers — until it is thawed (``SIGCONT``)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from tests.pg import PrivatePostgres


def postmaster_pid(server: PrivatePostgres) -> int:
    """The pid of the server's postmaster."""
    return int((server.data / "postmaster.pid").read_text().split()[0])


def children_of(postmaster: int) -> list[int]:
    """The pids of the postmaster's children (backends, background workers)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return children


def freeze(server: PrivatePostgres) -> list[int]:
    """Stop every process of ``server`` (the postmaster first, so that it starts no new one);
    returns their pids for :func:`thaw`."""
    postmaster = postmaster_pid(server)
    os.kill(postmaster, signal.SIGSTOP)
    children = children_of(postmaster)
    for pid in children:
        os.kill(pid, signal.SIGSTOP)
    return [postmaster, *children]


def thaw(pids: list[int]) -> None:
    """Let the processes of a frozen server go on (those still there)."""
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def thaw_all(server: PrivatePostgres) -> None:
    """Let every process of ``server`` go on, whoever stopped them."""
    postmaster = postmaster_pid(server)
    thaw([postmaster, *children_of(postmaster)])
