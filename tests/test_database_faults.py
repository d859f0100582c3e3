"""The database failing for real under a running service (CONTRACT 16): a throwaway PostgreSQL
restarted under requests, frozen with SIGSTOP, its connections ended by
`pg_terminate_backend`, and failed over to its standby through a URL naming both hosts.
Requests answer 2xx or a 503 problem (never a 500, never a hang), and all succeed soon after
the database answers again, without restarting the service."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest
from bench.replica_pair import Pair, sql

from tests.clusters import frozen, promote, stop_fast, throwaway_pair
from tests.conftest import Api, cli_admin_key, start_api, unit_body
from tests.events.test_feed import FEED
from tests.processes import serving
from tests.test_cli import free_port
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.events.wakeup import CHANNEL, Wakeup
from units_api.http.json import dumps

UNITS = "/api/v2/units/"
# The service's bound on waiting for the database in these tests (seconds), and how long a
# test's client waits for an answer: well past the bound, well short of the faults.
BOUND = 2.0
CLIENT_TIMEOUT = BOUND + 6
# Every request succeeds this long after the database answers again (CONTRACT 16).
RECOVERY = 5.0
# Writes reach a promoted standby this long after the promotion (CONTRACT 16).
FAILOVER = 10.0


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with throwaway_pair() as made:
        yield made


@pytest.fixture
def primary(pair: Pair) -> Iterator[Pair]:
    """The pair with its primary running, before and after a test."""
    if not (pair.primary_dir / "postmaster.pid").exists():
        pair.start(pair.primary_dir)
    yield pair
    if not (pair.primary_dir / "postmaster.pid").exists():
        pair.start(pair.primary_dir)


@dataclass
class Answer:
    sent: float
    what: str
    status: int
    headers: httpx.Headers
    text: str


@contextmanager
def _server(url: str, tmp_path: Path) -> Iterator[httpx.AsyncClient]:
    """`units-api serve` on `url`, bounded at BOUND; a client with an admin key."""
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": url,
        "UNITS_API_DB_UNAVAILABLE_SECONDS": str(BOUND),
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RATE_LIMIT": "1000000/minute",
        "UNITS_API_FILES_DIR": str(tmp_path / "files"),
        "UNITS_API_DB_POOL_SIZE": "4",
        "UNITS_API_DB_FAST_POOL_SIZE": "4",
    }
    env.pop("UNITS_API_REDIS_URL", None)
    headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
    with serving(env, free_port(), tmp_path / "server.log") as base:
        yield httpx.AsyncClient(base_url=base, headers=headers, timeout=CLIENT_TIMEOUT)


async def _create(client: httpx.AsyncClient, tag: str, **headers: str) -> httpx.Response:
    body = dumps(unit_body(subProjectId=tag, price=1000000))
    return await client.post(
        UNITS, content=body, headers={"content-type": "application/json", **headers}
    )


async def _ask(client: httpx.AsyncClient, what: str, unit_id: str, tag: str) -> Answer:
    sent = time.monotonic()
    if what == "get":
        response = await client.get(f"{UNITS}{unit_id}")
    elif what == "list":
        response = await client.get(UNITS, params={"p": f"subProjectId=={tag}"})
    else:
        response = await _create(client, tag)
    return Answer(sent, what, response.status_code, response.headers, response.text)


async def _load(
    client: httpx.AsyncClient, unit_id: str, tag: str, stop: asyncio.Event
) -> list[Answer]:
    """Reads and writes in turn, two at a time, until `stop`."""
    answers: list[Answer] = []

    async def one_client(offset: int) -> None:
        turn = offset
        while not stop.is_set():
            answers.append(await _ask(client, ("get", "list", "create")[turn % 3], unit_id, tag))
            turn += 1
            await asyncio.sleep(0.02)

    await asyncio.gather(one_client(0), one_client(1))
    return answers


def _assert_unavailable(answer: Answer | httpx.Response, pair: Pair) -> None:
    """A 503 problem of type .../unavailable, with Retry-After, naming no host or driver."""
    status = answer.status if isinstance(answer, Answer) else answer.status_code
    assert status == 503, answer.text
    problem = httpx.Response(200, text=answer.text).json()
    assert problem["type"].endswith("/unavailable"), problem
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["retry-after"].isdigit()
    for leak in ("127.0.0.1", str(pair.primary_port), "asyncpg", "sqlalchemy", "Traceback"):
        assert leak not in answer.text, answer.text


async def _while_down(client: httpx.AsyncClient, pair: Pair, unit_id: str) -> None:
    """While the database is out of reach: alive, not ready (naming the database), and a
    request that needs it is a 503 problem."""
    assert (await client.get("/healthz")).status_code == 200
    ready = await client.get("/readyz")
    assert ready.status_code == 503 and "database" in ready.json()["detail"]
    assert ready.headers["retry-after"].isdigit()
    _assert_unavailable(await client.get(f"{UNITS}{unit_id}"), pair)
    _assert_unavailable(await client.get(UNITS), pair)


async def _until_ok(client: httpx.AsyncClient, path: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (await client.get(path)).status_code != 200:
        assert time.monotonic() < deadline, f"{path} did not succeed within {seconds} s"
        await asyncio.sleep(0.1)


async def test_a_restart_under_requests_is_503s_while_down_then_every_request_succeeds(
    primary: Pair, tmp_path: Path
) -> None:
    tag = f"restart-{uuid.uuid4().hex[:8]}"
    with _server(primary.primary_url, tmp_path) as client:
        async with client:
            made = await _create(client, tag)
            assert made.status_code == 201, made.text
            unit_id = made.json()["id"]
            stop = asyncio.Event()
            load = asyncio.create_task(_load(client, unit_id, tag, stop))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(stop_fast, primary, primary.primary_dir)
            await _while_down(client, primary, unit_id)
            await asyncio.to_thread(primary.start, primary.primary_dir)
            back = time.monotonic()
            await asyncio.sleep(RECOVERY + 1.5)
            stop.set()
            answers = await load
            assert (await client.get("/readyz")).status_code == 200
    assert all(answer.status in (200, 201, 503) for answer in answers), [
        (answer.what, answer.status, answer.text) for answer in answers if answer.status >= 400
    ]
    failed = [answer for answer in answers if answer.status == 503]
    assert failed, "no request met the database down"
    for answer in failed:
        _assert_unavailable(answer, primary)
    after = [answer for answer in answers if answer.sent >= back + RECOVERY]
    assert after and all(answer.status in (200, 201) for answer in after)


async def test_a_frozen_database_is_503s_within_the_bound_and_recovers_when_it_thaws(
    primary: Pair, tmp_path: Path
) -> None:
    tag = f"frozen-{uuid.uuid4().hex[:8]}"
    with _server(primary.primary_url, tmp_path) as client:
        async with client:
            made = await _create(client, tag)
            assert made.status_code == 201, made.text
            unit_id = made.json()["id"]
            with frozen(primary.primary_dir):
                # The client gives up at CLIENT_TIMEOUT: an answer at all is within bounds.
                await _while_down(client, primary, unit_id)
                _assert_unavailable(await _create(client, tag), primary)
            await _until_ok(client, f"{UNITS}{unit_id}", RECOVERY)
            assert (await _create(client, tag)).status_code == 201
            listed = await client.get(UNITS, params={"p": f"subProjectId=={tag}"})
            assert listed.status_code == 200 and len(listed.json()["data"]) == 2


@asynccontextmanager
async def _in_process(pair: Pair, files_dir: str, bound: float = BOUND) -> AsyncIterator[Api]:
    settings = Settings(
        database_url=pair.primary_url,
        access_log=False,
        db_pool_size=4,
        db_fast_pool_size=4,
        run_jobs=False,
        files_dir=files_dir,
        db_unavailable_seconds=bound,
    )
    async for api in start_api(settings):
        yield api


async def test_a_statement_out_of_time_on_a_healthy_database_fails_no_other_request(
    primary: Pair, files_dir: str
) -> None:
    """One unit's row locked, so a delete of it waits out the bound and is a 503; the
    database answers everything else meanwhile and right after, so no other request is
    refused as if the database were out of reach (`outage.py`: the probe answered)."""
    tag = f"slow-{uuid.uuid4().hex[:8]}"
    url = primary.primary_url
    async with _in_process(primary, files_dir, bound=1.0) as api:
        held = await api.create_unit(name="Held Villa", subProjectId=tag)
        free = await api.create_unit(name="Free Villa", subProjectId=tag)
        locker = await asyncpg.connect(url)
        answers: list[httpx.Response] = []
        try:
            await locker.execute("BEGIN")
            await locker.execute("SELECT 1 FROM units WHERE id = $1 FOR UPDATE", held["id"])
            slow = asyncio.create_task(api.request("DELETE", f"{UNITS}{held['id']}"))
            while not slow.done():
                answers.append(await api.request("GET", f"{UNITS}{free['id']}"))
            _assert_unavailable(await slow, primary)
            answers.append(await api.request("GET", f"{UNITS}{free['id']}"))
            answers.append(await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"}))
            answers.append(await _create(api.client, tag, **api.auth()))
        finally:
            await locker.close()
        assert [answer.status_code for answer in answers if answer.status_code >= 300] == []
        assert api.context.db.outage is not None and not api.context.db.outage.known
        assert (await api.request("GET", f"{UNITS}{held['id']}")).status_code == 200


async def test_connections_ended_by_the_database_are_not_handed_to_reads(
    primary: Pair, files_dir: str
) -> None:
    tag = f"ended-{uuid.uuid4().hex[:8]}"
    async with _in_process(primary, files_dir) as api:
        unit = await api.create_unit(name="Kept Villa", subProjectId=tag)
        for _ in range(3):  # the pools hold open connections
            assert (await api.request("GET", f"{UNITS}{unit['id']}")).status_code == 200
            assert (await api.request("GET", UNITS)).status_code == 200
        ended = await sql(
            primary.primary_url,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = 'units-api'",
        )
        assert ended >= 2
        got = await api.request("GET", f"{UNITS}{unit['id']}")
        assert got.status_code == 200, got.text
        listed = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
        assert listed.status_code == 200, listed.text
        assert [found["id"] for found in listed.json()["data"]] == [unit["id"]]
        history = await api.request("GET", f"{UNITS}{unit['id']}/history")
        assert history.status_code == 200, history.text
        assert (await api.client.get("/readyz")).status_code == 200
        await api.create_unit(name="Later Villa", subProjectId=tag)


# The service's backends waiting on a lock (a statement held up by the test's LOCK TABLE).
_WAITING = (
    "SELECT array_agg(pid) FROM pg_stat_activity"
    " WHERE application_name = 'units-api' AND wait_event_type = 'Lock'"
)


async def _held_up(url: str, other_than: list[int] | None = None) -> list[int]:
    """The service's backends held up on the lock, once there are some (other than these)."""
    deadline = time.monotonic() + 10
    while True:
        waiting = [pid for pid in (await sql(url, _WAITING) or []) if pid not in (other_than or [])]
        if waiting:
            return waiting
        assert time.monotonic() < deadline, "no statement waited on the lock"
        await asyncio.sleep(0.02)


