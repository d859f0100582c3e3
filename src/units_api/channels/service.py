"""The channel rules: names, kinds and their settings, feed tokens, deletion (which takes the
name off every unit), and a unit's standing on each of its channels."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from sqlalchemy import ColumnElement, RowMapping, delete, insert, update
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.auth.secrets import hash_secret, same_hash, visible_prefix
from units_api.channels import links, readiness, repository
from units_api.channels.readiness import META_CATALOG, NAME_PATTERN, WEBSITE
from units_api.channels.schemas import SETTINGS, TOKEN_PREFIX, ChannelPut
from units_api.channels.tables import channels
from units_api.clock import format_time, utcnow
from units_api.db import Database
from units_api.errors import Conflict, NotFound, ValidationFailed
from units_api.events.recorder import record_event
from units_api.filters.parser import parse_filter
from units_api.http.json import load_stored
from units_api.units import publishing
from units_api.units import service as units
from units_api.units.filtering import unit_condition
from units_api.units.service import Caller
from units_api.validation import pydantic_errors

_NAME = re.compile(NAME_PATTERN)
# The channel every database has.
THE_WEBSITE = "website"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _not_found(name: str) -> NotFound:
    return NotFound(f"No channel is named {name!r}.")


def render(row: RowMapping, base: str) -> dict[str, Any]:
    """A channel as the API shows it (never its feed token)."""
    feeds = None
    if row["kind"] == META_CATALOG:
        feeds = {kind: f"{base}/feeds/{row['name']}.{kind}" for kind in ("xml", "csv")}
    return {
        "name": row["name"],
        "kind": row["kind"],
        "settings": orjson.loads(row["settings"]),
        "feedUrls": feeds,
        "feedTokenPrefix": row["token_prefix"],
        "createdAt": format_time(row["created_at"]),
        "updatedAt": format_time(row["updated_at"]),
    }


def _settings(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    model: type[BaseModel] = SETTINGS[kind]
    try:
        parsed = model.model_validate(dict(given))
    except ValidationError as exc:
        errors = [
            (f"settings.{path}" if path else "settings", text)
            for path, text in pydantic_errors(exc)
        ]
        raise ValidationFailed(errors) from None
    return parsed.model_dump(exclude_none=True)


async def _record(
    conn: AsyncConnection, event_type: str, row: RowMapping, base: str, who: Caller
) -> None:
    await record_event(conn, event_type, orjson.dumps(render(row, base)), who.actor)


async def put(
    conn: AsyncConnection, name: str, spec: ChannelPut, base: str, who: Caller
) -> tuple[dict[str, Any], bool]:
    """Create or replace a channel. Answers it, with `feedToken` when a new one was made, and
    whether it was created."""
    if not _NAME.match(name):
        raise ValidationFailed([("name", "must be 1-40 of a-z, 0-9 and -")])
    settings = orjson.dumps(_settings(spec.kind, spec.settings)).decode()
    before = await repository.one(conn, name, lock=True)
    if name == THE_WEBSITE and spec.kind != WEBSITE:
        raise Conflict(f"The {THE_WEBSITE} channel is always of kind {WEBSITE}.")
    now = utcnow()
    values: dict[str, Any] = {"kind": spec.kind, "settings": settings, "updated_at": now}
    token = None
    if spec.kind == META_CATALOG and (before is None or before["token_hash"] is None):
        token = new_token()
        values |= {"token_hash": hash_secret(token), "token_prefix": visible_prefix(token)}
    elif spec.kind != META_CATALOG:
        values |= {"token_hash": None, "token_prefix": None}
    if before is None:
        await conn.execute(insert(channels).values(name=name, created_at=now, **values))
    else:
        await conn.execute(update(channels).where(channels.c.name == name).values(**values))
    row = await repository.one(conn, name)
    assert row is not None
    await _record(conn, "channel.updated" if before else "channel.created", row, base, who)
    return {**render(row, base), "feedToken": token}, before is None


async def get(conn: AsyncConnection, name: str, base: str) -> dict[str, Any]:
    row = await repository.one(conn, name)
    if row is None:
        raise _not_found(name)
    return render(row, base)


async def list_all(conn: AsyncConnection, base: str) -> dict[str, Any]:
    return {"data": [render(row, base) for row in await repository.every(conn)]}


async def delete_one(conn: AsyncConnection, name: str, base: str, who: Caller) -> int:
    """Delete a channel and take its name out of every unit; answers how many units changed."""
    row = await repository.one(conn, name, lock=True)
    if row is None:
        raise _not_found(name)
    if name == THE_WEBSITE:
        raise Conflict(f"The {THE_WEBSITE} channel cannot be deleted; unpublish units from it.")
    changed = await publishing.drop_channel(conn, name, who)
    await conn.execute(delete(channels).where(channels.c.name == name))
    await _record(conn, "channel.deleted", row, base, who)
    return changed


async def rotate_token(conn: AsyncConnection, name: str, base: str, who: Caller) -> dict[str, Any]:
    row = await repository.one(conn, name, lock=True)
    if row is None:
        raise _not_found(name)
    if row["kind"] != META_CATALOG:
        raise Conflict(
            f"Only a {META_CATALOG} channel has a feed token; {name} is a {row['kind']}."
        )
    token = new_token()
    values = {"token_hash": hash_secret(token), "token_prefix": visible_prefix(token)}
    await conn.execute(
        update(channels).where(channels.c.name == name).values(updated_at=utcnow(), **values)
    )
    rotated = await repository.one(conn, name)
    assert rotated is not None
    await _record(conn, "channel.updated", rotated, base, who)
    return {**render(rotated, base), "feedToken": token}


async def feed_channel(conn: AsyncConnection, name: str, token: str | None) -> RowMapping | None:
    """The meta-catalog channel `name` if `token` is its feed token, else None."""
    row = await repository.one(conn, name)
    if row is None or row["kind"] != META_CATALOG or row["token_hash"] is None or not token:
        return None
    return row if same_hash(hash_secret(token), row["token_hash"]) else None


def listing_url(kind: str, settings: Mapping[str, Any], base: str, unit_id: object) -> str | None:
    """Where buyers find a unit through a channel of `kind`."""
    if kind == WEBSITE:
        return links.page_url(base, unit_id)
    if kind == META_CATALOG:
        template = settings.get("urlTemplate")
        return template.replace("{id}", str(unit_id)) if template else links.page_url(base, unit_id)
    return None


async def unit_channels(
    conn: AsyncConnection, unit_id: uuid.UUID, who: Caller, base: str
) -> dict[str, Any]:
    """The unit's standing on each channel of its `publishing.channels`."""
    body, _ = await units.get(conn, unit_id, who)
    unit = load_stored(body.decode())
    known = {row["name"]: row for row in await repository.every(conn)}
    now = utcnow()
    data = []
    for name in unit["publishing"]["channels"]:
        row = known.get(name)
        if row is None:
            data.append({"channel": name, "kind": None, "live": False, "url": None, "missing": []})
            continue
        kind = row["kind"]
        settings = orjson.loads(row["settings"])
        data.append(
            {
                "channel": name,
                "kind": kind,
                "live": readiness.live(kind, name, unit, now),
                "url": listing_url(kind, settings, base, unit_id),
                "missing": readiness.missing(kind, unit),
            }
        )
    return {"data": data}


