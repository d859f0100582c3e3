"""The feed's files: listings as Meta's XML (`<listings><listing>...`) or as CSV whose header
names nested fields by JSON path (`address.city`, `image[0].url`, `neighborhood[0]`).

Each is written in pieces (a head, the listings of each batch, a tail), so a feed of any
size is never whole in memory. Values come cleaned of what XML forbids (`listings.clean`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from units_api.feeds.listings import IMAGES_MAX

XML_MEDIA_TYPE: Final = "application/xml; charset=utf-8"
CSV_MEDIA_TYPE: Final = "text/csv; charset=utf-8"
_ADDRESS: Final = ("addr1", "city", "region", "country")
# The scalar fields after the address, in the order both files write them.
_HEAD: Final = ("home_listing_id", "name", "availability")
_TAIL: Final = ("url", "description", "num_beds", "num_baths", "property_type", "listing_type")
_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


class Format(Protocol):
    @property
    def media_type(self) -> str: ...

    def head(self) -> str: ...

    def listings(self, listings: Iterable[dict[str, Any]]) -> str: ...

    def tail(self) -> str: ...


def escape(text: str) -> str:
    """Text as XML character data: `&`, `<` and `>` as references (so `]]>` never appears),
    and a carriage return too, which a parser would otherwise turn into a line feed."""
    if "&" in text or "<" in text or ">" in text or "\r" in text:
        return text.translate(_ESCAPES)
    return text


def _optional(name: str, value: Any) -> str:
    if value is None:
        return ""
    text = escape(value) if isinstance(value, str) else str(value)
    return f"<{name}>{text}</{name}>"


def _xml_listing(listing: dict[str, Any]) -> str:
    # One template per listing: a feed writes a million of them.
    address = listing["address"]
    places = "".join(
        f"<neighborhood>{escape(place)}</neighborhood>" for place in listing["neighborhood"]
    )
    images = "".join(f"<image><url>{escape(url)}</url></image>" for url in listing["image"])
    return (
        f"<listing><home_listing_id>{listing['home_listing_id']}</home_listing_id>"
        f"<name>{escape(listing['name'])}</name>"
        f"<availability>{listing['availability']}</availability>"
        '<address format="simple">'
        f'<component name="addr1">{escape(address["addr1"])}</component>'
        f'<component name="city">{escape(address["city"])}</component>'
        f'<component name="region">{escape(address["region"])}</component>'
        f'<component name="country">{escape(address["country"])}</component>'
        f"</address><latitude>{listing['latitude']}</latitude>"
        f"<longitude>{listing['longitude']}</longitude>{places}"
        f"<price>{listing['price']}</price>{images}<url>{escape(listing['url'])}</url>"
        f"{_optional('description', listing['description'])}"
        f"{_optional('num_beds', listing['num_beds'])}"
        f"{_optional('num_baths', listing['num_baths'])}"
        f"<property_type>{listing['property_type']}</property_type>"
        f"<listing_type>{listing['listing_type']}</listing_type></listing>\n"
    )


@dataclass(frozen=True)
class Xml:
    media_type: str = XML_MEDIA_TYPE

    def head(self) -> str:
        return '<?xml version="1.0" encoding="UTF-8"?>\n<listings>\n'

    def listings(self, listings: Iterable[dict[str, Any]]) -> str:
        return "".join(_xml_listing(listing) for listing in listings)

    def tail(self) -> str:
        return "</listings>\n"


CSV_COLUMNS: Final = (
    *_HEAD,
    *(f"address.{name}" for name in _ADDRESS),
    "latitude",
    "longitude",
    "neighborhood[0]",
    "price",
    *(f"image[{index}].url" for index in range(IMAGES_MAX)),
    *_TAIL,
)


def _csv_row(listing: dict[str, Any]) -> list[Any]:
    address, images = listing["address"], listing["image"]
    return [
        *(listing[name] for name in _HEAD),
        *(address[name] for name in _ADDRESS),
        listing["latitude"],
        listing["longitude"],
        listing["neighborhood"][0],
        listing["price"],
        *images,
        *([""] * (IMAGES_MAX - len(images))),
        *("" if listing[name] is None else listing[name] for name in _TAIL),
    ]


def _csv_text(rows: Iterable[Iterable[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


@dataclass(frozen=True)
class Csv:
    media_type: str = CSV_MEDIA_TYPE

    def head(self) -> str:
        return _csv_text([CSV_COLUMNS])

    def listings(self, listings: Iterable[dict[str, Any]]) -> str:
        return _csv_text(_csv_row(listing) for listing in listings)

    def tail(self) -> str:
        return ""


FORMATS: Final[dict[str, Format]] = {"xml": Xml(), "csv": Csv()}
