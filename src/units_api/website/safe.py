"""What a public page may carry of a unit's URLs: http(s) only."""

from __future__ import annotations

from urllib.parse import urlsplit


def http_url(value: object) -> str | None:
    """`value` if it is an absolute http(s) URL, else None (never a `javascript:` link)."""
    if not isinstance(value, str):
        return None
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return value.strip()
