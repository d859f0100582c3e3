"""The home-listings feed of a meta-catalog channel (section 17): who may read it, whether
the reader's copy is current, and the file itself, streamed in batches."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import orjson
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.channels import service as channels
from units_api.channels.readiness import META_CATALOG, SOLD_KEPT
from units_api.db import Database
from units_api.errors import Unauthorized
from units_api.feeds import repository
from units_api.feeds.listings import Channel, decode, forbids_nothing, listing
from units_api.feeds.render import Format
from units_api.http.compression import GzipStream

log = logging.getLogger(__name__)

REALM = "feeds"
CHALLENGE = f'Basic realm="{REALM}", charset="UTF-8"'
# Units read at a time: each batch is a short read of its own (a few MB of documents).
BATCH = 2000
# Part of every feed's entity-tag: bumped when what a feed writes for the same data changes.
RENDERING = 1


def _refused() -> Unauthorized:
    # The same answer whatever was wrong: no credentials, another user, a wrong token, a
    # channel that is no meta-catalog or does not exist.
    return Unauthorized(
        "This feed needs HTTP Basic credentials: the channel's name and its feed token.",
        challenge=CHALLENGE,
    )


def credentials(header: str | None) -> tuple[str, str]:
    """The user and password of an `Authorization: Basic` header; a 401 for anything else."""
    scheme, _, encoded = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        raise _refused()
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise _refused() from None
    user, colon, password = decoded.partition(":")
    if not colon:
        raise _refused()
    return user, password


async def channel_for(conn: AsyncConnection, name: str, header: str | None) -> RowMapping:
    """The meta-catalog channel `name`, if the request's credentials are its own; else 401."""
    user, token = credentials(header)
    row = await channels.feed_channel(conn, name, token) if user == name else None
    if row is None:
        raise _refused()
    assert row["kind"] == META_CATALOG
    return row


@dataclass(frozen=True)
class Validators:
    etag: str
    last_modified: datetime


async def validators(
    conn: AsyncConnection, channel: RowMapping, extension: str, listed: Channel, gzip: bool
) -> Validators:
    """The feed's entity-tag and modification time, from a few cheap reads: any write to the
    units, a change to the channel, and a sold unit leaving after SOLD_KEPT each change the
    tag (so a 304 never hides a change; a write to a unit on no feed also changes it)."""
    found = await repository.changes(conn, listed.now - SOLD_KEPT)
    parts: list[Any] = [
        RENDERING,
        extension,
        found.version,
        channel["name"],
        channel["settings"],
        channel["updated_at"].isoformat(),
        listed.base,
        listed.default_currency,
        found.next_leaving.isoformat() if found.next_leaving else None,
    ]
    digest = hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]
    times = [channel["updated_at"], found.written]
    if found.last_left is not None:
        times.append(found.last_left + SOLD_KEPT)
    modified = max(time for time in times if time is not None)
    return Validators(f'"{digest}-gzip"' if gzip else f'"{digest}"', modified)


Rows = list[tuple[uuid.UUID, bytes]]


def _listings(rows: Rows, listed: Channel) -> Iterator[dict[str, Any]]:
    for unit_id, doc in rows:
        try:
            unit = decode(doc)
        except msgspec.DecodeError:
            # Never a unit the service wrote; one stored by other means is left out, and the
            # rest of the feed still goes out.
            log.warning("a stored unit is not one a feed can read", extra={"unitId": str(unit_id)})
            continue
        if (found := listing(unit, listed, not forbids_nothing(doc))) is not None:
            yield found


def _piece(rows: Rows, listed: Channel, form: Format) -> str:
    return form.listings(_listings(rows, listed))


def _encoded(text: str, gzip: GzipStream | None) -> bytes:
    data = text.encode()
    return gzip.add(data) if gzip is not None else data


async def stream(
    db: Database, listed: Channel, form: Format, gzip: GzipStream | None
) -> AsyncIterator[bytes]:
    """The feed's file in pieces: every unit live on the channel, by id, BATCH units at a
    time, each batch read on a short connection of its own while the one before is written
    (in a thread: the event loop keeps serving other requests, and deflate runs beside it)."""
    # The units the columns show live on it; each record then adds what columns cannot say
    # (`listings.listing`: a sale's 30 days).
    condition = channels.live_condition(META_CATALOG, (listed.name,), db.dialect)

    async def fetch(after: uuid.UUID | None) -> tuple[Rows, uuid.UUID | None]:
        async with db.read() as conn:
            upto = await repository.span_end(conn, after, BATCH)
            return await repository.batch(conn, condition, after, upto), upto

    def write(rows: Rows) -> bytes:
        return _encoded(_piece(rows, listed, form), gzip)

    yield _encoded(form.head(), gzip)
    rows, upto = await fetch(None)
    ahead: asyncio.Task[tuple[Rows, uuid.UUID | None]] | None = None
    try:
        while True:
            if upto is not None:
                ahead = asyncio.create_task(fetch(upto))
            if rows and (piece := await asyncio.to_thread(write, rows)):
                yield piece
            if ahead is None:
                break
            rows, upto = await ahead
            ahead = None
    finally:
        if ahead is not None:
            ahead.cancel()
    tail = _encoded(form.tail(), gzip)
    yield tail + gzip.finish() if gzip is not None else tail
