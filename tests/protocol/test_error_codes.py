"""The error codes clients can receive are one enum, and docs/protocol.md documents each."""

from __future__ import annotations

import re
from pathlib import Path

from server.errors import ErrorCode, ServiceError

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_every_error_code_is_documented() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    missing = [code.value for code in ErrorCode if f"`{code.value}`" not in text]
    assert missing == []


def test_every_code_in_the_error_tables_is_an_error_code() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    section = text[text.index("## 7. Error codes") : text.index("## 8. Limits")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {code for row in rows for code in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    assert documented and documented <= {code.value for code in ErrorCode}


def test_a_service_error_keeps_its_class_code_unless_given_a_finer_one() -> None:
    assert ServiceError("x").code is ErrorCode.INVALID_INPUT
    assert ServiceError("x", code=ErrorCode.BAD_DATE).code is ErrorCode.BAD_DATE
