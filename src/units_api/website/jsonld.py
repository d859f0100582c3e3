"""A listing page's structured data: one schema.org `RealEstateListing` (section 17)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from units_api.website.safe import http_url

AVAILABILITY = {
    "available": "https://schema.org/InStock",
    "reserved": "https://schema.org/Reserved",
    "sold": "https://schema.org/SoldOut",
}
BUSINESS = {
    "sale": "http://purl.org/goodrelations/v1#Sell",
    "rent": "http://purl.org/goodrelations/v1#LeaseOut",
}
# A unit's `type` (lower case) -> the dwelling's schema.org type; any other: Accommodation.
DWELLINGS = {
    "apartment": "Apartment",
    "studio": "Apartment",
    "duplex": "Apartment",
    "penthouse": "Apartment",
    "loft": "Apartment",
    "serviced apartment": "Apartment",
    "villa": "SingleFamilyResidence",
    "twin house": "House",
    "townhouse": "House",
    "chalet": "House",
    "cabin": "House",
}


def _number(value: Any) -> Any:
    """An exact amount as JSON-LD carries it: a number, written as stored."""
    if isinstance(value, Decimal):
        return orjson.Fragment(format(value, "f").encode())
    if isinstance(value, orjson.Fragment | int | float | str) or value is None:
        return value
    raise TypeError(f"{type(value).__name__} is not JSON")


def _drop_empty(node: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if value not in (None, "", [], {})}


def listing(unit: dict[str, Any], page: dict[str, Any]) -> dict[str, Any]:
    """The structured data of a unit's page; `page` holds what the page shows (its language's
    name and texts, its URL, its currency, its pictures)."""
    point = (unit.get("unitLocation") or {}).get("coordinates")
    dwelling = _drop_empty(
        {
            "@type": DWELLINGS.get(str(unit["type"]).strip().lower(), "Accommodation"),
            "name": page["name"],
            "numberOfBedrooms": unit.get("bedrooms"),
            "numberOfBathroomsTotal": unit.get("bathrooms"),
            "floorSize": (
                {"@type": "QuantitativeValue", "value": _number(unit["surface"]), "unitCode": "MTK"}
                if unit.get("surface") is not None
                else None
            ),
            "geo": (
                {"@type": "GeoCoordinates", "latitude": point[1], "longitude": point[0]}
                if point
                else None
            ),
            "address": _drop_empty(
                {
                    "@type": "PostalAddress",
                    "streetAddress": page["location"],
                    "addressLocality": page["city"],
                    "addressCountry": unit.get("country"),
                }
            ),
            "accommodationFloorPlan": [
                _drop_empty(
                    {"@type": "FloorPlan", "name": plan["name"], "layoutImage": plan["image"]}
                )
                for plan in page["floor_plans"]
                if plan["image"]
            ],
        }
    )
    offer = _drop_empty(
        {
            "@type": "Offer",
            "price": _number(unit["price"]),
            "priceCurrency": page["currency"],
            "availability": AVAILABILITY.get(unit["availability"]["status"]),
            "businessFunction": BUSINESS[unit.get("offeringType") or "sale"],
            "url": page["url"],
        }
    )
    return _drop_empty(
        {
            "@context": "https://schema.org",
            "@type": "RealEstateListing",
            "name": page["name"],
            "description": page["description"],
            "url": page["url"],
            "inLanguage": page["language"],
            "datePosted": unit["publishing"]["publishedAt"],
            "dateModified": unit["updatedAt"],
            "image": [http_url(url) for url in page["images"]],
            "offers": offer,
            "about": dwelling,
        }
    )


def script_text(data: dict[str, Any]) -> str:
    """JSON for inside `<script type="application/ld+json">`: `<`, `>` and `&` written as
    escapes, so no text of a unit (a name holding `</script>`) can end the block."""
    text = orjson.dumps(data, default=_number).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