@dataclass(frozen=True, slots=True)
class Channel:
    name: str
    kind: str
    settings: dict[str, Any]
    updated_at: datetime


@lru_cache(maxsize=64)
def live_condition(kind: str, names: tuple[str, ...], dialect: str) -> ColumnElement[bool]:
    """The units live on any of the channels `names` (all of `kind`), as a condition on the
    units table (`readiness.live_filter`, which reads columns only): built once per set of
    channels."""
    return unit_condition(parse_filter(readiness.live_filter(kind, list(names))), dialect)


class ChannelCache:
    """This process's copy of the channels, for the public pages and feeds (read on every
    page otherwise): read again when older than `seconds`, or after a change in this process
    (`forget`); another process's change shows within `seconds`."""

    def __init__(self, db: Database, seconds: float = 2.0) -> None:
        self._db = db
        self._seconds = seconds
        self._channels: dict[str, Channel] | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()

    async def current(self) -> dict[str, Channel]:
        if self._channels is not None and time.monotonic() < self._until:
            return self._channels
        async with self._lock:
            if self._channels is None or time.monotonic() >= self._until:
                async with self._db.read() as conn:
                    rows = await repository.every(conn)
                self._channels = {
                    row["name"]: Channel(
                        row["name"], row["kind"], orjson.loads(row["settings"]), row["updated_at"]
                    )
                    for row in rows
                }
                self._until = time.monotonic() + self._seconds
            return self._channels

    async def of_kind(self, kind: str) -> list[Channel]:
        return [channel for channel in (await self.current()).values() if channel.kind == kind]

    def forget(self) -> None:
        self._channels = None
