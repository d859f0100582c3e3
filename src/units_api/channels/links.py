"""Where buyers find a unit: its public page's absolute URL, per language."""

from __future__ import annotations

LANGUAGES = ("en", "ar")
# Each language's listings, under the public base URL.
LISTINGS = {"en": "/listings/", "ar": "/ar/listings/"}


def listings_url(base: str, language: str = "en") -> str:
    return base + LISTINGS[language]


def page_url(base: str, unit_id: object, language: str = "en") -> str:
    """A unit's public page: `base` the public base URL, without a trailing slash."""
    return f"{base}{LISTINGS[language]}{unit_id}"
