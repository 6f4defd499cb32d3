"""Labels: Kubernetes syntax, `--labels` and `--labels-file` parsing, default labels (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

from schemas import Taint
from services.core.documents import load_document
from services.core.errors import LabelError, RejectedError, shown

SYSTEM_PREFIX: Final = "corral.io/"
NODE_ID: Final = "corral.io/node-id"
HOSTNAME: Final = "corral.io/hostname"
ACCELERATOR_TYPE: Final = "corral.io/accelerator-type"
MARKET_TYPE: Final = "corral.io/market-type"
NODE_GROUP: Final = "corral.io/node-group"
ZONE: Final = "corral.io/availability-zone"
REGION: Final = "corral.io/availability-region"
VNODE_ID: Final = "corral.io/vnode-id"
VCLUSTER_ID: Final = "corral.io/vcluster-id"
NODE_TYPE: Final = "corral.io/node-type"
"""The autoscaler's node type of a node it launched."""
LAUNCH_ID: Final = "corral.io/launch-id"
"""The autoscaler's launch a node was started by."""
SCALE_DOWN_TAINT: Final = "corral.io/scale-down"
"""The taint (`true:NoSchedule`) the autoscaler puts on an idle node it is about to terminate."""
CORDON_TAINT: Final = "corral.io/unschedulable"
"""`corral cordon`'s taint (NoSchedule): no new work lands on the node."""
DRAIN_TAINT: Final = "corral.io/drain"
"""`corral drain`'s taint (NoExecute): the node's work is evicted too."""
UNREACHABLE_TAINT: Final = "corral.io/unreachable"
"""The liveness taint of a node that missed its heartbeats: NoSchedule, then NoExecute once it is declared dead.
Its value is when the node was last heard from (`utc_text`)."""
NodeCondition = Literal["alive", "tainted", "cordoned", "draining", "unreachable", "dead"]


def utc_text(unix_seconds: float) -> str:
    """`2026-11-28T14:02:11Z`: a Unix time in UTC, by calendar arithmetic (no clock, no time zone database)."""
    seconds = int(unix_seconds)
    days, second_of_day = divmod(seconds, 86_400)
    era_day = days + 719_468  # days since 0000-03-01 (Howard Hinnant's civil_from_days)
    era = era_day // 146_097
    day_of_era = era_day - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1_460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    year = year_of_era + era * 400 + (month <= 2)
    hours, rest = divmod(second_of_day, 3_600)
    return f"{year:04d}-{month:02d}-{day:02d}T{hours:02d}:{rest // 60:02d}:{rest % 60:02d}Z"


def node_condition(taints: Sequence[Taint]) -> NodeCondition:
    """`unreachable` (missed heartbeats), `dead` (declared dead, some work still tolerating it), `draining`
    (drained, or being scaled down by the autoscaler), `cordoned`, `tainted` (a NoSchedule or NoExecute taint keeps
    work that does not tolerate it off), else `alive`."""
    for taint in taints:
        if taint.key == UNREACHABLE_TAINT:
            return "dead" if taint.effect == "NoExecute" else "unreachable"
    keys = {taint.key for taint in taints}
    if DRAIN_TAINT in keys or SCALE_DOWN_TAINT in keys:
        return "draining"
    if CORDON_TAINT in keys:
        return "cordoned"
    return "tainted" if any(taint.effect in ("NoSchedule", "NoExecute") for taint in taints) else "alive"


REMEMBERED_MATCHES: Final = 4096
"""Strings a `RememberedPattern` keeps as passing, by default (emptied when full)."""


class RememberedPattern:
    """A regular expression's `fullmatch` that remembers the strings that passed it: label keys and values repeat
    from request to request, and matching them was most of checking a request's labels and selectors."""

    __slots__ = ("limit", "passed", "pattern")

    def __init__(self, pattern: str, limit: int = REMEMBERED_MATCHES) -> None:
        self.pattern = re.compile(pattern)
        self.passed: set[str] = set()
        self.limit = limit

    def matches(self, text: str) -> bool:
        """Whether the whole of `text` matches."""
        if text in self.passed:
            return True
        if self.pattern.fullmatch(text) is None:
            return False
        if len(self.passed) >= self.limit:
            self.passed.clear()
        self.passed.add(text)
        return True


