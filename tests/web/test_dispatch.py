"""The websocket's dispatch table serves every request type the parse point yields."""

from __future__ import annotations

from typing import get_args

from server.protocol.client import ClientMessage, Hello, Ping
from server.web.handlers import HANDLERS


def test_every_client_message_but_hello_and_ping_has_one_handler() -> None:
    # hello is served before the table (it authenticates), ping by the reader itself.
    assert set(HANDLERS) == set(get_args(ClientMessage)) - {Hello, Ping}