async def test_a_read_whose_connection_is_ended_mid_statement_runs_again_and_a_write_does_not(
    primary: Pair, files_dir: str
) -> None:
    """The units table locked, so the service's statements wait on it; the database ends the
    connection of the one waiting. The read runs again on a fresh connection and succeeds
    once the lock goes; the write is a 503, not run again, and left nothing behind."""
    tag = f"midway-{uuid.uuid4().hex[:8]}"
    url = primary.primary_url
    async with _in_process(primary, files_dir, bound=30.0) as api:
        unit = await api.create_unit(name="Locked Villa", subProjectId=tag)
        locker = await asyncpg.connect(url)
        try:
            await locker.execute("BEGIN; LOCK TABLE units IN ACCESS EXCLUSIVE MODE")
            read = asyncio.create_task(api.request("GET", f"{UNITS}{unit['id']}"))
            first = await _held_up(url)
            await sql(url, f"SELECT pg_terminate_backend({first[0]})")
            await _held_up(url, other_than=first)  # the read, again, on a new connection
            await locker.execute("ROLLBACK")
            got = await read
            assert got.status_code == 200, got.text
            assert got.json()["name"] == "Locked Villa"

            await locker.execute("BEGIN; LOCK TABLE units IN ACCESS EXCLUSIVE MODE")
            write = asyncio.create_task(_create(api.client, tag, **api.auth()))
            cut = await _held_up(url)
            await sql(url, f"SELECT pg_terminate_backend({cut[0]})")
            refused = await write
            _assert_unavailable(refused, primary)
            await locker.execute("ROLLBACK")
        finally:
            await locker.close()
        listed = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
        assert [found["id"] for found in listed.json()["data"]] == [unit["id"]]


