"""Display names: the rules of the admin API (built-in names under stored ones, a cap on what
is stored), and the map every page reads (`Names`), kept per process by `NameCache`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, utcnow
from units_api.db import Database
from units_api.errors import Conflict, NotFound, ValidationFailed
from units_api.filters.parser import quote
from units_api.names import repository
from units_api.names.builtin import BUILT_IN
from units_api.names.schemas import DisplayNameWrite, NameKey
from units_api.names.values import FIELDS, Name, normalize
from units_api.search.normalize import normalize as search_text
from units_api.validation import parse_model

MAX_STORED = 2000  # stored entries; the list answers them all at once
CACHE_SECONDS = 5.0  # how long a process reads its copy before reading the table again

Key = tuple[str, str]


def key_of(field: str, value: str) -> Key:
    """The field and normalised value of a path, or a 422 naming `field` or `value`."""
    key = parse_model(NameKey, {"field": field, "value": value})
    return key.field, normalize(key.value)


def parse_put(field: str, value: str, body: Any) -> tuple[Key, DisplayNameWrite]:
    """The path and the body of a PUT, every error of both in one 422."""
    errors: list[tuple[str, str]] = []
    key: Key | None = None
    names: DisplayNameWrite | None = None
    try:
        key = key_of(field, value)
    except ValidationFailed as failed:
        errors += [(error["field"], error["message"]) for error in failed.errors]
    try:
        names = parse_model(DisplayNameWrite, body)
    except ValidationFailed as failed:
        errors += [(error["field"], error["message"]) for error in failed.errors]
    if errors or key is None or names is None:
        raise ValidationFailed(errors)
    return key, names


def render(field: str, value: str, row: RowMapping | None) -> dict[str, Any]:
    built_in = BUILT_IN.get(field, {}).get(value)
    shown = Name(row["en"], row["ar"]) if row is not None else built_in
    assert shown is not None
    return {
        "field": field,
        "value": value,
        "en": shown.en,
        "ar": shown.ar,
        "builtIn": row is None,
        "builtInNames": None if built_in is None else {"en": built_in.en, "ar": built_in.ar},
        "updatedAt": None if row is None else format_time(row["updated_at"]),
    }


async def list_entries(conn: AsyncConnection, field: str | None) -> list[dict[str, Any]]:
    """Every entry (of `field`, if given), stored or built-in, by field and value."""
    stored = {(row["field"], row["value"]): row for row in await repository.every(conn, field)}
    keys = set(stored) | {
        (name, value)
        for name, values in BUILT_IN.items()
        if field in (None, name)
        for value in values
    }
    return [render(name, value, stored.get((name, value))) for name, value in sorted(keys)]


async def get_entry(conn: AsyncConnection, key: Key) -> dict[str, Any]:
    row = await repository.one(conn, *key)
    if row is None and key[1] not in BUILT_IN.get(key[0], {}):
        raise NotFound(f"{key[0]} '{key[1]}' has no display names.")
    return render(*key, row)


async def put(
    conn: AsyncConnection, key: Key, names: DisplayNameWrite
) -> tuple[dict[str, Any], bool]:
    """Creates or replaces the entry; answers it and whether it was created."""
    created = await repository.one(conn, *key) is None
    if created and await repository.count(conn) >= MAX_STORED:
        raise Conflict(
            f"At most {MAX_STORED:,} display names are stored; delete one before adding another."
        )
    row = await repository.put(conn, *key, names.en, names.ar, utcnow())
    return render(*key, row), created


async def delete(conn: AsyncConnection, key: Key) -> None:
    if not await repository.remove(conn, *key):
        kept = " (its built-in names stay)" if key[1] in BUILT_IN.get(key[0], {}) else ""
        raise NotFound(f"{key[0]} '{key[1]}' has no stored display names{kept}.")


class Names:
    """The display names in force at one moment: stored ones over the built-in ones."""

    def __init__(self, stored: Mapping[Key, Name]) -> None:
        self._stored = stored
        # The same for the same names, whenever read: what a page made with them is kept by.
        self.stamp = hash(frozenset((key, (name.en, name.ar)) for key, name in stored.items()))

    @classmethod
    def of(cls, rows: Iterable[RowMapping]) -> Names:
        return cls({(row["field"], row["value"]): Name(row["en"], row["ar"]) for row in rows})

    def name(self, field: str, value: str) -> Name | None:
        key = normalize(value)
        return self._stored.get((field, key)) or BUILT_IN.get(field, {}).get(key)

    def display(self, field: str, value: object, language: str) -> str:
        """`value`'s name in `language` ("en" or "ar"), or the value itself when it has none."""
        if value is None:
            return ""
        text = value if isinstance(value, str) else str(value)
        found = self.name(field, text) if field in FIELDS else None
        return text if found is None else found.in_language(language)

    def choices(self, field: str) -> list[tuple[str, Name]]:
        """Every value of `field` that has names, by value."""
        values = set(BUILT_IN.get(field, {})) | {v for f, v in self._stored if f == field}
        return [(value, found) for value in sorted(values) if (found := self.name(field, value))]

    def named_filter(self, field: str, text: str) -> str:
        """A filter term: `field` is `text`, or a value whose English or Arabic name `text`
        is (so a city or type may be asked for by its display name in either language)."""
        same = normalize(text)
        values = [text, *(v for v in self.values_named(field, text) if v != same)]
        return f"{field}=in=(" + ",".join(quote(value) for value in values) + ")"

    def values_named(self, field: str, text: str) -> list[str]:
        """The values of `field` whose English or Arabic name is `text`, compared as search
        compares text (hamza, teh marbuta, alef maksura and marks aside)."""
        wanted = _loosely(text)
        return [
            value
            for value, found in self.choices(field)
            if wanted in (_loosely(found.en), _loosely(found.ar))
        ]


def _loosely(text: str) -> str:
    return " ".join(search_text(text).split())


BUILT_IN_ONLY = Names({})


class NameCache:
    """This process's copy of the stored names: read again when older than `seconds`, and
    after a write in this process (`forget`); another process's write shows within `seconds`."""

    def __init__(self, db: Database, seconds: float = CACHE_SECONDS) -> None:
        self._db = db
        self._seconds = seconds
        self._names: Names | None = None
        self._until = 0.0
        self._generation = 0
        self._lock = asyncio.Lock()

    async def current(self) -> Names:
        if self._names is not None and time.monotonic() < self._until:
            return self._names
        async with self._lock:
            if self._names is not None and time.monotonic() < self._until:
                return self._names
            generation = self._generation
            async with self._db.read() as conn:
                names = Names.of(await repository.every(conn))
            if generation == self._generation:  # no write here while it was read
                self._names, self._until = names, time.monotonic() + self._seconds
            return names

    def forget(self) -> None:
        self._names = None
        self._generation += 1
