"""Schemathesis against a live server: stateless checks of every operation of the OpenAPI
document (examples, boundary and malformed values, random ones), with no server error and
every answer conforming to the document."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import RuleSet
from server.services import players, races
from server.services.clock import FakeClock
from server.services.credentials import new_recovery_code
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, blocking_line, daily_code, register

#: Test cases per operation and phase: enough to reach every parameter's bounds and a spread
#: of malformed values, few enough to keep the run to a minute or two on two cores.
MAX_EXAMPLES = int(os.environ.get("TRIPEAKS_SCHEMATHESIS_EXAMPLES", "25"))
#: A fixed seed keeps runs reproducible; set TRIPEAKS_SCHEMATHESIS_SEED to explore others.
SEED = os.environ.get("TRIPEAKS_SCHEMATHESIS_SEED", "20261201")
#: Longest the run may take before the test gives up on it.
RUN_S = 600.0
#: Checks left out: ``positive_data_acceptance`` expects a 2xx for every request the schema
#: allows, but some rules are not the schema's to say (a date in the future, a name taken or
#: mixing scripts, a cursor the server did not make): those are 400 or 409 by design.
EXCLUDED = "positive_data_acceptance"
#: Operations that revoke the token they are sent with (a new token; signing out every device):
#: each runs on a token of its own, after the others, so that the others keep a working one.
REVOKING = ("rotate_token", "sign_out")
#: The recovery code of the document's sign-in example (``rest.SignIn``), given to "Alice".
EXAMPLE_CODE = "7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF"


async def test_schemathesis_finds_no_server_error_and_every_answer_conforms(
    make_server: ServerFactory,
    clock: FakeClock,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # The document's examples name 2026-12-01, game 1, player 1 and the room WW9Q3T: let them
    # exist.
    monkeypatch.setattr(races, "new_invite", lambda: "WW9Q3T")
    # ... and a sign-in as Alice with the example's recovery code.
    codes = iter([EXAMPLE_CODE])
    monkeypatch.setattr(players, "new_recovery_code", lambda: next(codes, new_recovery_code()))
    day = dt.date(2026, 12, 1)
    clock.set(dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC))
    code = daily_code((settings.daily_secret or "").encode(), day, RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    server = await make_server()
    async with TestClient(server) as client:  # closes the server when it ends
        await register(client, "Alice")
        player = await register(client, "Fuzzer")
        revoked = [await register(client, f"Revoked{op}") for op in REVOKING]
        ws, _ = await WsPlayer.connect(client, player["token"])
        game = (await ws.request({"type": "new_game"}))["game"]
        assert game["game_id"] == 1
        daily = (await ws.request({"type": "join_daily"}))["game"]
        assert (await ws.play(daily, line))["status"] == "blocked"  # ranked: a leaderboard
        room = await ws.request({"type": "race_create"})
        assert room["race"]["invite"] == "WW9Q3T", room
        await ws.close()
        document = f"http://127.0.0.1:{server.port}/api/v1/openapi.json"
        runs = [await _schemathesis(document, player["token"], tmp_path, exclude=REVOKING)]
        for op, other in zip(REVOKING, revoked, strict=True):
            runs.append(await _schemathesis(document, other["token"], tmp_path, include=(op,)))
    for report, returncode in runs:
        summary = _summary(report)
        print(summary)
        if os.environ.get("TRIPEAKS_SCHEMATHESIS_REPORT"):  # the whole report, with pytest -s
            print(report)
        assert returncode == 0, report[-20_000:]
        assert re.search(r"\b[1-9][0-9]* passed\b", summary), report[-5_000:]
        assert not re.search(r"fail|error", summary), report[-20_000:]
    # Every operation but those revoking their token was tried with a token that works.
    assert "Authentication failed" not in runs[0][0], runs[0][0][-5_000:]


async def _schemathesis(
    document_url: str,
    token: str,
    folder: Path,
    *,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
) -> tuple[str, int]:
    """Run ``schemathesis run`` on the document (only the operations whose ids ``include``
    names, when it names any; none that ``exclude`` names), in ``folder`` (where it keeps its
    caches); its output and exit status."""
    chosen = [f"--include-operation-id={op}" for op in include]
    chosen += [f"--exclude-operation-id={op}" for op in exclude]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        document_url,
        "--checks",
        "all",
        "--exclude-checks",
        EXCLUDED,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        SEED,
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--header",
        f"Authorization: Bearer {token}",
        "--suppress-health-check",
        "all",
        "--generation-database",
        "none",
        *chosen,
        cwd=folder,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"},
    )
    try:
        async with asyncio.timeout(RUN_S):
            out, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return out.decode(errors="replace"), process.returncode


def _summary(report: str) -> str:
    """The run's count of test cases (``N generated, N passed``) and its closing line."""
    lines = [line.strip(" =") for line in report.splitlines() if line.strip(" =")]
    cases = [line for line in lines if re.match(r"[0-9]+ generated\b", line)]
    closing = [line for line in lines if re.search(r" in [0-9.]+s$", line)]
    return "\n".join([*cases, *closing[-1:]]) or report[-2_000:]
