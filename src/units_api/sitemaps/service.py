"""What search engines read: robots.txt and the sitemaps (sitemaps.org 0.9).

`/sitemap.xml` is an index of sitemap files. Each file holds the pages of at most
`units_per_file` published units in id order (two URLs a unit, one per language: at most
50,000 URLs and 50 MB), of which those live on a website channel are written. A file is named
by where it starts, `/sitemaps/listings-start.xml` and then
`/sitemaps/listings-after-<id>.xml` (the units after that id), so its URL stays meaningful
while units come and go; the index finds where each file starts by walking the published units'
index, without reading a unit. Everything is streamed, a batch of units at a time, each batch
read on a connection of its own: memory stays the same whatever the number of units.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from sqlalchemy import ColumnElement, false
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.channels import links
from units_api.channels import repository as channels
from units_api.channels.readiness import WEBSITE
from units_api.channels.service import live_condition
from units_api.db import Database
from units_api.errors import NotFound
from units_api.sitemaps import repository

SITEMAP_NAMESPACE: Final = "http://www.sitemaps.org/schemas/sitemap/0.9"
XHTML_NAMESPACE: Final = "http://www.w3.org/1999/xhtml"
# What one sitemap file may hold (sitemaps.org): URLs, and bytes before compression.
MAX_URLS: Final = 50_000
MAX_FILE_BYTES: Final = 50 * 1024 * 1024
# Units a file holds at most: a unit has a page in each language.
UNITS_PER_FILE = MAX_URLS // len(links.LANGUAGES)
# Units read and written at a time.
BATCH = 2_000
# Bumped when what the sitemaps write changes, so an entity tag of older output is not met.
FORMAT = 1

INDEX_PATH: Final = "/sitemap.xml"
FILES: Final = "/sitemaps/"
FIRST_FILE: Final = "listings-start.xml"
FILE_AFTER: Final = "listings-after-"

_XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
_URLSET_OPEN = (
    f'{_XML_DECLARATION}<urlset xmlns="{SITEMAP_NAMESPACE}" xmlns:xhtml="{XHTML_NAMESPACE}">\n'
)
_URLSET_CLOSE = "</urlset>\n"
_INDEX_OPEN = f'{_XML_DECLARATION}<sitemapindex xmlns="{SITEMAP_NAMESPACE}">\n'
_INDEX_CLOSE = "</sitemapindex>\n"
_ATTRIBUTE = {'"': "&quot;", "'": "&apos;"}


def xml_text(value: str) -> str:
    """Text made safe for XML content and attribute values."""
    return escape(value, _ATTRIBUTE)


def robots(base: str) -> str:
    """robots.txt: the public pages allowed, the API and the console not, and the sitemap."""
    prefix = urlsplit(base).path
    lines = [
        "User-agent: *",
        *(f"Allow: {prefix}{path}" for path in links.LISTINGS.values()),
        f"Disallow: {prefix}/api/",
        f"Disallow: {prefix}/console/",
        "",
        f"Sitemap: {base}{INDEX_PATH}",
    ]
    return "\n".join(lines) + "\n"


def _unit_entry(base: str, unit_id: str, changed: str) -> str:
    """Both pages of a unit, each with the alternates of both languages (itself included)
    and `x-default`, the English page. `base` is already XML text."""
    english = links.page_url(base, unit_id, "en")
    arabic = links.page_url(base, unit_id, "ar")
    alternates = (
        f'<xhtml:link rel="alternate" hreflang="en" href="{english}"/>'
        f'<xhtml:link rel="alternate" hreflang="ar" href="{arabic}"/>'
        f'<xhtml:link rel="alternate" hreflang="x-default" href="{english}"/>'
    )
    return (
        f"<url><loc>{english}</loc><lastmod>{changed}</lastmod>{alternates}</url>\n"
        f"<url><loc>{arabic}</loc><lastmod>{changed}</lastmod>{alternates}</url>\n"
    )


# The longest time `format_time` writes, for a file's size bound.
_LONGEST_TIME = "2026-11-28T00:00:00.000Z"
_LONGEST_ID = str(uuid.UUID(int=0))


def units_per_file(base: str) -> int:
    """How many units a file may hold on `base` (XML text): UNITS_PER_FILE, fewer if a long
    base would take a full file past MAX_FILE_BYTES."""
    entry = len(_unit_entry(base, _LONGEST_ID, _LONGEST_TIME).encode())
    room = MAX_FILE_BYTES - len(_URLSET_OPEN) - len(_URLSET_CLOSE)
    return max(1, min(UNITS_PER_FILE, room // entry))


@dataclass(frozen=True, slots=True)
class Plan:
    """What a sitemap is made from, read once per request."""

    base: str  # XML text
    live: ColumnElement[bool]  # live on a website channel
    per_file: int
    version: str  # what the output depends on, for its entity tag

    def tag(self, *parts: str) -> str:
        digest = hashlib.sha256("\n".join((self.version, *parts)).encode()).hexdigest()
        return f'W/"{digest[:40]}"'


def _live(names: Sequence[str], dialect: str) -> ColumnElement[bool]:
    if not names:
        return false()
    return live_condition(WEBSITE, tuple(names), dialect)


async def plan(conn: AsyncConnection, base: str) -> Plan:
    """The website channels and the units' change version now: the output depends on
    nothing else but the base URL."""
    kinds = await channels.kinds(conn)
    names = sorted(name for name, kind in kinds.items() if kind == WEBSITE)
    version = await repository.change_version(conn)
    base_text = xml_text(base)
    per_file = units_per_file(base_text)
    signature = "\n".join([str(FORMAT), str(version), base, str(per_file), *names])
    return Plan(base_text, _live(names, conn.dialect.name), per_file, signature)


def file_url(base: str, after: uuid.UUID | None) -> str:
    name = FIRST_FILE if after is None else f"{FILE_AFTER}{after}.xml"
    return f"{base}{FILES}{name}"


def file_start(name: str) -> uuid.UUID | None:
    """Where the file `name` starts (None: the first); NotFound if it is no file's name."""
    if name == FIRST_FILE:
        return None
    raw = name.removeprefix(FILE_AFTER).removesuffix(".xml")
    try:
        after = uuid.UUID(raw)
    except ValueError:
        after = None
    if after is None or name != f"{FILE_AFTER}{after}.xml":  # one URL per file
        raise NotFound(f"No sitemap file is named {name!r}.")
    return after


