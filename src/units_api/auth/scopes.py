"""Scopes a key can hold. `admin` implies every other."""

from __future__ import annotations

UNITS_READ = "units:read"
UNITS_WRITE = "units:write"
UNITS_PUBLISH = "units:publish"
UNITS_EXPORT = "units:export"
EVENTS_READ = "events:read"
ADMIN = "admin"

ALL_SCOPES = (UNITS_READ, UNITS_WRITE, UNITS_PUBLISH, UNITS_EXPORT, EVENTS_READ, ADMIN)


def grants(held: frozenset[str], needed: str) -> bool:
    return ADMIN in held or needed in held
