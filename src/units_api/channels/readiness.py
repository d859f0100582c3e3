"""What a channel of each kind needs of a unit before the unit is live on it.

Pure rules on a unit's fields, shared by publishing (checked at publish and schedule), the
unit's channels page and every channel's output (a unit that no longer meets them leaves the
output until mended). Imports nothing of a domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from units_api.filters.parser import quote

LABEL: Final = "label"
WEBSITE: Final = "website"
META_CATALOG: Final = "meta-catalog"
KINDS: Final = (LABEL, WEBSITE, META_CATALOG)

# A channel's name: 1-40 of a-z, 0-9 and "-".
NAME_PATTERN: Final = r"^[a-z0-9-]{1,40}$"

# The fields each kind needs at publish and schedule: "image" is `unitImageUrl` or a
# `gallery` item, "unitDesc" is `unitDesc` or `unitShortDesc`.
REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {
    LABEL: (),
    WEBSITE: ("name", "price", "city", "image"),
    META_CATALOG: ("name", "price", "city", "image", "unitLocation", "location", "unitDesc"),
}
# What the home-listings feed needs beside them, or the unit is left out of it (and named on
# its channels page): Meta's address needs a country.
FEED_REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {META_CATALOG: ("country",)}

_TEXT: Final = {
    "price": "a price above 0",
    "image": "an image (`unitImageUrl` or a `gallery` item)",
    "unitDesc": "a description (`unitDesc` or `unitShortDesc`)",
    "unitLocation": "a map position (`unitLocation`)",
}


def _present(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return value not in (None, [], {})


def _ready(fields: Mapping[str, Any], name: str) -> bool:
    if name == "image":
        return _present(fields.get("unitImageUrl")) or _present(fields.get("gallery"))
    if name == "unitDesc":
        return _present(fields.get("unitDesc")) or _present(fields.get("unitShortDesc"))
    if name == "price":
        price = fields.get("price")
        return price is not None and price > 0
    return _present(fields.get(name))


def missing_to_publish(kind: str, fields: Mapping[str, Any]) -> list[str]:
    """The fields a channel of `kind` needs at publish and schedule that `fields` lack."""
    return [name for name in REQUIRED.get(kind, ()) if not _ready(fields, name)]


def missing(kind: str, fields: Mapping[str, Any]) -> list[str]:
    """Everything a channel of `kind` needs of the unit to carry it, that it lacks now."""
    needed = (*REQUIRED.get(kind, ()), *FEED_REQUIRED.get(kind, ()))
    return [name for name in needed if not _ready(fields, name)]


def requirement_text(name: str) -> str:
    """A required field in words, for messages and the documentation."""
    return _TEXT.get(name, f"`{name}`")


def rules_text() -> str:
    """Every kind's rules in words, for the documentation."""
    parts = []
    for kind in KINDS:
        needed = REQUIRED[kind]
        words = ", ".join(requirement_text(name) for name in needed) if needed else "nothing"
        parts.append(f"`{kind}` needs {words}")
    return "; ".join(parts) + "."


# How long a sold unit stays in a home-listings feed (as `recently_sold`) after its sale.
SOLD_KEPT: Final = timedelta(days=30)


def live(kind: str, name: str, unit: Mapping[str, Any], now: datetime) -> bool:
    """Whether `unit` (as the API shows it) is live on channel `name` of `kind`: published,
    named in its channels, not blocked, and lacking nothing the kind needs (a feed also drops
    a unit sold more than SOLD_KEPT ago)."""
    publishing, availability = unit["publishing"], unit["availability"]
    if publishing["status"] != "published" or name not in publishing["channels"]:
        return False
    if availability["status"] == "blocked" or missing(kind, unit):
        return False
    if kind == META_CATALOG and availability["status"] == "sold":
        return sold_lately(availability["changedAt"], now)
    return True


def sold_lately(changed_at: str, now: datetime) -> bool:
    """Whether a unit sold at `changed_at` (its availability's) is still in a feed at `now`."""
    return now - datetime.fromisoformat(changed_at) <= SOLD_KEPT


# Each kind's rules as a unit filter (RSQL), beside `missing` (the same rules on one unit).
_FILTER_TERMS: Final[Mapping[str, str]] = {
    "name": "name=null=false",
    "price": "price>0",
    "city": "city=null=false",
    "image": "(unitImageUrl=null=false,gallery=null=false)",
    "unitLocation": "unitLocation=null=false",
    "location": "location=null=false",
    "unitDesc": "(unitDesc=null=false,unitShortDesc=null=false)",
    "country": "country=null=false",
}


def live_filter(kind: str, names: list[str]) -> str:
    """The units live on any of the channels `names` (all of `kind`), as a unit filter for the
    list's machinery: published, not blocked, on one of them, lacking nothing the kind needs.
    (A feed's 30 days for sold units is the feed's own to apply.)"""
    if not names:
        raise ValueError("a live filter needs at least one channel")
    needed = (*REQUIRED[kind], *FEED_REQUIRED.get(kind, ()))
    terms = [
        "status==published",
        "availability!=blocked",
        "channel=in=(" + ",".join(quote(name) for name in names) + ")",
        *(_FILTER_TERMS[name] for name in needed),
    ]
    return ";".join(terms)