async def check_file(conn: AsyncConnection, after: uuid.UUID | None) -> None:
    """The first file always exists; another while a published unit comes after its start."""
    if after is not None and not await repository.any_published_after(conn, after):
        raise NotFound(f"This sitemap file no longer exists; read {INDEX_PATH}.")


async def index_body(db: Database, plan: Plan) -> AsyncIterator[bytes]:
    """The sitemap index, one file's entry at a time."""
    yield (_INDEX_OPEN + _index_entry(plan, None)).encode()
    after: uuid.UUID | None = None
    while True:
        async with db.read() as conn:
            after, more = await repository.boundary(conn, after, plan.per_file)
        if after is None or not more:
            break
        yield _index_entry(plan, after).encode()
    yield _INDEX_CLOSE.encode()


def _index_entry(plan: Plan, after: uuid.UUID | None) -> str:
    return f"<sitemap><loc>{file_url(plan.base, after)}</loc></sitemap>\n"


async def file_body(db: Database, plan: Plan, after: uuid.UUID | None) -> AsyncIterator[bytes]:
    """One sitemap file: the live units among the `plan.per_file` published units after
    `after`, a batch at a time."""
    yield _URLSET_OPEN.encode()
    async with db.read() as conn:
        upto, _ = await repository.boundary(conn, after, plan.per_file)
    cursor = after
    while True:
        async with db.read() as conn:
            found = await repository.published_page(conn, plan.live, cursor, upto, BATCH)
        entries = _entries(plan.base, found)
        if entries:
            yield entries
        if len(found) < BATCH:
            break
        cursor = found[-1][0]
    yield _URLSET_CLOSE.encode()


def _entries(base: str, found: Sequence[tuple[uuid.UUID, str, bool]]) -> bytes:
    return "".join(
        _unit_entry(base, str(unit_id), changed) for unit_id, changed, live in found if live
    ).encode()
