"""The feed's reading of a stored document: its quick test for what XML forbids, and its
numbers copied exactly as stored."""

from __future__ import annotations

from decimal import Decimal

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from units_api.feeds.listings import clean, forbids_nothing, number
from units_api.http.json import dumps


@given(st.text())
def test_a_document_said_to_forbid_nothing_holds_no_text_to_clean(text: str) -> None:
    # As the service stores a unit (orjson, UTF-8); a lone surrogate is not storable at all.
    try:
        doc = dumps({"name": text, "gallery": [text]})
    except TypeError:
        return
    if forbids_nothing(doc):
        assert clean(text) == text


@given(st.sampled_from("\x00\x01\x08\x0b\x0c\x1f\ufffe\uffff"), st.text())
def test_a_forbidden_character_is_never_missed(forbidden: str, text: str) -> None:
    try:
        doc = dumps({"unitDesc": text + forbidden + text})
    except TypeError:
        return
    assert not forbids_nothing(doc)


def test_plain_arabic_and_english_texts_take_the_quick_way() -> None:
    assert forbids_nothing(dumps({"name": "فيلا بإطلالة على البحر", "unitDesc": "Sea view"}))


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_a_stored_number_is_written_as_its_exact_plain_decimal(value: Decimal) -> None:
    raw = msgspec.json.decode(dumps({"price": value}), type=dict[str, msgspec.Raw])["price"]
    text = number(raw)
    assert text is not None
    assert "e" not in text.lower()
    assert Decimal(text) == value


def test_a_number_keeps_the_digits_it_was_stored_with() -> None:
    assert number(msgspec.Raw(b"4850000.50")) == "4850000.50"
    assert number(msgspec.Raw(b"1E+6")) == "1000000"
    assert number(msgspec.Raw(b"null")) is None