async def test_a_create_repeated_with_its_idempotency_key_across_a_restart_is_done_once(
    primary: Pair, files_dir: str
) -> None:
    tag = f"idem-{uuid.uuid4().hex[:8]}"
    async with _in_process(primary, files_dir) as api:
        first = await _create(api.client, tag, **api.auth(), **{"Idempotency-Key": f"{tag}-1"})
        assert first.status_code == 201, first.text
        await asyncio.to_thread(stop_fast, primary, primary.primary_dir)
        refused = await _create(api.client, tag, **api.auth(), **{"Idempotency-Key": f"{tag}-2"})
        _assert_unavailable(refused, primary)
        await asyncio.to_thread(primary.start, primary.primary_dir)

        again = await _create(api.client, tag, **api.auth(), **{"Idempotency-Key": f"{tag}-1"})
        assert again.status_code == 201, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["id"] == first.json()["id"]
        second = await _create(api.client, tag, **api.auth(), **{"Idempotency-Key": f"{tag}-2"})
        assert second.status_code == 201, second.text
        repeated = await _create(api.client, tag, **api.auth(), **{"Idempotency-Key": f"{tag}-2"})
        assert repeated.json()["id"] == second.json()["id"]
        listed = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
        ids = {unit["id"] for unit in listed.json()["data"]}
        assert ids == {first.json()["id"], second.json()["id"]}


