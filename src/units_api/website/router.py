"""The website: listings and one page per live unit, in English and Arabic (section 17).

Public: no key and no session, a per-address limit. Server-rendered HTML that works without
JavaScript; errors are HTML pages in the page's language, never problem+json.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter
from jinja2 import Environment, FileSystemLoader, Template, select_autoescape
from starlette.requests import Request
from starlette.responses import Response

from units_api.channels import links
from units_api.channels.readiness import WEBSITE
from units_api.channels.router import public_base, public_limit
from units_api.channels.service import Channel
from units_api.clock import parse_time
from units_api.context import AppContext, app_context
from units_api.http.conditional import http_date, not_modified
from units_api.http.etag import matches_tag
from units_api.http.json import load_stored
from units_api.website import jsonld, repository, service
from units_api.website.cache import Made, Page
from units_api.website.service import Site
from units_api.website.words import WORDS

router = APIRouter(include_in_schema=False)
# The pages, served without the framework's per-request layers (http/direct.py): a kept page
# or a 304 is then little more than a version read.
DIRECT_OPERATIONS = (
    "websiteListingsEn",
    "websiteListingsAr",
    "websiteListingEn",
    "websiteListingEnSlug",
    "websiteListingAr",
    "websiteListingArSlug",
)
templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)
CACHE_CONTROL = "public, max-age=60, stale-while-revalidate=600"
SECURITY = {
    # connect-src 'self': what reads a page as crawlers do (Lighthouse) fetches /robots.txt.
    "Content-Security-Policy": "default-src 'none'; img-src https: http: data:; "
    "connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
}
MAX_SLUG = 300


@cache
def _template(name: str) -> Template:
    return templates.get_template(name)


def _other(language: str) -> str:
    return "en" if language == "ar" else "ar"


async def _site(context: AppContext, request: Request, language: str) -> Site:
    names = await context.names.current()
    return Site(language, public_base(request), names, context.settings.default_currency)


def _html(
    template: str, status: int, language: str, values: dict[str, Any], headers: dict[str, str]
) -> Response:
    body = _template(template).render(language=language, t=WORDS[language], **values)
    return Response(
        body,
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers={**SECURITY, "Content-Language": language, **headers},
    )


def _message(
    request: Request, language: str, status: int, heading: str, text: str, **headers: str
) -> Response:
    base = public_base(request)
    values = {
        "title": WORDS[language][heading],
        "description": WORDS[language][text],
        "heading": WORDS[language][heading],
        "text": WORDS[language][text],
        "home": links.listings_url(base, language),
        "other_url": links.listings_url(base, _other(language)),
        "other_language": _other(language),
        "canonical": None,
    }
    cache_control = {"Cache-Control": "public, max-age=60"} if status in (404, 410) else {}
    return _html("message.html", status, language, values, {**cache_control, **headers})


async def _limited(request: Request, language: str) -> Response | None:
    """The per-address limit of the public pages: an HTML 429 once it is passed."""
    decision = await public_limit(request)
    if decision.allowed:
        return None
    retry = str(decision.reset)
    return _message(request, language, 429, "too_many", "too_many_text", **{"Retry-After": retry})


def _modified(text: str | None) -> datetime | None:
    return parse_time(text) if text else None


def _cached(tag: str, modified: datetime | None) -> dict[str, str]:
    headers = {"ETag": tag, "Cache-Control": CACHE_CONTROL, "Vary": "Accept-Encoding"}
    if modified:
        headers["Last-Modified"] = http_date(modified)
    return headers


def _current(request: Request, tag: str, modified: datetime | None) -> bool:
    """Whether the client's copy is current (a page without a time: by its tag alone)."""
    if modified is None:
        wanted = request.headers.get("if-none-match")
        return wanted is not None and matches_tag(wanted, tag)
    return not_modified(request.headers, tag, modified)


def _live(body: str, tag: str, updated_at: str | None) -> Page:
    """A live page to keep, with the caching headers every answer of it carries."""
    modified = _modified(updated_at)
    return Page("live", body.encode(), tag, modified, _cached(tag, modified))


