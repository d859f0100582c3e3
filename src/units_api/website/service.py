"""The website's rules: which unit pages exist (live, gone or never), what a page shows in
each language, and the listings' search, read through the list's own machinery."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from units_api.channels import links, readiness
from units_api.channels.readiness import WEBSITE
from units_api.channels.service import Channel
from units_api.clock import utcnow
from units_api.context import AppContext
from units_api.db import Connection
from units_api.filters.parser import parse_filter
from units_api.http.json import load_stored
from units_api.names.service import Names
from units_api.search.normalize import query_tokens
from units_api.units import listing, repository
from units_api.units.fields import SortKey
from units_api.units.schemas import MAX_QUERY_LENGTH
from units_api.website.cache import Standing
from units_api.website.safe import http_url

PAGE_SIZE = 24
MAX_PAGE = listing.MAX_DEPTH // PAGE_SIZE
MAX_TEXT = 200


class BadSearch(ValueError):
    """A listings parameter that cannot be read; its message names it."""


async def read_version(conn: Connection, unit_id: uuid.UUID) -> int | None:
    return await repository.fetch_version(conn, unit_id)


async def read_stored(conn: Connection, unit_id: uuid.UUID) -> tuple[str, int] | None:
    """A unit's stored record and its version, unparsed (a page kept for that version needs
    no more)."""
    return await repository.fetch_doc(conn, unit_id)


def standing(unit: dict[str, Any], websites: list[Channel]) -> Standing:
    """Live on a website channel; gone (it was published once: unpublished, archived,
    blocked, taken off the website or no longer ready since); or never live (a draft, a
    scheduled unit). A unit no longer stored is judged by its deletion's event (router)."""
    now = utcnow()
    if any(readiness.live(WEBSITE, channel.name, unit, now) for channel in websites):
        return "live"
    return "gone" if unit["publishing"]["publishedAt"] is not None else "never"


def _money(value: Any) -> str:
    if isinstance(value, Decimal):
        text = f"{value:,f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:,}" if isinstance(value, int | float) else str(value)


def _in(language: str, unit: dict[str, Any], english: str, arabic: str) -> Any:
    """A field in the page's language, or its twin when that is empty."""
    first, second = (arabic, english) if language == "ar" else (english, arabic)
    return unit.get(first) or unit.get(second)


def _active(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("active") is not False]


@dataclass(frozen=True, slots=True)
class Site:
    """What every page of one request knows: its language, base URL, names and currency."""

    language: str
    base: str
    names: Names
    default_currency: str

    def price(self, unit: dict[str, Any]) -> str | None:
        if unit.get("price") is None:
            return None
        return f"{_money(unit['price'])} {unit.get('currency') or self.default_currency}"

    def card(self, unit: dict[str, Any]) -> dict[str, Any]:
        """A unit as the listings show it."""
        language, names = self.language, self.names
        images = [http_url(unit.get("unitImageUrl")), *map(http_url, unit.get("gallery") or [])]
        return {
            "id": unit["id"],
            "url": links.page_url(self.base, unit["id"], language),
            "name": _in(language, unit, "name", "unitNameAr"),
            "price": self.price(unit),
            "city": names.display("city", unit.get("city"), language),
            "type": names.display("type", unit.get("type"), language),
            "bedrooms": unit.get("bedrooms"),
            "bathrooms": unit.get("bathrooms"),
            "surface": _money(unit["surface"]) if unit.get("surface") is not None else None,
            "image": next((image for image in images if image), None),
            "availability": unit["availability"]["status"],
        }

    def page(self, unit: dict[str, Any]) -> dict[str, Any]:
        """Everything a unit's page shows, in the page's language: public fields only."""
        language, names = self.language, self.names
        card = self.card(unit)
        images = [http_url(unit.get("unitImageUrl")), *map(http_url, unit.get("gallery") or [])]
        point = (unit.get("unitLocation") or {}).get("coordinates")
        floor_plans = [
            {
                "name": _in(language, floor, "floorName", "floorNameAr")
                or str(floor.get("floorsNumber") or ""),
                "description": _in(language, floor, "floorDesc", "floorDescAr"),
                "rooms": floor.get("rooms"),
                "baths": floor.get("baths"),
                "area": _money(floor["area"]) if floor.get("area") is not None else None,
                "view": names.display("view", floor.get("view"), language) or None,
                "image": http_url(floor.get("floorImage")),
            }
            for floor in unit.get("floorsPlan") or []
        ]
        plans = [
            {
                "name": _in(language, plan, "planName", "planNameAr"),
                "description": _in(language, plan, "planDesc", "planDescAr"),
                "down_payment": _money(plan["downPayment"])
                if plan.get("downPayment") is not None
                else None,
                "installment": _money(plan["installmentsValue"])
                if plan.get("installmentsValue") is not None
                else None,
                "details": plan.get("paymentDetails"),
            }
            for plan in _active(unit.get("paymentPlans") or [])
        ]
        specs = [
            {
                "type": names.display("featureType", spec.get("featureType"), language),
                "description": _in(language, spec, "featureDesc", "featureDescAr"),
                "image": http_url(spec.get("featureImage")),
            }
            for spec in _active(unit.get("specs") or [])
        ]
        description = _in(language, unit, "unitDesc", "unitDescAr")
        short = _in(language, unit, "unitShortDesc", "unitShortDescAr")
        return {
            **card,
            "language": language,
            "url": links.page_url(self.base, unit["id"], language),
            "urls": {code: links.page_url(self.base, unit["id"], code) for code in links.LANGUAGES},
            "location": names.display("location", unit.get("location"), language) or None,
            "country": names.display("country", unit.get("country"), language) or None,
            "currency": unit.get("currency") or self.default_currency,
            "offering": unit.get("offeringType") or "sale",
            "completion": unit.get("completionStatus"),
            "handover": unit.get("handoverDate"),
            "description": description or short,
            "short": short if description else None,
            "images": [image for image in images if image],
            "point": {"lng": point[0], "lat": point[1]} if point else None,
            "floor_plans": floor_plans,
            "payment_plans": plans,
            "specs": specs,
        }


