"""Each process's copy of the unit pages it rendered lately, kept by everything a page is made
of: the unit's id and version (a unit's every change is a new version), the language, the
public base URL, the website channels and the display names in force. So a page is never
served stale, and one asked again is neither parsed nor rendered: its stored bytes go out."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Standing = Literal["live", "gone", "never"]
Key = tuple[object, ...]
Made = tuple["Page | None", Key | None]  # a page made (None: none), and the key to keep it by


@dataclass(frozen=True, slots=True)
class Page:
    standing: Standing
    body: bytes  # empty unless live
    tag: str
    modified: datetime | None
    headers: Mapping[str, str] = field(default_factory=dict)  # its validators and caching


class PageCache:
    """Least recently used pages, up to `budget` bytes of bodies."""

    def __init__(self, budget: int = 32 * 1024 * 1024) -> None:
        self._budget = budget
        self._used = 0
        self._pages: OrderedDict[Key, Page] = OrderedDict()
        self._making: dict[Key, asyncio.Future[Page | None]] = {}

    def get(self, key: Key) -> Page | None:
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
        return page

    def put(self, key: Key, page: Page) -> None:
        if self._budget <= 0 or len(page.body) > self._budget // 8:
            return
        old = self._pages.pop(key, None)
        if old is not None:
            self._used -= len(old.body) + 200
        self._pages[key] = page
        self._used += len(page.body) + 200  # the key and the record, roughly
        while self._used > self._budget and self._pages:
            _, dropped = self._pages.popitem(last=False)
            self._used -= len(dropped.body) + 200

    async def made(self, key: Key, make: Callable[[], Awaitable[Made]]) -> Page | None:
        """The page kept by `key`, or the one `make` makes, kept by the key it gives. While
        one request makes it, the others asking for the same key wait for that page, rather
        than each reading the same from the database (a page much asked and slow to make
        would otherwise be made by every request that arrives meanwhile, each slower for the
        others). Should that making fail, they fail with it (the database would answer them
        no better); should its request be cancelled, each makes its own."""
        page = self.get(key)
        if page is not None:
            return page
        pending = self._making.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this request's own cancellation
                made, _ = await make()
                return made
        future: asyncio.Future[Page | None] = asyncio.get_running_loop().create_future()
        self._making[key] = future
        try:
            made, keep = await make()
        except Exception as error:
            future.set_exception(error)
            future.exception()  # read here: nobody may be waiting for it
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            self._making.pop(key, None)
        if made is not None and keep is not None:
            self.put(keep, made)
        future.set_result(made)
        return made
