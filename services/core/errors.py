"""The one exception tree of Corral, shared by the core, the services, the client and the CLI.

`CorralError` is anything Corral reports as failed. A `RejectedError` is the sender's fault: the request, command
or message is refused and nothing changed; its text names the field, the value and the rule. Any other error is
Corral's: no service answered, a service failed on a message, or the log holds an event no view can fold. Each
class carries the `kind` a service's `Rejected` reply gives it on the wire.
"""

from __future__ import annotations

import reprlib
from typing import ClassVar, Final

from schemas import AnyEvent
from schemas.replies import RejectionKind


class CorralError(Exception):
    """Anything Corral reports as failed; one that is not a `RejectedError` is never the sender's fault."""

    kind: ClassVar[RejectionKind] = "unavailable"


class RejectedError(CorralError, ValueError):
    """Refused, and nothing changed: the message names the field, the value and the rule."""

    kind: ClassVar[RejectionKind] = "invalid"


class NotFoundError(RejectedError, LookupError):
    """Names an actor, node, placement group or virtual cluster that does not exist."""

    kind: ClassVar[RejectionKind] = "not_found"


class ConflictError(RejectedError):
    """Contradicts what is live (an id resubmitted with another request, say); the message names both."""

    kind: ClassVar[RejectionKind] = "conflict"


class TooLargeError(RejectedError):
    """Over a limit: a request over the bus's payload limit (it was not sent), a file over its size, nesting or
    alias limits; the message names the size and the limit."""


class LabelError(RejectedError):
    """A label key or value breaks the label syntax; the message names the key, the value and the rule."""


class CodecError(RejectedError):
    """A message could not be read as the type its subject carries; the text names the type, where and why."""

    def __init__(self, type_name: str, reason: str) -> None:
        super().__init__(f"{type_name}: {reason}")
        self.reason = reason
        """Why, without the type's name."""


class UnavailableError(CorralError):
    """No service answered in time (is `corral up` running, and is CORRAL_NATS_URL right?)."""


class ServiceFailedError(UnavailableError):
    """A service answered that it could not serve this message now: it failed on it, or its view was not ready
    (the message says which). Not the sender's fault."""


class StorageFullError(UnavailableError):
    """JetStream refused to store the request or its events for lack of room (its store, or a stream, reached its
    limit): nothing was lost, and the mesh serves again by itself once the store has room. The message holds the
    server's own words."""

    kind: ClassVar[RejectionKind] = "storage_full"


class UnfoldableEventError(CorralError):
    """An event of the log that no view can fold (a fault of the log, not a refusal); raised before the fold
    changes anything."""

    def __init__(self, event: AnyEvent, rule: str) -> None:
        super().__init__(f"{type(event).__name__} {event.event_id or '(no event_id)'}: {rule}")
        self.event = event
        self.rule = rule


SHOWN_CHARS: Final = 80
"""The most characters of a value an error quotes."""
_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, SHOWN_CHARS, SHOWN_CHARS
_SHORT.maxdict = _SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxfrozenset = 8


def shown(value: object) -> str:
    """`repr(value)` for an error message, at most about `SHOWN_CHARS` characters: a longer string is cut and its
    length said (`'aaa...'... (10000000 chars)`), a large or deep container shows its first items and levels only
    (looking at no more of it than that)."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return f"{repr(value[:SHOWN_CHARS])[:SHOWN_CHARS]}... ({len(value)} chars)"
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an int past Python's digit limit
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"


def rule_error(field: str, value: object, rule: str) -> RejectedError:
    """The rejection of one field: its name, its value (`shown`: at most about 80 characters) and the rule it
    breaks."""
    return RejectedError(f"{field} {shown(value)}: {rule}")
