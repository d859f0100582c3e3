"""Light stemming of normalised words, the same for stored text and for a search's words.

Arabic follows light10 (Larkey, Ballesteros and Connell, "Light stemming for Arabic
information retrieval", 2007): `و` is removed when at least 3 letters remain; then one of the
articles `ال وال بال كال فال لل` when at least 2 remain; then each of the suffixes `ها ان ات
ون ين يه ية ه ة ي`, once and in that order, when at least 2 remain. Other words go through the
Snowball (Porter2) English stemmer. Words come normalised (search.normalize): teh marbuta is
already heh there, so `ة` and `ية` are matched as `ه` and `يه`.

Arabic also attaches the prepositions `ب ك ل ف` to the next word: a stored word that starts
with one and has at least 3 letters after it is found by its form without it too
(`prepositionless`), so `بحديقة` is found by `حديقة`, while `بحر` (2 letters after) is not
found by `حر`.
"""

from __future__ import annotations

from functools import lru_cache

import Stemmer  # type: ignore[import-not-found,unused-ignore]

_WAW = "\u0648"
_ARTICLES = ("وال", "بال", "كال", "فال", "ال", "لل")  # no two can match the same word
_SUFFIXES = ("ها", "ان", "ات", "ون", "ين", "يه", "ية", "ه", "ة", "ي")
_PREPOSITIONS = frozenset("بكلف")
_ENGLISH = Stemmer.Stemmer("english")
CACHE_SIZE = 1 << 17


def is_arabic(word: str) -> bool:
    return "\u0600" <= word[:1] <= "\u06ff"


def light10(word: str) -> str:
    """The light10 stem of a normalised Arabic word."""
    if word.startswith(_WAW) and len(word) - 1 >= 3:
        word = word[1:]
    for article in _ARTICLES:
        if word.startswith(article) and len(word) - len(article) >= 2:
            word = word[len(article) :]
            break
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
    return word


@lru_cache(maxsize=CACHE_SIZE)
def stem(word: str) -> str:
    """A normalised word's stem: light10 for Arabic, Snowball English for the rest."""
    if is_arabic(word):
        return light10(word)
    if word.isdigit():
        return word
    stemmed: str = _ENGLISH.stemWord(word)
    return stemmed


def prepositionless(word: str) -> str | None:
    """The word without an attached preposition, when it has one and 3 letters follow it."""
    if word[:1] in _PREPOSITIONS and len(word) >= 4 and is_arabic(word):
        return word[1:]
    return None


@lru_cache(maxsize=CACHE_SIZE)
def word_forms(word: str) -> tuple[str, ...]:
    """What a stored word is found by: the word, its stem, and the same for its form without
    an attached preposition; distinct, the word first."""
    forms = [word, stem(word)]
    bare = prepositionless(word)
    if bare is not None:
        forms += [bare, stem(bare)]
    return tuple(dict.fromkeys(forms))
