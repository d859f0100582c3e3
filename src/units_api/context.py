"""What the running app holds: settings, database, and the shared per-process helpers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import Request

from units_api.channels.service import ChannelCache
from units_api.config import Settings
from units_api.db import Database
from units_api.http.ratelimit import Limiter
from units_api.jobs.storage import Storage
from units_api.names.service import NameCache
from units_api.redis_link import RedisLink
from units_api.units.counting import CountCache
from units_api.units.dashboards import Dashboards
from units_api.units.gathering import Gatherer
from units_api.units.remembering import ResultCache
from units_api.webhooks.sender import Sender
from units_api.website.cache import PageCache

if TYPE_CHECKING:
    from units_api.auth.service import Authenticator
    from units_api.console.sessions import Sessions
    from units_api.http.idempotency import Idempotency


@dataclass(slots=True)
class AppContext:
    settings: Settings
    db: Database
    redis: RedisLink | None
    limiter: Limiter
    authenticator: Authenticator
    idempotency: Idempotency
    counts: CountCache
    results: ResultCache
    sender: Sender
    storage: Storage
    console: Sessions
    # Set when a job is queued, so this process's job loop claims it without waiting.
    jobs_wake: asyncio.Event
    # The display names, read at most every few seconds (names/service.py).
    names: NameCache
    # The channels, read at most every few seconds (channels/service.py).
    channels: ChannelCache
    # Whether the database has the index of points with their time (migration 0016), as
    # looked up once at start (units.repository.located_by_time).
    located_by_time: bool = False
    # The website's unit pages this process rendered lately (website/cache.py).
    pages: PageCache = field(default_factory=PageCache)
    # Single writes made together when they arrive together (units/gathering.py).
    writes: Gatherer | None = None
    # The dashboards' copy, when the extra is installed and the setting asks for it
    # (units/dashboards.py); loaded in the background by the app's lifespan.
    dashboards: Dashboards | None = None

    async def close_shared(self) -> None:
        """Closes the rate limiter, the remembered answers and the Redis they share."""
        await self.limiter.close()
        await self.results.close()
        if self.redis is not None:
            await self.redis.close()


def app_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context
