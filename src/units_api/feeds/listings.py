"""A unit as a Meta home listing (section 17's field mapping), as plain values.

A stored document is read, as UTF-8 bytes, only for the fields a listing uses (msgspec skips
the rest: a fifth of the time of reading the whole unit). Numbers are kept as the JSON text
they were stored as (exact, and no Decimal made for a number only copied into the file), and
a document with nothing XML forbids in it (most) has none of its texts searched for it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

import msgspec

from units_api.channels.readiness import META_CATALOG, sold_lately
from units_api.channels.service import listing_url

DESCRIPTION_MAX: Final = 5_000
IMAGES_MAX: Final = 20
DEFAULT_PROPERTY_TYPE: Final = "other"

# What XML 1.0 forbids (C0 controls but tab, line feed and carriage return; lone surrogates,
# which UTF-8 cannot carry either; U+FFFE and U+FFFF): left out of every value, in both files.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_HTTP = re.compile(r"https?://", re.IGNORECASE)
# Characters that belong to the one before them: a cut never falls just before one.
_JOINING = {"\u200d", "\ufe0e", "\ufe0f"}


# A JSON number as stored (`msgspec.Raw`): exact, read as a Decimal only when compared.
NULL: Final = msgspec.Raw(b"null")


class Point(msgspec.Struct):
    coordinates: list[msgspec.Raw]


class Publishing(msgspec.Struct):
    status: str
    channels: list[str]


class Availability(msgspec.Struct):
    status: str
    changedAt: str | None = None


class Source(msgspec.Struct):
    """The fields of a stored unit a listing reads."""

    id: str
    publishing: Publishing
    availability: Availability
    name: str | None = None
    type: str | None = None
    location: str | None = None
    city: str | None = None
    country: str | None = None
    price: msgspec.Raw = NULL
    currency: str | None = None
    unitImageUrl: str | None = None
    gallery: list[str] | None = None
    unitLocation: Point | None = None
    unitDesc: str | None = None
    unitShortDesc: str | None = None
    offeringType: str | None = None
    completionStatus: str | None = None
    bedrooms: int | None = None
    bathrooms: int | None = None


decode = msgspec.json.Decoder(Source).decode


def forbids_nothing(doc: bytes) -> bool:
    """Whether no text of a stored document (JSON, UTF-8) can hold what XML forbids, from two
    one-byte scans. JSON writes a C0 control (`\\u0001`, `\\b`) and a lone surrogate as an
    escape, so with no backslash there is none; U+FFFE and U+FFFF begin with the byte EF (as
    does every character from U+F000). A false "no" only costs the search `clean` does."""
    return b"\\" not in doc and b"\xef" not in doc


def number(raw: msgspec.Raw) -> str | None:
    """A stored JSON number as plain decimal text (`4850000`, `31.2357`): as written, unless
    written with an exponent."""
    text = bytes(raw).decode()
    if text == "null":
        return None
    return format(Decimal(text), "f") if "e" in text or "E" in text else text


@dataclass(frozen=True, slots=True)
class Channel:
    """What a channel's listings depend on beside the units."""

    name: str
    settings: Mapping[str, Any]
    property_types: Mapping[str, str]  # a unit's type, case-folded -> Meta's property_type
    base: str  # the public base URL, for a listing's page on the website
    default_currency: str
    now: datetime  # a sold unit is listed for SOLD_KEPT after its sale

    @classmethod
    def of(
        cls, name: str, settings: Mapping[str, Any], base: str, currency: str, now: datetime
    ) -> Channel:
        types = settings.get("propertyTypes") or {}
        return cls(
            name=name,
            settings=settings,
            property_types={key.casefold(): value for key, value in types.items()},
            base=base,
            default_currency=currency,
            now=now,
        )


def clean(text: str) -> str:
    """`text` without the characters XML 1.0 forbids."""
    return _FORBIDDEN.sub("", text) if _FORBIDDEN.search(text) else text


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, never parting a character from the marks that follow it."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and (unicodedata.combining(text[end]) or text[end] in _JOINING):
        end -= 1
    if end > 0 and text[end - 1] == "\u200d":
        end -= 1
    return text[:end]


def _present(value: str | None) -> bool:
    return value is not None and bool(value.strip())


def _availability(unit: Source) -> str:
    status = unit.availability.status
    if status == "reserved":
        return "sale_pending"
    if status == "sold":
        return "recently_sold"
    return "for_rent" if unit.offeringType == "rent" else "for_sale"


def _images(unit: Source, text: Callable[[str], str]) -> list[str]:
    found: dict[str, None] = {}
    for url in (unit.unitImageUrl, *(unit.gallery or ())):
        if url and _HTTP.match(url):
            found.setdefault(text(url))
            if len(found) == IMAGES_MAX:
                break
    return list(found)


def _description(unit: Source, text: Callable[[str], str]) -> str | None:
    found = unit.unitDesc if _present(unit.unitDesc) else unit.unitShortDesc
    return cut(text(found), DESCRIPTION_MAX) if found else None


def _listing_type(unit: Source) -> str:
    if unit.completionStatus == "offPlan":
        return "new_construction"
    return "for_rent_by_agent" if unit.offeringType == "rent" else "for_sale_by_agent"


def _url(channel: Channel, unit_id: str) -> str:
    url = listing_url(META_CATALOG, channel.settings, channel.base, unit_id)
    assert url is not None  # a meta-catalog listing always has one
    return url


def _same(text: str) -> str:
    return text


def listing(unit: Source, channel: Channel, forbidden: bool = True) -> dict[str, Any] | None:
    """The listing of a unit the feed's read found live on `channel` by its columns (which
    hold its readiness: `readiness.live_filter`), or None when it is not listed after all: it
    was sold more than SOLD_KEPT ago, or its document disagrees with its columns (one stored
    by other means than the service's writes). `forbidden`: whether the unit's texts may hold
    what XML forbids (`forbids_nothing`), to be left out."""
    publishing, availability = unit.publishing, unit.availability
    if publishing.status != "published" or channel.name not in publishing.channels:
        return None
    if availability.status == "blocked" or unit.unitLocation is None or unit.price == NULL:
        return None
    if availability.status == "sold" and not (
        availability.changedAt and sold_lately(availability.changedAt, channel.now)
    ):
        return None
    text = clean if forbidden else _same
    longitude, latitude = unit.unitLocation.coordinates[:2]
    location, city, country = text(unit.location or ""), text(unit.city or ""), unit.country
    return {
        "home_listing_id": unit.id,
        "name": text(unit.name or ""),
        "availability": _availability(unit),
        "address": {"addr1": location, "city": city, "region": city, "country": country},
        "latitude": number(latitude),
        "longitude": number(longitude),
        "neighborhood": [location],
        "price": f"{number(unit.price)} {unit.currency or channel.default_currency}",
        "image": _images(unit, text),
        "url": clean(_url(channel, unit.id)),
        "description": _description(unit, text),
        "num_beds": unit.bedrooms,
        "num_baths": unit.bathrooms,
        "property_type": channel.property_types.get(
            (unit.type or "").casefold(), DEFAULT_PROPERTY_TYPE
        ),
        "listing_type": _listing_type(unit),
    }