async def test_a_create_cut_off_by_a_restart_is_done_once_when_repeated_with_its_key(
    primary: Pair, files_dir: str
) -> None:
    """A create under way when the database shuts down: its client gets a 503 and cannot
    know whether it was done; its claim stays behind (the release could not reach the
    database). Repeated with the same key once the database is back, it is done, once."""
    tag = f"cutoff-{uuid.uuid4().hex[:8]}"
    key = {"Idempotency-Key": f"{tag}-1"}
    url = primary.primary_url
    async with _in_process(primary, files_dir, bound=30.0) as api:
        locker = await asyncpg.connect(url)
        try:
            await locker.execute("BEGIN; LOCK TABLE units IN ACCESS EXCLUSIVE MODE")
            cut = asyncio.create_task(_create(api.client, tag, **api.auth(), **key))
            await _held_up(url)
            await asyncio.to_thread(stop_fast, primary, primary.primary_dir)
            _assert_unavailable(await cut, primary)
        finally:
            locker.terminate()
        await asyncio.to_thread(primary.start, primary.primary_dir)
        done = await _create(api.client, tag, **api.auth(), **key)
        assert done.status_code == 201, done.text
        assert "idempotent-replayed" not in done.headers
        again = await _create(api.client, tag, **api.auth(), **key)
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["id"] == done.json()["id"]
        listed = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
        assert [unit["id"] for unit in listed.json()["data"]] == [done.json()["id"]]


