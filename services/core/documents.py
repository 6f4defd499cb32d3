"""YAML documents users hand in (the autoscaler's node types, `-f` request files, `--labels-file`), loaded with
limits (pure): at most `MAX_DOCUMENT_BYTES`, nested at most `MAX_NESTING` deep, and no anchors or aliases (they
have no use in these files, and a few hundred bytes of nested aliases expand to gigabytes)."""

from __future__ import annotations

from typing import Any, Final

import yaml

from services.core.errors import RejectedError, TooLargeError

MAX_DOCUMENT_BYTES: Final = 1_048_576
"""The largest file read as a document."""
MAX_NESTING: Final = 48
"""The deepest a document's mappings and lists nest."""


class _OverLimit(yaml.YAMLError):
    """A document past one of the limits (an anchor or alias, too deep), where it was met."""

    def __init__(self, problem: str, mark: yaml.Mark) -> None:
        super().__init__(f"{problem} (line {mark.line + 1}, column {mark.column + 1})")


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors, aliases and nesting past `MAX_NESTING` as it composes."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _OverLimit("anchors and aliases (&name, *name) are not allowed in this file", event.start_mark)
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise _OverLimit(f"nested deeper than {MAX_NESTING} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def check_size(size: int, source: str) -> None:
    """Refuse a document of `size` bytes past `MAX_DOCUMENT_BYTES`, naming both (a `TooLargeError`)."""
    if size > MAX_DOCUMENT_BYTES:
        raise TooLargeError(f"{source}: {size} bytes, over the {MAX_DOCUMENT_BYTES}-byte limit for this file")


def load_document(text: str | bytes, source: str) -> object:
    """The YAML (or JSON) document `text`; past a limit (its size, an anchor or alias, too deep) a `TooLargeError`,
    not YAML a `RejectedError`, each naming `source` and what is wrong."""
    check_size(len(text.encode() if isinstance(text, str) else text), source)
    try:
        return yaml.load(text, Loader=_LimitedLoader)
    except _OverLimit as over:
        raise TooLargeError(f"{source}: {over}") from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:  # ValueError: an int past Python's digit limit
        raise RejectedError(f"{source}: not valid YAML ({_one_line(error)})") from None


def _one_line(error: BaseException) -> str:
    """The error's text on one line, at most 300 characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else f"{text[:300]}..."
