"""IndexNow: every website page that appears, changes or goes away is sent to the endpoint
(UNITS_API_INDEXNOW_ENDPOINT), following the change feed from a position kept in the database
(`indexnow_state`), so nothing is lost across restarts and nothing is sent twice but for a
request whose answer was lost.

A unit's pages (both languages) are sent when the unit is live on a website channel before
or after an event (published, edited, unpublished, blocked, deleted, taken off the channel:
a deletion's event carries the unit as it was, an update's `changes` what it was before).
Which channels are websites is followed through the feed too (`channel.*` events), as of
each event, so a unit taken off a channel being deleted is judged on that channel. A channel
that becomes a website, or stops being one, has the pages of each unit on it sent, a page
of units at a time.

Changes wait COLLECT_SECONDS for others to join them, then go in requests of at most
URLS_PER_REQUEST URLs; the position moves only once the endpoint has answered 200 or 202
(any 2xx). A failure (another answer, no answer within TIMEOUT) is tried again after a pause
that doubles, from RETRY up to `loop.BACKOFF_LIMIT`. One process at a time holds the row
(a lease of LEASE, renewed as it works); another takes it over when the lease ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import orjson
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api import __version__, loop, metrics
from units_api.channels import links
from units_api.channels import repository as channels
from units_api.channels.readiness import WEBSITE, live
from units_api.channels.service import live_condition
from units_api.clock import utcnow
from units_api.db import Database
from units_api.events import repository as feed
from units_api.events.sequencer import sequence
from units_api.events.service import unit_before
from units_api.http.json import load_stored
from units_api.sitemaps import repository

log = logging.getLogger(__name__)

URLS_PER_REQUEST: Final = 10_000
# Units whose pages one request of a channel's walk sends.
WALK_PAGE: Final = URLS_PER_REQUEST // len(links.LANGUAGES)
COLLECT_SECONDS = 3.0
POLL_SECONDS = 1.0
RETRY = 1.0
TIMEOUT = 15.0
LEASE = timedelta(seconds=30)
# Events read at a time, and at most in a step.
EVENTS_PAGE = 1_000
EVENTS_A_STEP = 20_000
USER_AGENT = f"units-api-indexnow/{__version__}"


@dataclass(frozen=True, slots=True)
class Target:
    """Where pages are sent, and what is sent with them."""

    base: str  # the public base URL the pages are on
    key: str
    endpoint: str

    @property
    def host(self) -> str:
        return urlsplit(self.base).netloc.rpartition("@")[2]

    @property
    def key_location(self) -> str:
        return f"{self.base}/{self.key}.txt"

    def body(self, urls: Sequence[str]) -> bytes:
        return orjson.dumps(
            {
                "host": self.host,
                "key": self.key,
                "keyLocation": self.key_location,
                "urlList": list(urls),
            }
        )

    def pages(self, unit_ids: Iterable[object]) -> list[str]:
        return [
            links.page_url(self.base, unit, lang) for unit in unit_ids for lang in links.LANGUAGES
        ]


def live_on_any(unit: Mapping[str, Any], websites: Iterable[str]) -> bool:
    now = utcnow()
    return any(live(WEBSITE, name, unit, now) for name in websites)


def unit_changed_pages(data: str, websites: Iterable[str]) -> bool:
    """Whether a unit event changes its pages: live on one of `websites` after it, or before
    it (an update's `changes`; a deletion carries the unit as it was)."""
    stored = load_stored(data)
    unit: dict[str, Any] = stored["unit"]
    if live_on_any(unit, websites):
        return True
    changes = stored.get("changes")
    return bool(changes) and live_on_any(unit_before(unit, changes), websites)


@dataclass(slots=True)
class Batch:
    """What one request sends, and where the feed stands once it is received."""

    unit_ids: dict[str, None] = field(default_factory=dict)
    pos: int = 0
    websites: set[str] = field(default_factory=set)
    walk: str | None = None  # a channel whose units are to be walked at `pos + 1`
    read: int = 0  # events read

    @property
    def full(self) -> bool:
        return len(self.unit_ids) >= WALK_PAGE


def collect(rows: Sequence[Any], batch: Batch) -> bool:
    """Add the pages `rows` (events after `batch.pos`, in feed order) change; False once the
    batch can take no more (full, or a channel's walk must come first)."""
    for row in rows:
        if row.type.startswith("channel."):
            channel = load_stored(row.data)
            name = channel["name"]
            website = row.type != "channel.deleted" and channel["kind"] == WEBSITE
            if row.type == "channel.updated" and website != (name in batch.websites):
                batch.walk = name
                return False
            if website:
                batch.websites.add(name)
            else:
                batch.websites.discard(name)
        elif row.unit_id is not None and unit_changed_pages(row.data, batch.websites):
            if batch.full:
                return False
            batch.unit_ids[str(row.unit_id)] = None
        batch.pos = row.pos
    return True


class Submitter:
    """The IndexNow loop's steps, in one process."""

    def __init__(self, db: Database, target: Target) -> None:
        self.db = db
        self.target = target
        self.owner = uuid.uuid4()
        self.failures = 0
        self.pending_since: float | None = None  # when changes were first seen waiting
        self.lease_until: datetime | None = None
        self._session: aiohttp.ClientSession | None = None

    async def step(self) -> loop.Pause:
        held = await self._hold()
        if held is None:
            return loop.Pause(LEASE.total_seconds() / 3)
        if held["walk_channel"] is not None:
            return await self._walk(held)
        await sequence(self.db)
        batch = await self._read(held)
        if not batch.unit_ids:
            moved = batch.pos != held["pos"] or batch.walk is not None
            if moved:
                await self._save(batch)
            return loop.Pause(0 if moved or batch.read >= EVENTS_A_STEP else POLL_SECONDS)
        waited = self._waited()
        if waited < COLLECT_SECONDS and not batch.full and batch.walk is None:
            return loop.Pause(COLLECT_SECONDS - waited)
        if not await self._send(self.target.pages(batch.unit_ids)):
            return self._retry()
        await self._save(batch)
        return loop.Pause(0)

    async def _hold(self) -> RowMapping | None:
        """The row, if this process holds it: the lease is renewed once half of it is gone."""
        now = utcnow()
        if self.lease_until is not None and now < self.lease_until - LEASE / 2:
            async with self.db.read() as conn:
                current = await repository.state(conn)
            if current["owner"] == self.owner:
                return current
        async with self.db.transaction() as conn:
            held = await self._claim(conn, now)
        self.lease_until = None if held is None else now + LEASE
        return held

    async def _claim(self, conn: AsyncConnection, now: datetime) -> RowMapping | None:
        held = await repository.claim(conn, self.owner, now, now + LEASE)
        if held is not None and held["pos"] is None:
            # First run: from the feed's end (the sitemaps tell of every page already there).
            head = (await feed.positions(conn))["head"]
            kinds = await channels.kinds(conn)
            websites = sorted(name for name, kind in kinds.items() if kind == WEBSITE)
            await repository.save(conn, self.owner, pos=head, channels=_names(websites))
            held = await repository.state(conn)
        return held

    async def _read(self, held: RowMapping) -> Batch:
        batch = Batch(pos=int(held["pos"]), websites=set(orjson.loads(held["channels"])))
        async with self.db.read() as conn:
            marks = await feed.positions(conn)
            if batch.pos < marks["pruned"]:
                log.warning(
                    "IndexNow fell behind the events kept; going on from the oldest",
                    extra={"position": batch.pos, "pruned": marks["pruned"]},
                )
                batch.pos = marks["pruned"]
            while batch.read < EVENTS_A_STEP:
                rows = await feed.page(conn, batch.pos, marks["head"], EVENTS_PAGE)
                batch.read += len(rows)
                if not collect(rows, batch) or len(rows) < EVENTS_PAGE:
                    break
        return batch

    async def _walk(self, held: RowMapping) -> loop.Pause:
        """One page of the units on a channel that became, or stopped being, a website."""
        name = str(held["walk_channel"])
        condition = live_condition(WEBSITE, (name,), self.db.dialect)
        async with self.db.read() as conn:
            found = await repository.published_page(
                conn, condition, held["walked"], None, WALK_PAGE
            )
        live = [unit for unit, _, is_live in found if is_live]
        if live and not await self._send(self.target.pages(live)):
            return self._retry()
        async with self.db.transaction() as conn:
            if len(found) == WALK_PAGE:
                await repository.save(conn, self.owner, walked=found[-1][0])
                return loop.Pause(0)
            # Done: the channel's own event is passed, its kind now known as of it.
            websites = set(orjson.loads(held["channels"]))
            values: dict[str, Any] = {"walk_channel": None, "walked": None}
            pos = int(held["pos"])
            for event in await feed.page(conn, pos, (await feed.positions(conn))["head"], 1):
                channel = load_stored(event.data)
                website = event.type != "channel.deleted" and channel["kind"] == WEBSITE
                (websites.add if website else websites.discard)(name)
                values |= {"pos": event.pos, "channels": _names(websites)}
            await repository.save(conn, self.owner, **values)
        return loop.Pause(0)

    async def _save(self, batch: Batch) -> None:
        values: dict[str, Any] = {"pos": batch.pos, "channels": _names(batch.websites)}
        if batch.walk is not None:
            values |= {"walk_channel": batch.walk, "walked": None}
        async with self.db.transaction() as conn:
            if not await repository.save(conn, self.owner, **values):
                log.warning("IndexNow's lease passed to another process")
        self.pending_since = None

    def _waited(self) -> float:
        now = time.monotonic()
        if self.pending_since is None:
            self.pending_since = now
        return now - self.pending_since

    def _retry(self) -> loop.Pause:
        self.failures += 1
        return loop.Pause(loop.backoff(RETRY, self.failures))

    async def _send(self, urls: list[str]) -> bool:
        """POST the URLs; whether the endpoint took them."""
        try:
            async with self._open().post(
                self.target.endpoint,
                data=self.target.body(urls),
                headers={
                    "content-type": "application/json; charset=utf-8",
                    "user-agent": USER_AGENT,
                },
                allow_redirects=False,
            ) as response:
                status = response.status
                await response.read()
        except TimeoutError:
            return self._failed(urls, f"no answer within {TIMEOUT:g} s")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return self._failed(urls, f"{type(exc).__name__}: {exc}".strip())
        if not 200 <= status < 300:
            return self._failed(urls, f"answered {status}")
        self.failures = 0
        metrics.count_indexnow("succeeded")
        log.info("IndexNow took pages", extra={"urls": len(urls), "statusCode": status})
        return True

    def _failed(self, urls: list[str], error: str) -> bool:
        metrics.count_indexnow("failed")
        log.warning(
            "IndexNow submission failed; retrying",
            extra={"urls": len(urls), "error": error, "failures": self.failures + 1},
        )
        return False

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=TIMEOUT), trust_env=False
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        async with self.db.transaction() as conn:
            await repository.release(conn, self.owner)


def _names(websites: Iterable[str]) -> str:
    return orjson.dumps(sorted(websites)).decode()


async def run_forever(db: Database, target: Target, stop: asyncio.Event) -> None:
    """Until `stop`: send what changed, as `loop.run` steps; the row is let go at the end."""
    submitter = Submitter(db, target)
    try:
        await loop.run("indexnow", submitter.step, stop, RETRY)
    finally:
        try:
            await submitter.close()
        except Exception:
            log.warning("IndexNow could not let go of its row; its lease will lapse")
