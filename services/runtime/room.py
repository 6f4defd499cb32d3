"""JetStream refusing to store for lack of room: which errors say so, and the words a user reads."""

from __future__ import annotations

import nats.js.errors

NO_ROOM_CODES = frozenset({10023, 10047, 10077})
"""JetStream's error codes for a store without room: insufficient resources (the server's or the account's store
at its `max_file_store`), insufficient storage resources, and a stream's own limit refusing new messages
(`max_bytes`, `max_msgs` with `discard: new`)."""

WHAT_TO_DO = (
    "nothing stored is lost; Corral serves again by itself once JetStream has room (free space on its disk and "
    "raise its max_file_store, then reload or restart nats-server)"
)


def no_room(error: BaseException) -> str:
    """The server's own words when `error` is JetStream refusing to store for lack of room; "" for any other."""
    if isinstance(error, nats.js.errors.APIError) and error.err_code in NO_ROOM_CODES:
        return f"{error.description or 'no room'} (JetStream error {error.err_code})"
    return ""


def log_full(reason: str, outcome: str) -> str:
    """What a client reads when the event log has no room: the server's words, what became of its message, and what
    to do."""
    return f"the event log is full: {reason}; {outcome}; {WHAT_TO_DO}"
