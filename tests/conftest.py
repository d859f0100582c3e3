"""Fixtures: the real app over HTTP, on real SQLite and PostgreSQL databases.

Each test session migrates a fresh database per backend; each test gets its own app and
its own admin key, and creates the units it needs.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy import update
from sqlalchemy.engine import make_url

from units_api.app import create_app
from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.config import Settings
from units_api.context import AppContext
from units_api.http.json import dumps
from units_api.jobs import queue
from units_api.jobs.tables import jobs
from units_api.migrate import upgrade

# On a shared, busy machine examples are slow to make and to run: that is no failure of the
# code under test (properties still run every example, without a time limit).
settings.register_profile("units", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("units")

PG_URL = os.environ.get("UNITS_API_TEST_DATABASE_URL")
REDIS_URL = os.environ.get("UNITS_API_TEST_REDIS_URL")
REQUIRE_SERVICES = os.environ.get("UNITS_API_TEST_REQUIRE_SERVICES") == "1"


def need_service(url: str | None, what: str) -> None:
    if url:
        return
    message = f"{what} tests need UNITS_API_TEST_{what.upper()}_URL"
    if REQUIRE_SERVICES:
        pytest.fail(message)
    pytest.skip(message)


def _asyncpg_dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


async def admin_sql(url: str, *statements: str) -> None:
    """Run `statements` on the database of `url`, in order, on a connection of their own (a
    role, a database, a database's settings)."""
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("db") / "units.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    return url


@contextmanager
def fresh_postgres(prefix: str) -> Iterator[str]:
    """A PostgreSQL database of its own, dropped afterwards; skipped with no server."""
    need_service(PG_URL, "database")
    assert PG_URL
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(admin_sql(PG_URL, f'CREATE DATABASE "{name}"'))
    try:
        yield _asyncpg_dsn(PG_URL, name)
    finally:
        asyncio.run(admin_sql(PG_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with fresh_postgres("units_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture(scope="session")
def files_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Job files (exports, uploaded imports) of the tests' servers."""
    return str(tmp_path_factory.mktemp("files"))


@pytest.fixture
def settings(database_url: str, files_dir: str) -> Settings:
    # The dashboards' copy would load the shared tables again for every test's app; its own
    # tests (tests/units/test_dashboards.py) turn it on, on databases of their own.
    return Settings(
        database_url=database_url,
        access_log=False,
        db_pool_size=5,
        files_dir=files_dir,
        dashboards_copy=False,
    )


class Api:
    """An HTTP client on the real app, with the app's context and an admin key."""

    def __init__(
        self, client: httpx.AsyncClient, context: AppContext, admin: dict[str, Any]
    ) -> None:
        self.client = client
        self.context = context
        self.admin_key: str = admin["key"]
        self.admin_key_id: str = admin["id"]

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.admin_key}"}

    async def request(
        self,
        method: str,
        url: str,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        return await self.client.request(
            method, url, headers={**self.auth(key), **(headers or {})}, **kwargs
        )

    async def create_unit(self, **fields: Any) -> dict[str, Any]:
        response = await self.request(
            "POST",
            "/api/v2/units/",
            content=dumps(unit_body(**fields)),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    async def add_channel(self, name: str, kind: str = "label", **settings: Any) -> dict[str, Any]:
        """Create (or replace) a channel to publish to."""
        body = {"kind": kind, "settings": settings}
        response = await self.request("PUT", f"/api/v2/channels/{name}", json=body)
        assert response.status_code in (200, 201), response.text
        written: dict[str, Any] = response.json()
        return written

    async def create_key(self, *scopes: str, **extra: Any) -> str:
        body = {"name": "test key", "scopes": list(scopes), **extra}
        response = await self.request("POST", "/api/v2/api-keys", json=body)
        assert response.status_code == 201, response.text
        secret: str = response.json()["key"]
        return secret


READY_UNIT = {
    "name": "Ready Villa",
    "type": "villa",
    "city": "Cairo",
    "price": 2500000,
    "unitImageUrl": "https://cdn.example.com/u/1.jpg",
}


CLI = [sys.executable, "-m", "units_api"]


def cli_admin_key(env: dict[str, str]) -> str:
    """A new admin key's secret, issued by `units-api keys create` on `env`'s database."""
    created = subprocess.run(
        [*CLI, "keys", "create", "--name", "t", "--scope", "admin"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return created.stdout.splitlines()[0]


@contextmanager
def served_sqlite(
    database: Path, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[str, str]]:
    """`units-api serve` (uvicorn, httptools) on a loopback port and a SQLite database of its
    own: its base URL and the first admin key it prints."""
    from tests.test_cli import free_port

    port = free_port()
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": f"sqlite:///{database}",
        "UNITS_API_ACCESS_LOG": "false",
        **(extra_env or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "units_api", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=database.parent,
    )
    assert process.stdout is not None
    process.stdout.readline()
    key = process.stdout.readline().strip()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base)
        yield base, key
    finally:
        stop_server(process)


def stop_server(process: subprocess.Popen[Any], seconds: float = 20) -> None:
    """Stop a server a test started: SIGTERM, and SIGKILL if it has not exited within
    `seconds` (then the wait's TimeoutExpired is raised, the process no longer running)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def wait_until_ready(base: str, seconds: float = 30) -> None:
    """Until a started server answers /readyz."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{base} did not become ready")


def unit_body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "Garden Villa A-12", "type": "villa", "city": "New Cairo"}
    body.update(fields)
    return body


async def start_api(settings: Settings) -> AsyncIterator[Api]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        context: AppContext = app.state.context
        async with context.db.transaction() as conn:
            created = await create_key(conn, ApiKeyCreate(name="test admin", scopes=["admin"]))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://units.test") as client:
            yield Api(client, context, created)


JOB_LEASE = timedelta(seconds=60)


async def claim_first(api: Api, job_id: uuid.UUID, kind: str) -> queue.Claim:
    """Claim the job `job_id` as a runner would: made the oldest of its kind first, so it is
    the one claimed, ahead of any job another test left queued."""
    db = api.context.db
    async with db.transaction() as conn:
        long_ago = datetime(2000, 1, 1, tzinfo=UTC)
        await conn.execute(update(jobs).where(jobs.c.id == job_id).values(created_at=long_ago))
    claim = await queue.claim(db, "test", JOB_LEASE, (kind,))
    assert claim is not None and claim.id == job_id
    return claim


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async for instance in start_api(settings):
        yield instance


def roomy_settings(database_url: str, files_dir: str) -> Settings:
    """An app's settings with connections enough for many concurrent requests."""
    return Settings(
        database_url=database_url,
        access_log=False,
        db_pool_size=20,
        files_dir=files_dir,
        dashboards_copy=False,
    )


@pytest.fixture
async def both_api(database_url: str, files_dir: str) -> AsyncIterator[Api]:
    """An app with enough connections for its concurrent requests, on each database (on
    SQLite with the writer a server has, whose turns gathered writes take)."""
    async for instance in start_api(roomy_settings(database_url, files_dir)):
        yield instance


@pytest.fixture
async def pg_api(postgres_url: str, files_dir: str) -> AsyncIterator[Api]:
    """For behaviour only PostgreSQL has (row locks under real concurrency)."""
    async for instance in start_api(roomy_settings(postgres_url, files_dir)):
        yield instance


@pytest.fixture
def project_root() -> Path:
    return Path(__file__).resolve().parent.parent
