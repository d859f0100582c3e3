"""Search normalisation: the Arabic and Latin rules of the contract."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from units_api.search.normalize import (
    _CHUNKS,
    _WORD,
    normalize,
    query_tokens,
    record_tokens,
    tokens,
)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("شقّة", "شقة"),  # shadda
        ("مدينتى", "مدينتي"),  # alef maksura
        ("أحمد", "احمد"),
        ("إبراهيم", "ابراهيم"),
        ("آمال", "امال"),
        ("ٱلقاهرة", "القاهرة"),
        ("مؤسسة", "موسسه"),
        ("هيئة", "هييه"),  # hamza carriers, teh marbuta
        ("القاهـــرة", "القاهرة"),  # tatweel
        ("شَقَّةٌ", "شقة"),
        ("ذٰلك", "ذلك"),  # tashkeel, superscript alef
        ("١٢٣", "123"),
        ("۴۵۶", "456"),  # Arabic-Indic and Persian digits
        ("Café", "cafe"),
        ("ÉLAN", "elan"),
        ("NEW CAIRO", "new cairo"),
    ],
)
def test_contract_examples_normalise_alike(left: str, right: str) -> None:
    assert tokens(left) == tokens(right)


def test_words_split_on_punctuation_and_underscores() -> None:
    assert tokens("palm-hills_phase-1, New Cairo!") == [
        "palm",
        "hills",
        "phase",
        "1",
        "new",
        "cairo",
    ]


def test_record_tokens_cover_the_searchable_fields_once() -> None:
    words = record_tokens(
        {
            "name": "Villa Villa",
            "unitNameAr": "فيلا",
            "city": "Cairo",
            "price": 5,
            "unitDesc": None,
            "subProjectId": "mivida-2",
        }
    )
    assert words == ["villa", "فيلا", "cairo", "mivida", "2"]


@given(st.text())
def test_normalising_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once
    assert query_tokens(once) == query_tokens(text)


@given(st.lists(st.text(), max_size=5))
def test_words_are_the_same_from_the_remembered_chunks_as_made_afresh(texts: list[str]) -> None:
    """A text's words, chunk by chunk from what was seen before, are its normalised text's
    words; the same again once the remembered chunks are emptied, as when full."""
    for text in texts:
        words = tokens(text)
        assert words == [w for chunk in text.split() for w in _WORD.findall(normalize(chunk))]
        assert tokens(text) == words
        _CHUNKS.clear()
        assert tokens(text) == words
