"""Conditional GETs of a representation that has an entity-tag and a modification time
(RFC 9110 section 13): If-None-Match first, If-Modified-Since only without it."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime

from starlette.datastructures import Headers

from units_api.http.etag import matches_tag


def http_date(value: datetime) -> str:
    """An IMF-fixdate (`Sat, 28 Nov 2026 15:30:00 GMT`), to the second."""
    return format_datetime(value.astimezone(UTC).replace(microsecond=0), usegmt=True)


def _parse_date(text: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def not_modified(headers: Headers, etag: str, last_modified: datetime) -> bool:
    """Whether the client's copy is current: If-None-Match names `etag` (or `*`; compared
    weakly), or, without If-None-Match, the representation is no newer than If-Modified-Since
    (to the second, the header's resolution). A date that cannot be read is ignored."""
    if (matching := headers.get("if-none-match")) is not None:
        return matches_tag(matching, etag)
    since = headers.get("if-modified-since")
    if since is None or (date := _parse_date(since)) is None:
        return False
    return last_modified.replace(microsecond=0) <= date
