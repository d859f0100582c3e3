"""A Redis that dies, freezes and comes back (CONTRACT 16), on a throwaway `redis-server` of
the test's own: requests keep being answered at once, rate limits are counted by the process
alone, remembered answers computed, one warning line when it is lost and one when it is
back, `units_redis_up` says which, and shared counting resumes by itself."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from tests.conftest import Api, start_api
from tests.test_cli import free_port
from units_api.config import Settings

HANG = 1.0  # seconds: a request that takes longer has hung on Redis (a bound, not a target)
LOG = "units_api.redis_link"
COUNT = {"n": {"fn": "count"}}


class Server:
    """A `redis-server` on a loopback port, keeping nothing on disk."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if Redis.from_url(self.url, socket_timeout=0.5).ping():
                    return
            except OSError:
                pass
            except Exception:  # redis-py's ConnectionError while it starts
                pass
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def signal(self, number: int) -> None:
        assert self.process is not None
        self.process.send_signal(number)


@pytest.fixture
def redis_server() -> Iterator[Server]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    server = Server(free_port())
    server.start()
    try:
        yield server
    finally:
        assert server.process is not None
        server.process.send_signal(signal.SIGCONT)
        server.kill()


@contextmanager
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """The messages the Redis link logs meanwhile."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        seen: list[str] = []
        yield seen
        seen.extend(r.getMessage() for r in caplog.records if r.name == LOG)


async def statuses(api: Api, key: str, count: int) -> list[int]:
    """The statuses of `count` reads with `key`, each answered within HANG."""
    answered = []
    for _ in range(count):
        response = await asyncio.wait_for(
            api.request("GET", "/api/v2/units/x", key=key), timeout=HANG
        )
        answered.append(response.status_code)
    return answered


async def redis_up(api: Api) -> float:
    text = (await api.request("GET", "/metrics")).text
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    return next(s.value for s in samples if s.name == "units_redis_up")


async def back(api: Api) -> None:
    link = api.context.redis
    assert link is not None
    for _ in range(100):
        if link.up:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("Redis not seen back")


async def test_a_dead_redis_leaves_limits_to_each_process_until_it_is_back(
    settings: Settings, redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    shared = settings.model_copy(update={"redis_url": redis_server.url})
    async for api in start_api(shared):
        assert await redis_up(api) == 1
        key = await api.create_key("units:read", rateLimit="20/hour")
        with lines(caplog) as lost:
            redis_server.kill()
            answered = await statuses(api, key, 25)
            assert await redis_up(api) == 0
        assert answered == [404] * 20 + [429] * 5
        assert len(lost) == 1 and lost[0].startswith("Redis lost at 127.0.0.1:"), lost
        assert not [r for r in caplog.records if r.exc_info]

        with lines(caplog) as found:
            redis_server.start()
            await back(api)
        assert len(found) == 1 and found[0].startswith("Redis back"), found
        assert await redis_up(api) == 1
        again = await api.create_key("units:read", rateLimit="4/hour")
        async for other in start_api(shared):
            counted = [
                (await each.request("GET", "/api/v2/units/x", key=again)).status_code
                for each in (api, other, api, other, api)
            ]
        assert counted == [404, 404, 404, 404, 429]


async def test_a_frozen_redis_holds_no_request(
    settings: Settings, redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    shared = settings.model_copy(update={"redis_url": redis_server.url})
    async for api in start_api(shared):
        key = await api.create_key("units:read", rateLimit="20/hour")
        await statuses(api, key, 1)  # a connection to Redis is open
        with lines(caplog) as lost:
            redis_server.signal(signal.SIGSTOP)
            asked = {"filter": "city==Nowhere", "groupBy": ["city"], "aggregates": COUNT}
            query = api.request("POST", "/api/v2/units/query", json=asked)
            assert (await asyncio.wait_for(query, timeout=HANG)).status_code == 200
            answered = await statuses(api, key, 21)
        assert answered == [404] * 20 + [429]  # counted afresh: Redis's count is out of reach
        assert len(lost) == 1 and "Redis lost" in lost[0], lost
        assert await redis_up(api) == 0

        with lines(caplog) as found:
            redis_server.signal(signal.SIGCONT)
            await back(api)
        assert len(found) == 1 and found[0].startswith("Redis back"), found


async def test_redis_calls_give_up_at_once_while_it_is_lost(redis_server: Server) -> None:
    from units_api.redis_link import RedisLink, Unavailable

    link = RedisLink(redis_server.url)
    try:
        assert await link.run(lambda client: client.ping())
        redis_server.kill()
        with pytest.raises(Unavailable):
            await link.run(lambda client: client.ping())
        asked: list[int] = []

        async def counted(client: object) -> None:
            asked.append(1)

        with pytest.raises(Unavailable):
            await link.run(counted)
        assert asked == [] and not link.up
    finally:
        await link.close()
