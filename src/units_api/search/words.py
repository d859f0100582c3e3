"""What the search index holds for one unit, and what a search asks of it.

A unit is found by `lexemes`: every word of its searchable fields, normalised, with its
stem and (Arabic) its form without an attached preposition (search.stem). A search's word
matches a unit that has its stem, or a lexeme that starts with the word as typed, so a
search may still stop mid-word (`pentho` finds `penthouse`) while `apartments` finds
`apartment`.

Relevance reads `ranking`: the words as written (normalised, unstemmed), and every lexeme
of the name fields marked with NAME_MARK, which no normalised word contains.

PostgreSQL also keeps a `signature` of the lexemes' first letters, which a walk in creation
order tests on its index alone before it reads a unit's words (search.index.newest_matches).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import orjson

from units_api.search.normalize import MAX_WORD, SEARCH_FIELDS, tokens
from units_api.search.stem import stem, word_forms

NAME_FIELDS = ("name", "unitNameAr")
NAME_MARK = "~"
# A word matched as written counts for more than every word matched in a name (at most
# query_tokens' 16), so the two orders of the contract make one score.
WRITTEN_WEIGHT = 32
# The signature: SIGNATURE_PARTS signed 64-bit integers, one bit set for each distinct
# beginning of a lexeme of SIGNATURE_PREFIXES letters (a lexeme shorter than the first, whole).
# A word of five letters or more must find three bits set. On the newest 40,000 units of
# `bench/find.py`, a unit sets 91 bits of 512 on average; a search word let through at most a
# few percent of the units that lack it (`resort`, which shares `res` with most units: 15 of
# 39,907; with the first three letters alone, in 256 bits, 27,305).
SIGNATURE_PARTS = 8
SIGNATURE_PREFIXES = (3, 4, 5)
SIGNATURE_COLUMNS = tuple(f"sig{part}" for part in range(SIGNATURE_PARTS))  # PostgreSQL's
Signature = tuple[int, ...]
_PART = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class IndexedText:
    lexemes: list[str]
    ranking: list[str]


def index_text(fields: Mapping[str, object]) -> IndexedText:
    """A unit's search words, from its searchable fields."""
    written: dict[str, None] = {}
    named: dict[str, None] = {}
    for name in SEARCH_FIELDS:
        value = fields.get(name)
        if not isinstance(value, str):
            continue
        words = [word for word in tokens(value) if len(word) <= MAX_WORD]
        written.update(dict.fromkeys(words))
        if name in NAME_FIELDS:
            named.update(dict.fromkeys(words))
    lexemes = dict.fromkeys(form for word in written for form in word_forms(word))
    marked = [NAME_MARK + form for form in dict.fromkeys(f for w in named for f in word_forms(w))]
    return IndexedText(list(lexemes), [*written, *marked])


def _bits(lexeme: str) -> tuple[int, ...]:
    """The signature bits of a lexeme, one for each of its beginnings, which a lexeme that
    starts with it has too; the longest (the rarest) first. By crc32, the same in every
    process, unlike `hash`."""
    first, *longer = SIGNATURE_PREFIXES
    beginnings = [*(lexeme[:n] for n in reversed(longer) if len(lexeme) >= n), lexeme[:first]]
    return tuple(
        dict.fromkeys(zlib.crc32(part.encode()) % (SIGNATURE_PARTS * 64) for part in beginnings)
    )


@lru_cache(maxsize=1 << 16)
def _mask(lexeme: str) -> int:
    """A lexeme's bits, as one integer (remembered: units share most of their words)."""
    mask = 0
    for bit in _bits(lexeme):
        mask |= 1 << bit
    return mask


def signature(lexemes: Iterable[str]) -> Signature:
    """A unit's signature, from its lexemes: bit n is bit n % 64 of part n // 64."""
    bits = 0
    for lexeme in lexemes:
        bits |= _mask(lexeme)
    return tuple(signed_part(bits >> (64 * part) & _PART) for part in range(SIGNATURE_PARTS))


def signed_part(part: int) -> int:
    """A part of the signature (or a bit of one) as the signed 64-bit integer it is stored as."""
    return part - (1 << 64) if part >> 63 else part


@dataclass(frozen=True, slots=True)
class Term:
    """A search's word: as typed (normalised), matched as a prefix, and its stem, matched
    whole."""

    word: str
    stem: str

    @property
    def alternatives(self) -> tuple[tuple[str, bool], ...]:
        """(lexeme, as a prefix) pairs, any of which matches."""
        if self.stem == self.word:
            return ((self.word, True),)
        return ((self.stem, False), (self.word, True))

    @property
    def bits(self) -> tuple[tuple[int, ...], ...] | None:
        """The signature bits a unit with this word has: all the bits of one of these (the
        rarest first), or None when the signature cannot tell (a prefix shorter than
        SIGNATURE_PREFIXES[0])."""
        if any(
            prefix and len(lexeme) < SIGNATURE_PREFIXES[0] for lexeme, prefix in self.alternatives
        ):
            return None
        return tuple(dict.fromkeys(_bits(lexeme) for lexeme, _ in self.alternatives))


def terms(words: Iterable[str]) -> tuple[Term, ...]:
    return tuple(Term(word, stem(word)) for word in words)


def relevance(ranking: Iterable[str], words: Iterable[str]) -> int:
    """A unit's relevance to a search's words, read from its `ranking`: WRITTEN_WEIGHT for
    each word it has as written, plus one for each word found in its name fields."""
    return _score(ranking, terms(words))


def _score(ranking: Iterable[str], searched: tuple[Term, ...]) -> int:
    have = set(ranking)
    named = [entry for entry in have if entry.startswith(NAME_MARK)]
    score = 0
    for term in searched:
        if term.word in have:
            score += WRITTEN_WEIGHT
        if NAME_MARK + term.stem in have or any(
            entry.startswith(NAME_MARK + term.word) for entry in named
        ):
            score += 1
    return score


@lru_cache(maxsize=1024)
def _search_terms(words_json: str) -> tuple[Term, ...]:
    return terms(orjson.loads(words_json))


def sqlite_relevance(ranking: str | None, words_json: str) -> int:
    """`units_relevance(ranking, words)` in SQLite, called once per match: the stored ranking
    words (space-separated) and the search's words as a JSON array (stemmed once)."""
    return _score((ranking or "").split(), _search_terms(words_json))


def search_rowid(unit_id: uuid.UUID) -> int:
    """A unit's row id in SQLite's search and location tables: its id's random last eight
    bytes, so the row is found without a lookup."""
    return int.from_bytes(unit_id.bytes[8:], "big", signed=True)


def sqlite_search_key(unit_id: str | None) -> int | None:
    """`units_search_key(id)` in SQLite: `search_rowid` of a stored (hex) unit id."""
    return None if unit_id is None else search_rowid(uuid.UUID(hex=unit_id))
