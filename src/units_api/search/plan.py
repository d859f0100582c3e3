"""How a search is read: through the index first when few units match, else in order.

A page of a search that many units match is found fastest by walking units in the list's
order and checking each: for a word in 10% of units, a page of 20 reads about 200. For a rare
word that walk reads every unit (half a second on a million); reading the few matches through
the index and sorting them is then cheap. Which it is comes from how many units have each
word, counted up to a cap (see units.counting) and remembered while units do not change (for
a second while they do).
"""

from __future__ import annotations

from collections.abc import Sequence

from units_api.search.normalize import Words

# Past this many matches, sorting them costs more than walking to a page of them (measured on
# 1,000,000 units: 1,737 matches cost 9 ms either way, 4,384 cost 39 ms sorted, 3 ms walked).
FEW_MATCHES = 2000
# SQLite reads each match's unit by id, dearer than PostgreSQL's, and walks cheaply: the same
# choice turns at fewer matches (measured on 100,000: 1,349 matches cost 23 ms read by id, 3
# walked; 400 cost 4 ms by id).
SQLITE_FEW_MATCHES = 500


def first_words(words: Words, sizes: Sequence[int], total: int | None, few: int) -> Words:
    """The words to read through the index first: the rarest one when at most `few` units
    have it, all of them when the search is known to match at most `few` (its `total`), or
    none (walk in order). `sizes` are how many units have each word; a negative size or
    total (a count that ran out of time) is many."""
    known = [(size, word) for size, word in zip(sizes, words, strict=True) if size >= 0]
    if known and min(known)[0] <= few:
        return (min(known)[1],)
    if total is not None and 0 <= total <= few:
        return words
    return ()