@dataclass(frozen=True, slots=True)
class Search:
    q: str | None
    city: str | None
    type: str | None
    min_price: Decimal | None
    max_price: Decimal | None
    bedrooms: int | None
    page: int

    def signature(self) -> tuple[object, ...]:
        """Everything the search asks, as a key for the pages kept."""
        return (*self.query().items(), self.page)

    def query(self) -> dict[str, str]:
        """The search as a query string's parameters (for the pages' links)."""
        given = {
            "q": self.q,
            "city": self.city,
            "type": self.type,
            "minPrice": None if self.min_price is None else str(self.min_price),
            "maxPrice": None if self.max_price is None else str(self.max_price),
            "bedrooms": None if self.bedrooms is None else str(self.bedrooms),
        }
        return {key: value for key, value in given.items() if value is not None}


def _text(raw: str | None, name: str, limit: int = MAX_TEXT) -> str | None:
    if raw is None or not raw.strip():
        return None
    if len(raw) > limit:
        raise BadSearch(f"{name} is longer than {limit} characters")
    if "\x00" in raw:
        raise BadSearch(f"{name} holds a character it may not")
    return raw.strip()


def _amount(raw: str | None, name: str) -> Decimal | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = Decimal(raw.strip().replace(",", ""))
    except InvalidOperation:
        raise BadSearch(f"{name} is not a number") from None
    if not value.is_finite() or value < 0 or value > Decimal(10) ** 15:
        raise BadSearch(f"{name} must be a number from 0 to 10^15")
    return value


def _whole(raw: str | None, name: str, low: int, high: int) -> int | None:
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise BadSearch(f"{name} is not a whole number")
    value = int(text)
    if not low <= value <= high:
        raise BadSearch(f"{name} must be from {low} to {high}")
    return value


def parse_search(query: dict[str, str]) -> Search:
    """The listings' parameters, or BadSearch naming the first bad one."""
    return Search(
        q=_text(query.get("q"), "q", MAX_QUERY_LENGTH),
        city=_text(query.get("city"), "city"),
        type=_text(query.get("type"), "type"),
        min_price=_amount(query.get("minPrice"), "minPrice"),
        max_price=_amount(query.get("maxPrice"), "maxPrice"),
        bedrooms=_whole(query.get("bedrooms"), "bedrooms", 0, 100),
        page=_whole(query.get("page"), "page", 1, MAX_PAGE) or 1,
    )


def search_filter(search: Search, websites: list[Channel], names: Names) -> str:
    terms = [readiness.live_filter(WEBSITE, [channel.name for channel in websites])]
    if search.city:
        terms.append(names.named_filter("city", search.city))
    if search.type:
        terms.append(names.named_filter("type", search.type))
    if search.min_price is not None:
        terms.append(f"price>={search.min_price}")
    if search.max_price is not None:
        terms.append(f"price<={search.max_price}")
    if search.bedrooms is not None:
        terms.append(f"bedrooms=={search.bedrooms}")
    return ";".join(terms)


@dataclass(frozen=True, slots=True)
class Found:
    units: list[dict[str, Any]]
    total: int
    version: int | None  # the units' change version they were read at


async def read_change_version(conn: Connection) -> int:
    """The units' change version now: a listings page kept for it needs nothing more read."""
    return await repository.fetch_change_version(conn)


async def find(context: AppContext, search: Search, websites: list[Channel], names: Names) -> Found:
    """A page of the units live on the website that match, newest first (with words too, as
    section 17 asks: a page of a common word is then a walk in creation order), and how many
    match in all."""
    if not websites:
        return Found([], 0, None)
    words = tuple(query_tokens(search.q or ""))
    params = listing.ListParams(
        limit=PAGE_SIZE,
        page=search.page,
        sort=(SortKey("createdAt", True),),
        fields=None,
        filter=parse_filter(search_filter(search, websites, names)),
        q=search.q,
        words=words,
        count="default",
    )
    settings = context.settings
    listed = await listing.read_list(
        context.db,
        context.counts,
        params,
        None,
        settings.count_budget_ms,
        settings.search_few_matches,
        context.located_by_time,
        versioned=True,
    )
    units = [load_stored(doc) for doc in listed.page[0][:PAGE_SIZE]]
    return Found(units, int(listed.total[0] or 0), listed.version)
