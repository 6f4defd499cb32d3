"""Label selectors and tolerations: the string grammar and `In/NotIn/...`, compiled to matchers (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from schemas import LabelMatch, SelectorValue
from services.core.errors import LabelError
from services.core.labels import validate_label_key, validate_label_value

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "in", "not_in", "exists", "does_not_exist"
_POSITIVE: Final = frozenset({IN, EXISTS})


class Term:
    """One compiled condition on one label key."""

    __slots__ = ("key", "op", "values")

    def __init__(self, key: str, op: str, values: frozenset[str]) -> None:
        self.key = key
        self.op = op
        self.values = values

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether labels satisfy the condition; a missing key passes only the negative operators."""
        value = labels.get(self.key)
        if self.op == IN:
            return value is not None and value in self.values
        if self.op == EXISTS:
            return value is not None
        if self.op == NOT_IN:
            return value is None or value not in self.values
        return value is None

    @property
    def positive(self) -> bool:
        """True for `v`, `in(..)`, `exists()`: a label index can list the nodes that pass."""
        return self.op in _POSITIVE

    def __repr__(self) -> str:
        return f"Term({self.key!r}, {self.op!r}, {sorted(self.values)!r})"

    def text(self) -> str:
        """The condition as the CLI and the API spell it: `tier=db`, `tier!=db`, `tier=in(a,b)`, `gpu=exists()`."""
        values = ",".join(sorted(self.values))
        if self.op in (IN, NOT_IN) and len(self.values) == 1:
            return f"{self.key}={values}" if self.op == IN else f"{self.key}!={values}"
        negated = "!" if self.op in (NOT_IN, DOES_NOT_EXIST) else ""
        condition = f"in({values})" if self.op in (IN, NOT_IN) else "exists()"
        return f"{self.key}={negated}{condition}"


def selector_text(spec: Mapping[str, SelectorValue]) -> str:
    """A selector (or tolerations) mapping as the CLI spells it: `tier=db,zone=in(z1,z2)`, keys sorted."""
    return ",".join(parse_condition(key, spec[key]).text() for key in sorted(spec))


def _split_values(key: str, text: str, inner: str) -> frozenset[str]:
    values = [part.strip() for part in inner.split(",")]
    if values == [""]:
        raise LabelError(f"selector {key!r}: {text!r}: in() needs at least one value")
    for value in values:
        if not value:
            raise LabelError(f"selector {key!r}: {text!r}: empty value in the list")
        validate_label_value(key, value)
    return frozenset(values)


def parse_condition(key: str, value: SelectorValue) -> Term:
    """Compile one selector entry: `v`, `!v`, `in(a,b)`, `!in(a,b)`, `exists()`, `!exists()` or a `LabelMatch`."""
    validate_label_key(key, allow_system=True)
    if isinstance(value, LabelMatch):
        if value.op in (IN, NOT_IN):
            if not value.values:
                raise LabelError(f"selector {key!r}: {value.op} needs at least one value")
            for item in value.values:
                validate_label_value(key, item)
        return Term(key, value.op, frozenset(value.values))
    if not isinstance(value, str):
        raise LabelError(f"selector {key!r}: condition {value!r} must be a string or In/NotIn/Exists/DoesNotExist")
    text = value.strip()
    negate = text.startswith("!")
    body = text[1:].strip() if negate else text
    if body.startswith("!"):
        raise LabelError(f"selector {key!r}: {value!r}: at most one '!' may negate a condition")
    lowered = body.lower()
    if lowered.startswith("in("):
        if not body.endswith(")"):
            raise LabelError(f"selector {key!r}: {value!r}: unclosed 'in(' (expected ')')")
        values = _split_values(key, value, body[3:-1])
        return Term(key, NOT_IN if negate else IN, values)
    if lowered.startswith("exists("):
        if lowered[len("exists(") :].strip() != ")":
            raise LabelError(f"selector {key!r}: {value!r}: exists() takes no values")
        return Term(key, DOES_NOT_EXIST if negate else EXISTS, frozenset())
    validate_label_value(key, body)
    return Term(key, NOT_IN if negate else IN, frozenset({body}))


class LabelSelector:
    """A compiled label selector: every term must hold; `{}` matches every node."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[Term, ...] = ()) -> None:
        self.terms = terms

    @classmethod
    def parse(cls, spec: Mapping[str, SelectorValue]) -> LabelSelector:
        """Compile a `{key: condition}` mapping; bad keys or conditions raise `LabelError`."""
        if not isinstance(spec, Mapping):
            raise LabelError(f"label selector {spec!r}: must be a mapping of label keys to conditions")
        return cls(tuple(parse_condition(key, value) for key, value in spec.items()))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every term holds for these labels."""
        return all(term.matches(labels) for term in self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)


class Tolerations:
    """Compiled tolerations: taint key -> condition on the taint's value, and for how long a NoExecute taint of a
    key is tolerated (`seconds`; a key absent: for ever)."""

    __slots__ = ("by_key", "seconds")

    def __init__(self, by_key: dict[str, Term], seconds: Mapping[str, float] | None = None) -> None:
        self.by_key = by_key
        self.seconds = dict(seconds or {})

    @classmethod
    def parse(cls, spec: Mapping[str, SelectorValue]) -> Tolerations:
        """Compile `{taint key: condition}` in the selector grammar."""
        if not isinstance(spec, Mapping):
            raise LabelError(f"tolerations {spec!r}: must be a mapping of taint keys to conditions")
        return cls({key: parse_condition(key, value) for key, value in spec.items()})

    def with_key(self, key: str) -> Tolerations:
        """These tolerations plus tolerating every value of `key`."""
        return Tolerations({**self.by_key, key: Term(key, EXISTS, frozenset())}, self.seconds)

    def timed(self, seconds: Mapping[str, float]) -> Tolerations:
        """These tolerations, a NoExecute taint of each key of `seconds` tolerated only that long."""
        return Tolerations(self.by_key, seconds)

    def tolerates(self, key: str, value: str) -> bool:
        """Whether a taint `key=value` is tolerated."""
        term = self.by_key.get(key)
        return term is not None and term.matches({key: value})

    def stays(self, key: str, value: str, elapsed: float) -> bool:
        """Whether work stays under a NoExecute taint `key=value` that has been in force for `elapsed` seconds."""
        limit = self.seconds.get(key)
        return self.tolerates(key, value) and (limit is None or elapsed < limit)
