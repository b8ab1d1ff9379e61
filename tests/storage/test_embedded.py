"""The embedded PostgreSQL's bookkeeping: processes killed without clean-up are forgotten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from server.storage.db import forget_dead_handles


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_processes_are_dropped_from_the_handle_list(tmp_path: Path) -> None:
    dead = _dead_pid()
    listing = tmp_path / ".handle_pids.json"
    listing.write_text(json.dumps([dead, os.getpid()]))
    assert forget_dead_handles(tmp_path) == [dead]
    assert json.loads(listing.read_text()) == [os.getpid()]
    assert forget_dead_handles(tmp_path) == []


def test_a_missing_or_unreadable_list_is_left_alone(tmp_path: Path) -> None:
    assert forget_dead_handles(tmp_path) == []
    (tmp_path / ".handle_pids.json").write_text("not json")
    assert forget_dead_handles(tmp_path) == []
    assert (tmp_path / ".handle_pids.json").read_text() == "not json"
