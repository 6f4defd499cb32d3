"""The checks every request crosses on the serial path take shortcuts (an id split on whitespace, label keys and
values remembered once they passed); each accepts and refuses exactly what its rule, written as a regular
expression, does, whatever came before it."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import LabelError, RejectedError
from services.core.labels import RememberedPattern, validate_label_key, validate_label_value
from services.core.request import check_id
from tests.support.examples import examples

ID_RULE = re.compile(r"\S{1,253}")
NAME_RULE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
SUBDOMAIN_RULE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

BLANKS = st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2003", "\u3000"])
ID_LIKE = st.lists(st.one_of(st.characters(), BLANKS), max_size=260).map("".join) | st.text(
    alphabet="ab-", min_size=250, max_size=256
)
LABEL_LIKE = st.text(alphabet=st.sampled_from("aZ09-_./ \n\xe9"), max_size=70)
SETTINGS = settings(max_examples=examples(400), deadline=None)


def _accepts(check: Callable[..., object], *args: object, **keywords: object) -> bool:
    try:
        check(*args, **keywords)
    except (RejectedError, LabelError):
        return False
    return True


@SETTINGS
@given(ID_LIKE)
def test_an_id_is_accepted_exactly_when_it_is_1_to_253_characters_none_of_them_blank(text: str) -> None:
    assert _accepts(check_id, "actor_id", text) == bool(ID_RULE.fullmatch(text))


@pytest.mark.parametrize("value", [None, 7, b"abc", ["a"]])
def test_an_id_that_is_no_string_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(RejectedError, match="actor_id"):
        check_id("actor_id", value)


@SETTINGS
@given(st.lists(LABEL_LIKE, min_size=1, max_size=40))
def test_label_values_and_keys_are_judged_alike_the_first_time_and_every_time_after(texts: list[str]) -> None:
    for text in texts * 2:  # the second time, what passed is remembered
        name_ok = len(text) <= 63 and bool(NAME_RULE.fullmatch(text))
        assert _accepts(validate_label_value, "k", text) == (not text or name_ok)
        prefix, slash, name = text.rpartition("/")
        key_ok = (
            bool(text)
            and (not slash or (len(prefix) <= 253 and bool(SUBDOMAIN_RULE.fullmatch(prefix))))
            and len(name) <= 63
            and bool(NAME_RULE.fullmatch(name))
        )
        assert _accepts(validate_label_key, text, allow_system=True) == key_ok


def test_a_full_memory_starts_again_and_still_judges_alike() -> None:
    pattern = RememberedPattern(r"[a-z]+", limit=3)
    for text in ["a", "b", "c", "d", "A", "a", "e"]:
        assert pattern.matches(text) == text.islower()
    assert len(pattern.passed) <= 3 and "A" not in pattern.passed