def _served(request: Request, language: str, page: Page) -> Response:
    """A kept page, or a 304 when the client's copy is current."""
    headers = page.headers
    if _current(request, page.tag, page.modified):
        return Response(status_code=304, headers=headers)
    return Response(
        page.body,
        media_type="text/html; charset=utf-8",
        headers={**SECURITY, "Content-Language": language, **headers},
    )


async def _unit_page(request: Request, language: str, raw_id: str, slug: str = "") -> Response:
    if refused := await _limited(request, language):
        return refused
    try:
        unit_id = uuid.UUID(raw_id)
    except ValueError:
        return _message(request, language, 404, "not_found", "not_found_text")
    if len(slug) > MAX_SLUG:
        return _message(request, language, 404, "not_found", "not_found_text")
    context = app_context(request)
    websites = await context.channels.of_kind(WEBSITE)
    site = await _site(context, request, language)
    page = None
    async with context.db.fast_read() as conn:
        # The version first: a page kept for it needs nothing more read.
        version = await service.read_version(conn, unit_id)
        keep = (language, site.base, tuple(c.name for c in websites), site.names.stamp)
        if version is not None:
            page = context.pages.get((unit_id, version, *keep))
        stored = None if version is None or page else await service.read_stored(conn, unit_id)
    if version is None or (page is None and stored is None):
        async with context.db.read() as conn:
            was = await repository.deleted_unit(conn, unit_id)
        if was is not None and was["publishing"]["publishedAt"]:
            return _message(request, language, 410, "gone", "gone_text")
        return _message(request, language, 404, "not_found", "not_found_text")
    if page is None:
        assert stored is not None
        doc, version = stored
        page = _render_unit(site, load_stored(doc), websites)
        context.pages.put((unit_id, version, *keep), page)
    if page.standing == "never":
        return _message(request, language, 404, "not_found", "not_found_text")
    if page.standing == "gone":
        return _message(request, language, 410, "gone", "gone_text")
    return _served(request, language, page)


def _render_unit(site: Site, unit: dict[str, Any], websites: list[Channel]) -> Page:
    """A unit's page as the cache keeps it: its standing, and when live its HTML and tags."""
    found = service.standing(unit, websites)
    if found != "live":
        return Page(found, b"", "", None)
    language = site.language
    seed = f"{unit['id']}:{unit['version']}:{language}:{site.base}"
    tag = '"' + hashlib.blake2b(seed.encode(), digest_size=12).hexdigest() + '"'
    page = site.page(unit)
    description = (page["short"] or page["description"] or "")[:155] or " · ".join(
        part for part in (page["price"], page["type"], page["city"]) if part
    )
    body = _template("listing.html").render(
        language=language,
        t=WORDS[language],
        title=f"{page['name']} · {page['city']}",
        description=description,
        canonical=page["url"],
        alternates=page["urls"],
        home=links.listings_url(site.base, language),
        other_url=page["urls"][_other(language)],
        other_language=_other(language),
        unit=page,
        jsonld=jsonld.script_text(jsonld.listing(unit, page)),
    )
    return _live(body, tag, unit["updatedAt"])


