"""The forms `UNITS_API_DATABASE_URL` and the replica URLs may take: several PostgreSQL hosts
in libpq's form or in the query, each read the same way, and a malformed one refused in one
line that names the setting (CONTRACT 14, 16)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import PG_URL, need_service
from tests.test_cli import free_port
from tests.test_startup import clean_env, run
from units_api.config import PREFIX, load_settings
from units_api.db import Database, create_engine
from units_api.dburls import driver_dsn, parse, split, where
from units_api.errors import SettingError
from units_api.preflight import check_database

SETTING = "UNITS_API_DATABASE_URL"

ACCEPTED = [
    (
        "postgresql://u@h1:5433,h2:5434/db?target_session_attrs=read-write",
        "postgresql://u@h1:5433,h2:5434/db?target_session_attrs=read-write",
    ),
    ("postgresql://u:p@h1,h2:6000/db", "postgresql://u:p@h1:5432,h2:6000/db"),
    (
        "postgresql://u@/db?host=h1,h2&port=5433,5434&target_session_attrs=read-write",
        "postgresql://u@h1:5433,h2:5434/db?target_session_attrs=read-write",
    ),
    ("postgresql://u@/db?host=h1,h2&port=6000", "postgresql://u@h1:6000,h2:6000/db"),
    ("postgresql://u@/db?host=h1:5433&host=h2:5434", "postgresql://u@h1:5433,h2:5434/db"),
    ("postgresql://u@/db?host=h1&host=h2", "postgresql://u@h1:5432,h2:5432/db"),
    ("postgresql+asyncpg://u@db.example:5432/units", "postgresql://u@db.example:5432/units"),
]

REFUSED = [
    ("postgresql://u@h1:5433,,h2/db", "has a host list with an empty or malformed host"),
    ("postgresql://u@h1:5433,h2:port/db", "has a host with a port that is not a number"),
    ("postgresql://u@h1:99999,h2/db", "has a host with a port that is not a number"),
    ("postgresql://u@h1,h2/db?host=h3", "names hosts both before the database and in ?host="),
    ("postgresql://u@/db?host=h1,h2&port=1,2,3", "names 2 hosts but 3 ports"),
    ("postgresql://u@/db?host=h1:1&host=h2:2&port=3", "gives ports both in ?host= and ?port="),
    (
        "postgresql://u@h1,h2/db?target_session_attrs=primary-please",
        "target_session_attrs must be one of any, primary, standby",
    ),
    ("postgresql://u@h1:5432:5433/db", "must be a URL such as"),
]


def _settings_env(monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
    for name in os.environ:
        if name.upper().startswith(PREFIX) and not name.upper().startswith("UNITS_API_TEST_"):
            monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(("url", "for_asyncpg"), ACCEPTED)
def test_several_hosts_are_read_in_every_form(
    monkeypatch: pytest.MonkeyPatch, url: str, for_asyncpg: str
) -> None:
    _settings_env(monkeypatch, UNITS_API_DATABASE_URL=url)
    assert load_settings().database_url == url
    assert driver_dsn(parse(url)) == for_asyncpg


@pytest.mark.parametrize(("url", "message"), REFUSED)
def test_a_malformed_host_list_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    _settings_env(monkeypatch, UNITS_API_DATABASE_URL=url)
    with pytest.raises(SettingError) as refused:
        load_settings()
    text = str(refused.value)
    assert text.startswith(f"{SETTING}: {message}") and "\n" not in text, text


def test_replica_urls_may_each_name_several_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    replicas = "postgresql://u@r1:5432,r2:5432/db, postgresql://u@/db?host=r3,r4&port=5433"
    _settings_env(
        monkeypatch,
        UNITS_API_DATABASE_URL="postgresql://u@p1,p2/db?target_session_attrs=read-write",
        UNITS_API_DATABASE_REPLICA_URLS=replicas,
    )
    urls = load_settings().replica_urls
    assert [where(parse(url)) for url in urls] == ["r1:5432,r2:5432", "r3:5433,r4:5433"]
    assert split("postgresql://a@h/db,postgresql://b@h1,h2/db") == (
        "postgresql://a@h/db",
        "postgresql://b@h1,h2/db",
    )
    _settings_env(
        monkeypatch,
        UNITS_API_DATABASE_URL="postgresql://u@p/db",
        UNITS_API_DATABASE_REPLICA_URLS="postgresql://u@r1,,r2/db",
    )
    with pytest.raises(SettingError, match=r"^UNITS_API_DATABASE_REPLICA_URLS: has a host list"):
        load_settings()


@pytest.mark.parametrize(
    "form",
    [
        "postgresql://units@127.0.0.1:{one},127.0.0.1:{two}/units",
        "postgresql://units@/units?host=127.0.0.1,127.0.0.1&port={one},{two}",
        "postgresql://units@/units?host=127.0.0.1:{one}&host=127.0.0.1:{two}",
    ],
)
def test_several_hosts_nobody_answers_at_are_named_without_a_traceback(
    tmp_path: Path, form: str
) -> None:
    one, two = free_port(), free_port()
    result = run(clean_env(tmp_path, UNITS_API_DATABASE_URL=form.format(one=one, two=two)), "serve")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f'error: {SETTING}: cannot connect to 127.0.0.1:{one},127.0.0.1:{two} as "units": '
    ), line
    assert "Traceback" not in result.stderr


def _second_of_two(form: str) -> str:
    """The test database as the second of two hosts, the first answering nothing."""
    need_service(PG_URL, "PostgreSQL")
    assert PG_URL is not None
    url = make_url(PG_URL)
    host, port, down = url.host, url.port or 5432, free_port()
    return form.format(user=url.username, host=host, port=port, down=down, database=url.database)


@pytest.mark.parametrize(
    "form",
    [
        "postgresql://{user}@127.0.0.1:{down},{host}:{port}/{database}"
        "?target_session_attrs=read-write",
        "postgresql://{user}@/{database}?host=127.0.0.1,{host}&port={down},{port}"
        "&target_session_attrs=read-write",
        "postgresql://{user}@/{database}?host=127.0.0.1:{down}&host={host}:{port}",
    ],
)
async def test_the_engine_and_the_fast_pool_connect_to_the_host_that_answers(form: str) -> None:
    url = _second_of_two(form)
    await _check_database(url)
    db = Database(create_engine(url, pool_size=1, bound=5.0), bound=5.0)
    try:
        await db.open_fast_pool(1)
        async with db.read() as conn:
            assert (await conn.exec_driver_sql("SELECT pg_is_in_recovery()")).scalar() is False
        async with db.fast_read() as plain:
            assert await plain.driver.fetchval("SELECT 1") == 1  # type: ignore[union-attr]
        listening = await db.raw_connection()
        await listening.close()
    finally:
        await db.dispose()


async def _check_database(url: str) -> None:
    """The start-up check passes (it runs its own event loop, so in a thread)."""
    import asyncio

    from units_api.config import Settings

    await asyncio.to_thread(check_database, Settings(database_url=url))
