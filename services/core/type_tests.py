"""`isinstance` against the schemas' classes, answered once per type of value (pure).

A msgspec Struct class has a metaclass of its own, so `isinstance(value, SomeStruct)` goes through
`type.__instancecheck__` whenever the value is not exactly of that class: about three times what the same check
costs against a plain class. The core asks such questions of every event it folds and every request it compiles; a
`TypeTest` answers them from a dict keyed by the value's type (the classes of a running program do not change).
"""

from __future__ import annotations

from typing import Generic, TypeGuard, TypeVar

T = TypeVar("T")


class TypeTest(Generic[T]):
    """Whether a value is an instance of any of `classes` (T: their union), as `isinstance` says."""

    __slots__ = ("answers", "classes")

    def __init__(self, *classes: type[T]) -> None:
        self.classes = classes
        self.answers: dict[type, bool] = {}

    def holds(self, value: object) -> TypeGuard[T]:
        """`isinstance(value, classes)`."""
        kind = type(value)
        answer = self.answers.get(kind)
        if answer is None:
            answer = self.answers[kind] = issubclass(kind, self.classes)
        return answer