_LISTENING = (
    "SELECT array_agg(pid) FROM pg_stat_activity"
    f" WHERE query LIKE 'LISTEN%{CHANNEL}%' AND state = 'idle'"
)


async def _listening(url: str, other_than: list[int] | None = None) -> list[int]:
    """The backends LISTENing for events, once there are some (other than these)."""
    deadline = time.monotonic() + 15
    while True:
        found = [pid for pid in (await sql(url, _LISTENING) or []) if pid not in (other_than or [])]
        if found:
            return found
        assert time.monotonic() < deadline, "nothing listens"
        await asyncio.sleep(0.05)


async def test_the_workers_listen_again_after_the_database_ends_their_connection(
    primary: Pair,
) -> None:
    url = primary.primary_url
    db = Database(create_engine(url, pool_size=1, bound=BOUND), bound=BOUND)
    wakeup = Wakeup(db)
    stop = asyncio.Event()
    running = asyncio.create_task(wakeup.run(True, stop))
    try:
        first = await _listening(url)
        await sql(
            url, f"SELECT count(pg_terminate_backend(pid)) FROM unnest('{{{first[0]}}}'::int[]) pid"
        )
        await _listening(url, other_than=first)
        wakeup.event.clear()
        await sql(url, f"SELECT pg_notify('{CHANNEL}', '')")
        await asyncio.wait_for(wakeup.event.wait(), timeout=10)
    finally:
        stop.set()
        await running
        await db.dispose()


def failover_url(pair: Pair) -> str:
    """Both hosts of `pair` in libpq's form, writes going to whichever is the primary."""
    return (
        f"postgresql://postgres@127.0.0.1:{pair.primary_port},127.0.0.1:{pair.standby_port}"
        "/postgres?target_session_attrs=read-write"
    )


async def _feed_has(client: httpx.AsyncClient, after: str, unit_id: str) -> bool:
    response = await client.get(FEED, params={"after": after})
    return response.status_code == 200 and any(
        event["unitId"] == unit_id for event in response.json()["data"]
    )


@pytest.fixture
def spent_pair() -> Iterator[Pair]:
    """A pair of its own, for a test that leaves it failed over."""
    with throwaway_pair() as made:
        yield made


async def test_writes_follow_a_promoted_standby_through_a_url_naming_both_hosts(
    spent_pair: Pair, tmp_path: Path
) -> None:
    tag = f"failover-{uuid.uuid4().hex[:8]}"
    pair = spent_pair
    with _server(failover_url(pair), tmp_path) as client:
        async with client:
            before = await _create(client, tag)
            assert before.status_code == 201, before.text
            start = (await client.get(FEED, params={"types": "import.failed"})).json()
            await asyncio.to_thread(pair.stop, pair.primary_dir)
            await asyncio.to_thread(promote, pair)
            promoted = time.monotonic()
            after: dict[str, Any] = {}
            while not after:
                response = await _create(client, tag)
                assert response.status_code in (201, 503), response.text
                if response.status_code == 201:
                    after = response.json()
                else:
                    assert time.monotonic() < promoted + FAILOVER, "no write on the new primary"
                    await asyncio.sleep(0.1)
            kept = await client.get(f"{UNITS}{before.json()['id']}")
            assert kept.status_code == 200, kept.text
            deadline = time.monotonic() + FAILOVER
            while not await _feed_has(client, start["nextCursor"], after["id"]):
                assert time.monotonic() < deadline, "the feed did not follow the failover"
                await asyncio.sleep(0.2)