async def _listings(request: Request, language: str) -> Response:
    if refused := await _limited(request, language):
        return refused
    try:
        search = service.parse_search(dict(request.query_params))
    except service.BadSearch as bad:
        response = _message(request, language, 400, "bad_request", "bad_request_text")
        response.headers["X-Problem"] = str(bad)
        return response
    context = app_context(request)
    websites = await context.channels.of_kind(WEBSITE)
    site = await _site(context, request, language)
    # A page kept for the units' change version now needs nothing more read.
    keep = ("listings", language, site.base, search.signature(), *(c.name for c in websites))
    async with context.db.fast_read() as conn:
        version = await service.read_change_version(conn)

    async def make() -> Made:
        found = await service.find(context, search, websites, site.names)
        if search.page > max(1, -(-found.total // service.PAGE_SIZE)):
            return None, None
        # Kept by the version the units were read at (a replica may be a little behind).
        kept_as = None if found.version is None else (*keep, site.names.stamp, found.version)
        return _render_listings(site, search, found), kept_as

    page = await context.pages.made((*keep, site.names.stamp, version), make)
    if page is None:
        return _message(request, language, 404, "not_found", "not_found_text")
    return _served(request, language, page)


def _render_listings(site: Site, search: service.Search, found: service.Found) -> Page:
    """A page of the listings as the cache keeps it: its HTML and tags."""
    language = site.language
    pages = max(1, -(-found.total // service.PAGE_SIZE))
    home = links.listings_url(site.base, language)
    query = search.query()

    def page_url(number: int) -> str:
        wanted = {**query, **({"page": str(number)} if number > 1 else {})}
        return home + ("?" + urlencode(wanted) if wanted else "")

    canonical = page_url(search.page)
    values = {
        "title": WORDS[language]["listings"],
        "description": WORDS[language]["listings_description"],
        "canonical": canonical,
        "alternates": {
            code: links.listings_url(site.base, code)
            + (canonical[len(home) :] if canonical.startswith(home) else "")
            for code in links.LANGUAGES
        },
        "home": home,
        "other_url": links.listings_url(site.base, _other(language)) + canonical[len(home) :],
        "other_language": _other(language),
        "search": search,
        "cards": [site.card(unit) for unit in found.units],
        "total": found.total,
        "pages": pages,
        "previous_url": page_url(search.page - 1) if search.page > 1 else None,
        "next_url": page_url(search.page + 1) if search.page < pages else None,
        "cities": [
            (value, name.in_language(language)) for value, name in site.names.choices("city")
        ],
        "types": [
            (value, name.in_language(language)) for value, name in site.names.choices("type")
        ],
    }
    body = _template("listings.html").render(language=language, t=WORDS[language], **values)
    tag = '"' + hashlib.blake2b(body.encode(), digest_size=12).hexdigest() + '"'
    latest = max((unit["updatedAt"] for unit in found.units), default=None)
    return _live(body, tag, latest)


@router.get("/listings", operation_id="websiteListingsEn")
async def listings_en(request: Request) -> Response:
    return await _listings(request, "en")


@router.get("/ar/listings", operation_id="websiteListingsAr")
async def listings_ar(request: Request) -> Response:
    return await _listings(request, "ar")


@router.get("/listings/{unit_id}", operation_id="websiteListingEn")
async def listing_en(request: Request, unit_id: str) -> Response:
    return await _unit_page(request, "en", unit_id)


@router.get("/listings/{unit_id}/{slug:text}", operation_id="websiteListingEnSlug")
async def listing_en_slug(request: Request, unit_id: str, slug: str) -> Response:
    return await _unit_page(request, "en", unit_id, slug)


@router.get("/ar/listings/{unit_id}", operation_id="websiteListingAr")
async def listing_ar(request: Request, unit_id: str) -> Response:
    return await _unit_page(request, "ar", unit_id)


@router.get("/ar/listings/{unit_id}/{slug:text}", operation_id="websiteListingArSlug")
async def listing_ar_slug(request: Request, unit_id: str, slug: str) -> Response:
    return await _unit_page(request, "ar", unit_id, slug)


def error_page(path: str, status: int) -> tuple[bytes, str] | None:
    """The HTML page a public path answers an error with before it is routed (a URL too long),
    in the path's language; None for any other path."""
    if path.startswith("/ar/listings"):
        language = "ar"
    elif path.startswith("/listings"):
        language = "en"
    else:
        return None
    words = WORDS[language]
    heading, text = (
        ("not_found", "not_found_text") if status == 404 else ("bad_request", "too_long")
    )
    body = _template("message.html").render(
        language=language,
        t=words,
        title=words[heading],
        description=words[text],
        heading=words[heading],
        text=words[text],
        home=links.LISTINGS[language],
        other_url=links.LISTINGS[_other(language)],
        other_language=_other(language),
        canonical=None,
    )
    return body.encode(), "text/html; charset=utf-8"
