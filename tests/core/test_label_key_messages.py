"""A label key refused is named with its value and the rule it breaks; a valid key costs no message at all."""

from __future__ import annotations

import pytest

from services.core import errors, labels
from services.core.errors import LabelError


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("", None, "label key '': must be a non-empty string"),
        ("Bad_Prefix/x", "v", "label key 'Bad_Prefix/x' (value 'v'): prefix 'Bad_Prefix' must be a lowercase DNS"),
        ("corral.io/x", None, "label key 'corral.io/x': the prefix 'corral.io/' is reserved for system labels"),
        ("-x", None, "label key '-x': name '-x' must be at most 63 characters"),
    ],
)
def test_a_refused_key_is_named_with_its_rule(key: str, value: str | None, says: str) -> None:
    with pytest.raises(LabelError) as refused:
        labels.validate_label_key(key, value=value)
    assert str(refused.value).startswith(says)


def test_a_valid_key_makes_no_message(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []

    def noted(value: object) -> str:
        shown.append(value)
        return errors.shown(value)

    monkeypatch.setattr(labels, "shown", noted)
    labels.validate_label_key("topology.corral.io/zone", allow_system=True, value="z1")
    labels.validate_label_key("app")
    assert shown == []
