"""Sending one signed delivery: Standard Webhooks headers (and the attempt's `traceparent`
when traces are on), SSRF guard, bounded time and size."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache
from urllib.parse import urlsplit

import aiohttp
from standardwebhooks.webhooks import Webhook

from units_api import __version__
from units_api.webhooks.guard import UnsafeTarget, check_literal, resolver_args

READ_AT_MOST = 64 * 1024
KEEP_AT_MOST = 2 * 1024
USER_AGENT = f"units-api-webhooks/{__version__}"


@dataclass(frozen=True, slots=True)
class Attempt:
    status_code: int | None
    duration_ms: int
    error: str | None
    response: str | None
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@lru_cache(maxsize=1024)
def _signer(secret: str) -> Webhook:
    return Webhook(secret)


def sign(secrets: list[str], message_id: str, at: datetime, body: bytes) -> str:
    """`webhook-signature`: one `v1,<base64>` per secret, space-separated."""
    text = body.decode()
    return " ".join(_signer(secret).sign(message_id, at, text) for secret in secrets)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class Sender:
    """One aiohttp session for a process's deliveries: keep-alive, no proxy from the
    environment, redirects not followed, the guarded resolver unless private targets are
    allowed."""

    def __init__(self, timeout: float, allow_private: bool, limit: int = 100) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._allow_private = allow_private
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit, limit_per_host=8, **resolver_args(self._allow_private)
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, trust_env=False
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def send(
        self,
        url: str,
        secrets: list[str],
        message_id: str,
        body: bytes,
        traceparent: str | None = None,
    ) -> Attempt:
        """POST `body`, signed; `traceparent`: the W3C trace context of the attempt's span,
        sent so the receiver can continue the trace."""
        started = time.perf_counter()
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": sign(secrets, message_id, now, body),
        }
        if traceparent is not None:
            headers["traceparent"] = traceparent
        try:
            if not self._allow_private:
                check_literal(urlsplit(url).hostname or "")
            async with self._open().post(
                url, data=body, headers=headers, allow_redirects=False
            ) as response:
                answer = await _read_some(response)
                code = response.status
                wait = retry_after(response.headers.get("retry-after"))
        except UnsafeTarget as exc:
            return _failed(started, f"refused: {exc}")
        except TimeoutError:
            return _failed(started, f"no answer within {self._timeout.total:g} s")
        except aiohttp.ClientConnectorError as exc:
            cause = exc.os_error
            if isinstance(cause, UnsafeTarget):
                return _failed(started, f"refused: {cause}")
            return _failed(started, f"could not connect: {cause or exc}")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return _failed(started, f"{type(exc).__name__}: {exc}".strip())
        error = None if 200 <= code < 300 else f"answered {code}"
        return Attempt(code, _elapsed(started), error, answer, wait)


async def _read_some(response: aiohttp.ClientResponse) -> str:
    """At most READ_AT_MOST bytes of the answer are read; the first KEEP_AT_MOST are kept,
    cut at a character boundary."""
    kept = bytearray()
    read = 0
    while read < READ_AT_MOST:
        chunk = await response.content.read(READ_AT_MOST - read)
        if not chunk:
            break
        read += len(chunk)
        if len(kept) <= KEEP_AT_MOST:
            kept += chunk[: KEEP_AT_MOST + 1 - len(kept)]
    return cut_utf8(bytes(kept), KEEP_AT_MOST)


def cut_utf8(data: bytes, limit: int) -> str:
    """The first `limit` bytes of `data` as text, cut before a character that would not fit
    whole (bytes that are not UTF-8 read as U+FFFD)."""
    end = min(limit, len(data))
    if end < len(data):
        # A continuation byte just past the cut: the character it belongs to is left out.
        while end > 0 and data[end] & 0xC0 == 0x80 and limit - end < 4:
            end -= 1
    return data[:end].decode("utf-8", "replace")


def _elapsed(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def _failed(started: float, error: str) -> Attempt:
    return Attempt(None, _elapsed(started), error[:500], None)
