"""The light stemmers: light10's rules one by one, the contract's examples, Snowball English."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from units_api.search.normalize import normalize
from units_api.search.stem import light10, prepositionless, stem, word_forms
from units_api.search.words import index_text, relevance


def arabic(word: str) -> str:
    """Stem an Arabic word as the index does: normalised first."""
    return stem(normalize(word))


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # Articles, one of them, when 2 letters remain.
        ("الحسن", "حسن"),
        ("والحسن", "حسن"),
        ("بالحسن", "حسن"),
        ("كالحسن", "حسن"),
        ("فالحسن", "حسن"),
        ("للاخر", "اخر"),
        # The conjunction, when 3 letters remain.
        ("وحسن", "حسن"),
        ("وحس", "وحس"),
        # Each suffix, when 2 letters remain.
        ("حسنها", "حسن"),
        ("حسنان", "حسن"),
        ("حسنات", "حسن"),
        ("حسنون", "حسن"),
        ("حسنين", "حسن"),
        ("حسنيه", "حسن"),
        ("حسنية", "حسن"),
        ("حسنه", "حسن"),
        ("حسنة", "حسن"),
        ("حسني", "حسن"),
        # Suffixes in order, each once: ات then ه is not there, ي after يه.
        ("ساهدهات", "ساهد"),
        ("وساهدون", "ساهد"),
        # Too short to lose anything.
        ("ال", "ال"),
        ("و", "و"),
        ("ها", "ها"),
        ("بحر", "بحر"),
    ],
)
def test_light10_rules(word: str, expected: str) -> None:
    assert light10(word) == expected


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("قاهرة", "القاهرة"),
        ("القاهرة", "بالقاهرة"),
        ("القاهرة", "والقاهرة"),
        ("حديقة", "الحديقة"),
        ("بحيرة", "البحيرة"),
        ("رياض", "الرياض"),
        ("شيخ", "الشيخ"),
    ],
)
def test_contract_forms_share_a_stem(a: str, b: str) -> None:
    assert arabic(a) == arabic(b)


def test_attached_prepositions_before_three_letters_only() -> None:
    garden = normalize("بحديقة")
    assert arabic("حديقة") in word_forms(garden)
    assert prepositionless(normalize("بحر")) is None  # بحر is not ب + حر
    assert "حر" not in word_forms("بحر")
    assert prepositionless("book") is None


@pytest.mark.parametrize(
    ("word", "expected"),
    [("apartments", "apart"), ("apartment", "apart"), ("gardens", "garden"), ("villas", "villa")],
)
def test_english_snowball(word: str, expected: str) -> None:
    assert stem(word) == expected


@given(st.text(alphabet="ابتثجحخدذرزسشصضطظعغفقكلمنهوي", min_size=1, max_size=12))
def test_light10_keeps_two_letters_and_is_a_substring(word: str) -> None:
    stemmed = light10(word)
    assert stemmed in word
    assert len(stemmed) >= min(len(word), 2)


def test_relevance_prefers_words_as_written_then_names() -> None:
    written = index_text({"name": "Villa", "unitDesc": "a garden"})
    stemmed = index_text({"name": "Villa", "unitDesc": "two gardens"})
    named = index_text({"name": "Garden house", "unitDesc": "x"})
    assert relevance(written.ranking, ["garden"]) == relevance(named.ranking, ["garden"]) - 1
    assert relevance(stemmed.ranking, ["garden"]) == 0
    assert relevance(named.ranking, ["gard"]) == 1  # a prefix in the name
