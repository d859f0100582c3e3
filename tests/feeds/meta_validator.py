"""A checker of Meta home-listings feeds, written from the field table of Meta's real-estate
ads documentation (there is no published schema): required fields, enumerations, the price
pattern, at most 20 images, a description of at most 5,000 characters, coordinates in range.

It knows nothing of the service: it reads a feed as Meta would and returns each listing as a
flat dict of JSON-path names (`address.city`, `image[0].url`) to values, or raises
`Invalid` naming the listing and the rule it breaks.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from decimal import Decimal, InvalidOperation

REQUIRED = (
    "home_listing_id",
    "name",
    "availability",
    "address.addr1",
    "address.city",
    "address.region",
    "address.country",
    "latitude",
    "longitude",
    "neighborhood[0]",
    "price",
    "image[0].url",
    "url",
)
AVAILABILITY = {
    "for_sale",
    "for_rent",
    "sale_pending",
    "recently_sold",
    "off_market",
    "available_soon",
}
PROPERTY_TYPE = {"apartment", "condo", "house", "land", "manufactured", "other", "townhouse"}
LISTING_TYPE = {
    "for_rent_by_agent",
    "for_rent_by_owner",
    "for_sale_by_agent",
    "for_sale_by_owner",
    "foreclosed",
    "new_construction",
    "new_listing",
}
PRICE = re.compile(r"^\d+(\.\d+)? [A-Z]{3}$")
IMAGES_MAX = 20
NEIGHBORHOODS_MAX = 20
DESCRIPTION_MAX = 5000
ADDRESS_COMPONENTS = {"addr1", "city", "region", "country", "postal_code"}


class Invalid(AssertionError):
    pass


def _number(listing: dict[str, str], name: str, low: Decimal, high: Decimal) -> None:
    try:
        value = Decimal(listing[name])
    except InvalidOperation:
        raise Invalid(
            f"{listing['home_listing_id']}: {name} {listing[name]!r} is no number"
        ) from None
    if not low <= value <= high:
        raise Invalid(f"{listing['home_listing_id']}: {name} {value} out of range")


def check(listing: dict[str, str]) -> dict[str, str]:
    """One listing (flat, JSON-path names) against the field table."""
    ident = listing.get("home_listing_id", "?")
    for name in REQUIRED:
        if not listing.get(name, "").strip():
            raise Invalid(f"{ident}: required {name} is missing")
    if listing["availability"] not in AVAILABILITY:
        raise Invalid(f"{ident}: availability {listing['availability']!r}")
    if not PRICE.match(listing["price"]):
        raise Invalid(f"{ident}: price {listing['price']!r}")
    _number(listing, "latitude", Decimal(-90), Decimal(90))
    _number(listing, "longitude", Decimal(-180), Decimal(180))
    images = [name for name in listing if re.fullmatch(r"image\[\d+\]\.url", name)]
    if len([name for name in images if listing[name]]) > IMAGES_MAX:
        raise Invalid(f"{ident}: more than {IMAGES_MAX} images")
    for name in images:
        if listing[name] and not re.match(r"https?://", listing[name]):
            raise Invalid(f"{ident}: {name} is not a URL")
    places = [name for name in listing if name.startswith("neighborhood[")]
    if len(places) > NEIGHBORHOODS_MAX:
        raise Invalid(f"{ident}: more than {NEIGHBORHOODS_MAX} neighborhoods")
    if len(listing.get("description", "")) > DESCRIPTION_MAX:
        raise Invalid(f"{ident}: description longer than {DESCRIPTION_MAX}")
    for name in ("num_beds", "num_baths", "num_units"):
        if listing.get(name) and not re.fullmatch(r"\d+(\.\d+)?", listing[name]):
            raise Invalid(f"{ident}: {name} {listing[name]!r} is no number")
    if listing.get("property_type") and listing["property_type"] not in PROPERTY_TYPE:
        raise Invalid(f"{ident}: property_type {listing['property_type']!r}")
    if listing.get("listing_type") and listing["listing_type"] not in LISTING_TYPE:
        raise Invalid(f"{ident}: listing_type {listing['listing_type']!r}")
    if listing.get("year_built") and not re.fullmatch(r"\d{4}", listing["year_built"]):
        raise Invalid(f"{ident}: year_built {listing['year_built']!r}")
    if listing.get("status") and listing["status"] not in ("active", "archived"):
        raise Invalid(f"{ident}: status {listing['status']!r}")
    return listing


def _flat_xml(element: ET.Element) -> dict[str, str]:
    flat: dict[str, str] = {}
    images = places = 0
    for child in element:
        if child.tag == "address":
            if child.get("format") != "simple":
                raise Invalid("an address is not format=simple")
            for component in child:
                name = component.get("name")
                if component.tag != "component" or name not in ADDRESS_COMPONENTS:
                    raise Invalid(f"address component {component.tag} {name!r}")
                flat[f"address.{name}"] = component.text or ""
        elif child.tag == "image":
            url = child.find("url")
            flat[f"image[{images}].url"] = url.text or "" if url is not None else ""
            images += 1
        elif child.tag == "neighborhood":
            flat[f"neighborhood[{places}]"] = child.text or ""
            places += 1
        else:
            if len(child):
                raise Invalid(f"<{child.tag}> has children")
            if child.tag in flat:
                raise Invalid(f"<{child.tag}> twice")
            flat[child.tag] = child.text or ""
    return flat


def parse_xml(data: bytes) -> list[dict[str, str]]:
    """Every listing of an XML feed, checked; ET.ParseError if it is not well-formed."""
    root = ET.fromstring(data)
    if root.tag != "listings":
        raise Invalid(f"the root is <{root.tag}>, not <listings>")
    listings = [check(_flat_xml(element)) for element in root if element.tag == "listing"]
    ids = [listing["home_listing_id"] for listing in listings]
    if len(ids) != len(set(ids)):
        raise Invalid("a home_listing_id appears twice")
    return listings


def parse_csv(data: bytes) -> list[dict[str, str]]:
    """Every listing of a CSV feed (UTF-8, a header row of JSON paths), checked."""
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
    header = next(reader)
    for name in header:
        if not re.fullmatch(r"[a-z_]+(\[\d+\])?(\.[a-z_0-9]+)?(\[\d+\])?", name):
            raise Invalid(f"column {name!r} is not a JSON path")
    listings = []
    for row in reader:
        if len(row) != len(header):
            raise Invalid(f"a row of {len(row)} cells under {len(header)} columns")
        listings.append(
            check({name: value for name, value in zip(header, row, strict=True) if value})
        )
    ids = [listing["home_listing_id"] for listing in listings]
    if len(ids) != len(set(ids)):
        raise Invalid("a home_listing_id appears twice")
    return listings
