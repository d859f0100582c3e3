"""Text normalisation for search, the same when text is indexed and when a query is read.

Case- and accent-insensitive; Arabic is normalised: tashkeel (U+064B..U+0652, U+0670) and
tatweel removed, أ إ آ ٱ -> ا, ى -> ي, ة -> ه, ؤ -> و, ئ -> ي, Arabic-Indic and Persian
digits -> 0-9.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

_TRANSLATE = str.maketrans(
    {
        "\u0671": "\u0627",  # ٱ alef wasla -> ا
        "\u0649": "\u064a",  # ى alef maksura -> ي
        "\u0629": "\u0647",  # ة teh marbuta -> ه
        "\u0640": None,  # tatweel
        **{chr(0x0660 + d): str(d) for d in range(10)},  # Arabic-Indic digits
        **{chr(0x06F0 + d): str(d) for d in range(10)},  # Persian digits
    }
)
_WORD = re.compile(r"[^\W_]+")
# Longer "words" are not searched for; PostgreSQL also caps a lexeme at 2,047 bytes.
MAX_WORD = 100
SEARCH_FIELDS = (
    "name",
    "unitNameAr",
    "unitDesc",
    "unitDescAr",
    "unitShortDesc",
    "unitShortDescAr",
    "city",
    "location",
    "type",
    "subProjectId",
)


def _strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalize(text: str) -> str:
    # NFKD splits أ إ آ ؤ ئ into their base letter plus a combining hamza or madda, and Latin
    # accents into combining marks; every combining mark (tashkeel included) is then dropped.
    # Marks are dropped again after casefolding, which can expose some (İ -> i + dot), so
    # normalising twice changes nothing.
    folded = _strip_marks(text.translate(_TRANSLATE)).casefold()
    return unicodedata.normalize("NFC", _strip_marks(folded)).translate(_TRANSLATE)


# The words of the chunks seen lately, emptied when full: a plain dict, as a look-up in it
# costs half what one through `functools.lru_cache` does, and a unit's text is hundreds.
_CHUNKS: dict[str, tuple[str, ...]] = {}
_CHUNKS_KEPT = 1 << 16


def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    words = tuple(_WORD.findall(normalize(chunk)))
    if len(_CHUNKS) >= _CHUNKS_KEPT:
        _CHUNKS.clear()
    _CHUNKS[chunk] = words
    return words


def tokens(text: str) -> list[str]:
    # Whitespace never belongs to a word and normalisation keeps it whitespace, so the text is
    # normalised chunk by chunk, and a chunk seen before (most are) costs a lookup.
    seen = _CHUNKS.get
    found: list[str] = []
    for chunk in text.split():
        words = seen(chunk)
        if words is None:
            words = _chunk_tokens(chunk)
        found += words
    return found


def record_tokens(fields: dict[str, object]) -> list[str]:
    """The distinct words a unit is found by, from its searchable fields."""
    # The fields are normalised together: normalisation never joins across a line break.
    text = "\n".join(v for v in (fields.get(name) for name in SEARCH_FIELDS) if isinstance(v, str))
    return list(dict.fromkeys(word for word in tokens(text) if len(word) <= MAX_WORD))


def touches_search(changes: Mapping[str, object]) -> bool:
    """Whether a change alters what a unit is found by."""
    return any(name in changes for name in SEARCH_FIELDS)


Words = tuple[str, ...]  # a search text's words, as query_tokens gives them


def query_tokens(q: str, limit: int = 16) -> list[str]:
    return list(dict.fromkeys(tokens(q)))[:limit]
