"""What display names are given to: the unit's text fields that take them, how a value is
matched (`normalize`), and a value's pair of names."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# The unit's text fields whose values are words a reader should see in their language.
FIELDS = (
    "type",
    "city",
    "location",
    "country",
    "view",
    "featureType",
    "service",
    "priceBase",
    "uom",
)
LANGUAGES = ("en", "ar")
MAX_VALUE = 500  # a unit's text field holds at most this many characters
MAX_NAME = 100


@dataclass(frozen=True, slots=True)
class Name:
    en: str
    ar: str

    def in_language(self, language: str) -> str:
        return self.ar if language == "ar" else self.en


def normalize(value: str) -> str:
    """A value as it is matched and stored: NFC, runs of white space made one space, trimmed,
    case-folded; so `New Cairo` and ` new  cairo ` are one value."""
    return " ".join(unicodedata.normalize("NFC", value).split()).casefold()


def control_free(text: str) -> bool:
    return not any(unicodedata.category(char) == "Cc" for char in text)