_NAME: Final = RememberedPattern(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN: Final = RememberedPattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_RULE: Final = "at most 63 characters, alphanumeric at both ends, with '-', '_' or '.' inside"


def validate_label_key(key: str, *, allow_system: bool = False, value: str | None = None) -> None:
    """Raise `LabelError` unless `key` is `[prefix/]name` in Kubernetes syntax (and not reserved, by default)."""
    problem = _key_problem(key, allow_system)
    if problem:
        where = f"label key {shown(key)}" + (f" (value {shown(value)})" if value is not None else "")
        raise LabelError(f"{where}: {problem}")


def _key_problem(key: object, allow_system: bool) -> str:
    """What is wrong with label key `key` ("" when nothing: the message is only made for a key refused, since
    every request's keys are checked on the scheduler's serial path)."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if len(prefix) > 253 or not _DNS_SUBDOMAIN.matches(prefix):
            return f"prefix {shown(prefix)} must be a lowercase DNS subdomain of at most 253 characters"
        if not allow_system and key.startswith(SYSTEM_PREFIX):
            return f"the prefix {SYSTEM_PREFIX!r} is reserved for system labels"
    if len(name) > 63 or not _NAME.matches(name):
        return f"name {shown(name)} must be {_NAME_RULE}"
    return ""


def validate_label_value(key: str, value: str) -> None:
    """Raise `LabelError` unless `value` is empty or a valid label name."""
    if not isinstance(value, str):
        raise LabelError(f"label {shown(key)}: value {shown(value)} must be a string")
    if value and (len(value) > 63 or not _NAME.matches(value)):
        raise LabelError(f"label {shown(key)}: value {shown(value)} must be empty or {_NAME_RULE}")


def validate_labels(labels: dict[str, str], *, allow_system: bool = False) -> dict[str, str]:
    """Check every key and value; return a copy. User labels may not use the reserved `corral.io/` prefix."""
    if not isinstance(labels, dict):
        raise LabelError(f"labels {shown(labels)}: must be a mapping of strings to strings")
    for key, value in labels.items():
        validate_label_key(key, allow_system=allow_system, value=value)
        validate_label_value(key, value)
    return dict(labels)


def parse_labels(text: str) -> dict[str, str]:
    """Parse `--labels "k=v, k2=v2"`: `""` is `{}`, `"k="` is `{"k": ""}`, `"a=b=c"` is an error."""
    labels: dict[str, str] = {}
    if not text.strip():
        return labels
    for raw in text.split(","):
        entry = raw.strip()
        if entry.count("=") != 1:
            raise LabelError(f"label entry {shown(entry)} in {shown(text)}: expected exactly one '=' (key=value)")
        key, value = (part.strip() for part in entry.split("="))
        validate_label_key(key, value=value)
        validate_label_value(key, value)
        if key in labels:
            raise LabelError(f"label key {shown(key)} in {shown(text)}: given twice")
        labels[key] = value
    return labels


def parse_labels_document(data: str | bytes, source: str) -> dict[str, str]:
    """A `--labels-file`'s contents: a YAML map of string keys to string values (within `documents`' limits); a
    `LabelError` starts with `source`."""
    try:
        loaded = load_document(data, source)
    except RejectedError as error:
        raise LabelError(str(error)) from None
    if loaded is None:
        raise LabelError(f"{source}: is empty; expected a YAML map of strings")
    if not isinstance(loaded, dict):
        raise LabelError(f"{source}: expected a YAML map of strings, got {type(loaded).__name__}")
    for key, value in loaded.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise LabelError(
                f"{source}: entry {shown(key)}: {shown(value)} must map a string to a string (quote numbers)"
            )
    try:
        return validate_labels(loaded)
    except LabelError as error:
        raise LabelError(f"{source}: {error}") from None


def merge_labels(from_file: dict[str, str], from_flag: dict[str, str]) -> dict[str, str]:
    """Combine `--labels-file` and `--labels`; the flag wins where both name a key."""
    return {**from_file, **from_flag}


def default_labels(
    node_id: str,
    *,
    hostname: str | None = None,
    zone: str | None = None,
    region: str | None = None,
    accelerator_type: str | None = None,
    market_type: str | None = None,
    node_group: str | None = None,
    node_type: str | None = None,
    launch_id: str | None = None,
) -> dict[str, str]:
    """The system labels every node carries: its id, and what registration tells about it."""
    given = {
        NODE_ID: node_id,
        HOSTNAME: hostname,
        ZONE: zone,
        REGION: region,
        ACCELERATOR_TYPE: accelerator_type,
        MARKET_TYPE: market_type,
        NODE_GROUP: node_group,
        NODE_TYPE: node_type,
        LAUNCH_ID: launch_id,
    }
    labels = {key: value for key, value in given.items() if value is not None}
    for key, value in labels.items():
        validate_label_value(key, value)
    return labels


def user_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels of `labels` that users set (everything outside the reserved prefix)."""
    return {key: value for key, value in labels.items() if not key.startswith(SYSTEM_PREFIX)}
