"""Points and spans in the log as people write them: `--since 10m`, `--at 12:01:03`, `--at 42` (a sequence)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

from services.core.errors import RejectedError, rule_error

_SPAN = re.compile(r"(?:(\d{1,7})d)?(?:(\d{1,9})h)?(?:(\d{1,11})m)?(?:(\d{1,13})s)?")
SPAN_RULE = "must be a duration such as 30s, 10m, 2h, 1d or 1h30m (whole numbers of d, h, m, s, in that order)"
AT_RULE = (
    "must be a log sequence (a whole number from 1) or a UTC time: HH:MM[:SS] (today) or an ISO 8601 date and time"
)
LONGEST = timedelta(days=36_500)
"""The longest span accepted (a century): anything longer is surely a typo."""


def parse_since(text: str, field: str = "since") -> timedelta:
    """A span like `10m` or `1h30m`; a `RejectedError` naming `field`, the value and the rule otherwise."""
    found = _SPAN.fullmatch(text.strip())
    if not text.strip() or found is None:
        raise rule_error(field, text, SPAN_RULE)
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if not span or span > LONGEST:
        raise rule_error(field, text, "must be longer than 0s and at most 36500d")
    return span


def parse_at(text: str, field: str = "at", today: datetime | None = None) -> int | datetime:
    """A log sequence (int) or a UTC time (an aware datetime): `42`, `12:01:03`, `2026-11-26T12:01:03Z`.

    A bare time of day is on `today` (default: the current UTC date). Anything else is a `RejectedError` naming
    `field`, the value and the rule.
    """
    given = text.strip()
    if given.isascii() and given.isdigit():
        sequence = int(given)
        if not 1 <= sequence < 2**63:
            raise rule_error(field, text, "a sequence must be from 1 to 2**63-1")
        return sequence
    if not given.isascii():
        raise rule_error(field, text, AT_RULE)
    try:
        if len(given) <= len("HH:MM:SS.ffffff"):
            day = (today or datetime.now(UTC)).date()
            return datetime.combine(day, time.fromisoformat(given), UTC)
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise rule_error(field, text, AT_RULE) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_at(at: int | datetime | str, field: str = "at") -> int | datetime:
    """`at` as a sequence or an aware time (text is parsed; a naive time is taken as UTC)."""
    if isinstance(at, str):
        return parse_at(at, field)
    if isinstance(at, datetime):
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if isinstance(at, bool) or not isinstance(at, int) or at < 1:
        raise RejectedError(f"{field} {at!r}: {AT_RULE}")
    return at
