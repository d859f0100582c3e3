"""Start-up: `--version`, settings checked before anything starts (one line naming the bad
one, exit code 2), and the API documentation served with no internet."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import PG_URL, Api, admin_sql, fresh_postgres, need_service, served_sqlite
from tests.test_cli import free_port
from units_api.config import (
    PREFIX,
    PUBLISH_FIELDS,
    Settings,
    check_names,
    load_settings,
    setting_names,
)
from units_api.errors import SettingError
from units_api.metrics import MULTIPROCESS_DIR
from units_api.units.schemas import UnitFields

CLI = [sys.executable, "-m", "units_api"]


def clean_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The tests' environment without any setting of the caller's shell, on a SQLite
    database of its own, plus `settings`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.upper().startswith(PREFIX) or name.upper().startswith("UNITS_API_TEST_")
    }
    env["UNITS_API_DATABASE_URL"] = f"sqlite:///{tmp_path}/start.db"
    env["UNITS_API_FILES_DIR"] = str(tmp_path / "files")
    return {**env, **settings}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def assert_refused(result: subprocess.CompletedProcess[str], line: str) -> None:
    """Stopped with exit code 2 and one line on stderr, no traceback, nothing started."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"error: {line}"], result.stderr
    assert result.stdout == ""


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    result = run(clean_env(tmp_path), "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"units-api {metadata.version('units-api')}\n"


BAD_VALUES = [
    (
        {"UNITS_API_PORT": "abc"},
        "UNITS_API_PORT: input should be a valid integer, unable to parse string as an integer"
        " (got 'abc')",
    ),
    ({"UNITS_API_PORT": "70000"}, "UNITS_API_PORT: input should be less than or equal to 65535"),
    ({"UNITS_API_WORKERS": "0"}, "UNITS_API_WORKERS: input should be greater than or equal to 1"),
    ({"UNITS_API_RUN_JOBS": "maybe"}, "UNITS_API_RUN_JOBS: input should be a valid boolean"),
    ({"UNITS_API_LOG_LEVEL": "loud"}, "UNITS_API_LOG_LEVEL: must be one of DEBUG, INFO"),
    ({"UNITS_API_RATE_LIMIT": "fast"}, "UNITS_API_RATE_LIMIT: must look like 600/minute"),
    ({"UNITS_API_DATABASE_URL": "units.db"}, "UNITS_API_DATABASE_URL: must be a URL such as"),
    (
        {"UNITS_API_DATABASE_URL": "mysql://app:s3cret@db/units"},
        "UNITS_API_DATABASE_URL: must be a sqlite:/// or postgresql:// URL"
        " (got 'mysql://***@db/units')",
    ),
    (
        {"UNITS_API_DATABASE_URL": "postgresql://app@db:port/units"},
        "UNITS_API_DATABASE_URL: must be a URL such as",
    ),
    ({"UNITS_API_REDIS_URL": "http://cache:6379"}, "UNITS_API_REDIS_URL: redis URL must specify"),
    ({"UNITS_API_STORAGE_URL": "/srv/files"}, "UNITS_API_STORAGE_URL: must be an s3://bucket"),
    (
        {"UNITS_API_DATABSE_URL": "sqlite:///x.db"},
        "UNITS_API_DATABSE_URL is not a setting; did you mean UNITS_API_DATABASE_URL?",
    ),
    (
        {"units_api_workrs": "2"},
        "units_api_workrs is not a setting; did you mean UNITS_API_WORKERS?",
    ),
    (
        {"UNITS_API_PUBLIC_BASE_URL": "https://homes.example", "UNITS_API_INDEXNOW_KEY": "k3y"},
        "UNITS_API_INDEXNOW_KEY: must be 8-128 of a-z, A-Z, 0-9 and - (got (hidden))",
    ),
    (
        {"UNITS_API_PUBLIC_BASE_URL": "https://homes.example", "UNITS_API_INDEXNOW_KEY": "a b" * 4},
        "UNITS_API_INDEXNOW_KEY: must be 8-128 of a-z, A-Z, 0-9 and -",
    ),
    (
        {"UNITS_API_INDEXNOW_KEY": "0123456789abcdef"},
        "UNITS_API_INDEXNOW_KEY: needs UNITS_API_PUBLIC_BASE_URL: the host whose pages are sent"
        " to IndexNow",
    ),
    (
        {"UNITS_API_INDEXNOW_ENDPOINT": "ftp://indexnow.example"},
        "UNITS_API_INDEXNOW_ENDPOINT: must be an absolute http(s) URL",
    ),
    (
        {"UNITS_API_COLOUR": "blue"},
        "UNITS_API_COLOUR is not a setting; the README lists them",
    ),
]


@pytest.mark.parametrize(("settings", "line"), BAD_VALUES)
def test_a_bad_setting_is_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], line: str
) -> None:
    for name in os.environ:
        if name.upper().startswith(PREFIX):
            monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith(line) and "\n" not in message, message
    assert "s3cret" not in message


@pytest.mark.parametrize(
    ("command", "settings", "line"),
    [
        (
            ["serve"],
            {"UNITS_API_PORT": "abc"},
            "UNITS_API_PORT: input should be a valid integer, unable to parse string as an"
            " integer (got 'abc')",
        ),
        (
            ["worker"],
            {"UNITS_API_DATABSE_URL": "sqlite:///x.db"},
            "UNITS_API_DATABSE_URL is not a setting; did you mean UNITS_API_DATABASE_URL?",
        ),
        (
            ["migrate"],
            {"UNITS_API_DATABASE_URL": "mysql://app:s3cret@db/units"},
            "UNITS_API_DATABASE_URL: must be a sqlite:/// or postgresql:// URL"
            " (got 'mysql://***@db/units')",
        ),
        (["keys", "list"], {"UNITS_API_POTR": "1"}, None),
        (["keys", "revoke", "x"], {"UNITS_API_POTR": "1"}, None),
        (["seed"], {"UNITS_API_POTR": "1"}, None),
        (["export", "--format", "csv"], {"UNITS_API_POTR": "1"}, None),
    ],
)
def test_a_bad_setting_stops_every_command_before_it_starts(
    tmp_path: Path, command: list[str], settings: dict[str, str], line: str | None
) -> None:
    result = run(clean_env(tmp_path, **settings), *command)
    assert_refused(result, line or "UNITS_API_POTR is not a setting; did you mean UNITS_API_PORT?")
    assert not (tmp_path / "start.db").exists()


def test_debug_shows_the_traceback_then_the_line(tmp_path: Path) -> None:
    result = run(clean_env(tmp_path, UNITS_API_PORT="abc"), "--debug", "serve")
    assert result.returncode == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: UNITS_API_PORT: ")


def test_every_setting_is_a_known_name_and_a_slip_is_pointed_to_it() -> None:
    names = setting_names()
    assert set(names.values()) == set(Settings.model_fields)
    check_names({name: "" for name in names})
    for name in names:
        suffix = name.removeprefix(PREFIX)
        slip = PREFIX + suffix[:-2] + suffix[-1]  # one letter dropped
        with pytest.raises(SettingError, match=f"did you mean {name}\\?$"):
            check_names({slip: "1"})


def test_names_of_test_suites_are_left_alone(tmp_path: Path) -> None:
    env = clean_env(tmp_path, UNITS_API_TEST_SOMETHING_ELSE="1", units_api_access_log="false")
    result = run(env, "migrate")
    assert result.returncode == 0, result.stderr
    assert "database at revision" in result.stdout


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["migrate"], ["seed"]])
def test_a_database_nobody_answers_at_is_named(tmp_path: Path, command: list[str]) -> None:
    port = free_port()
    url = f"postgresql://units:s3cret@127.0.0.1:{port}/units"
    result = run(clean_env(tmp_path, UNITS_API_DATABASE_URL=url), *command)
    assert_refused(
        result,
        f'UNITS_API_DATABASE_URL: cannot connect to 127.0.0.1:{port} as "units":'
        " connection refused (is the server running, on that port?)",
    )


def test_a_database_host_that_does_not_resolve_is_named(tmp_path: Path) -> None:
    url = "postgresql://units@no-such-host.invalid/units"
    result = run(clean_env(tmp_path, UNITS_API_DATABASE_URL=url), "serve")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    prefix = 'error: UNITS_API_DATABASE_URL: cannot connect to no-such-host.invalid:5432 as "units"'
    assert result.stderr.startswith(prefix), result.stderr


def test_a_wrong_database_user_or_database_is_named(tmp_path: Path) -> None:
    need_service(PG_URL, "database")
    assert PG_URL
    server = make_url(PG_URL)
    where = f"{server.host}:{server.port or 5432}"
    user = server.set(username="no_such_role_for_units")
    result = run(
        clean_env(tmp_path, UNITS_API_DATABASE_URL=user.render_as_string(hide_password=False)),
        "serve",
    )
    assert_refused(
        result,
        f'UNITS_API_DATABASE_URL: cannot connect to {where} as "no_such_role_for_units":'
        ' role "no_such_role_for_units" does not exist',
    )
    database = server.set(database="no_such_database_for_units")
    result = run(
        clean_env(tmp_path, UNITS_API_DATABASE_URL=database.render_as_string(hide_password=False)),
        "worker",
    )
    assert result.returncode == 2
    assert 'database "no_such_database_for_units" does not exist' in result.stderr


def test_a_sqlite_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = f"sqlite:///{tmp_path}/a-file/units.db"
    result = run(clean_env(tmp_path, UNITS_API_DATABASE_URL=url), "migrate")
    assert_refused(
        result,
        f"UNITS_API_DATABASE_URL: cannot open {tmp_path}/a-file/units.db:"
        f" {tmp_path}/a-file is a file, not a folder",
    )
    (tmp_path / "garbage.db").write_bytes(b"this is not a database file")
    url = f"sqlite:///{tmp_path}/garbage.db"
    result = run(clean_env(tmp_path, UNITS_API_DATABASE_URL=url), "serve")
    assert_refused(
        result, f"UNITS_API_DATABASE_URL: cannot open {tmp_path}/garbage.db: file is not a database"
    )


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_server_checks_redis_and_its_files_folder(tmp_path: Path, command: str) -> None:
    port = free_port()
    result = run(clean_env(tmp_path, UNITS_API_REDIS_URL=f"redis://127.0.0.1:{port}/0"), command)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: UNITS_API_REDIS_URL: no answer: "), result.stderr
    assert f"127.0.0.1:{port}" in result.stderr
    (tmp_path / "a-file").write_text("not a folder")
    files = tmp_path / "a-file" / "files"
    result = run(clean_env(tmp_path, UNITS_API_FILES_DIR=str(files)), command)
    assert_refused(result, f"UNITS_API_FILES_DIR: cannot write in {files}: not a directory")


def test_docs_and_redoc_load_only_files_the_server_serves(tmp_path: Path) -> None:
    with served_sqlite(tmp_path / "docs.db") as (base, _key):
        for page, asset_kinds in (("/docs", {".js", ".css", ".png"}), ("/redoc", {".js", ".png"})):
            response = httpx.get(f"{base}{page}")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/html")
            html = response.text
            assert "http://" not in html and "https://" not in html and "//cdn" not in html
            urls = re.findall(r'(?:src|href|spec-url)="([^"]+)"', html)
            urls += re.findall(r"url: '([^']+)'", html)
            assert "/openapi.json" in urls
            assert {Path(url).suffix for url in urls} >= asset_kinds
            for url in urls:
                assert url.startswith("/") and not url.startswith("//"), url
                asset = httpx.get(f"{base}{url}")
                assert asset.status_code == 200, url
                assert len(asset.content) > 1000, url
                if url.endswith(".js"):
                    assert "javascript" in asset.headers["content-type"]
                if url.endswith(".css"):
                    assert asset.headers["content-type"].startswith("text/css")
        assert httpx.get(f"{base}/redoc", params={"any": "query"}).status_code == 200
        missing = httpx.get(f"{base}/docs/assets/nothing.js")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"


# Where a page or a script loads something from: a tag's src or href, a script's src, CSS's url().
LOADED_FROM_ELSEWHERE = re.compile(
    r"""(?:\b(?:src|href)\s*=\s*["']|\bsrc\s*:\s*["'`]|url\(\s*["']?)(?:https?:)?//"""
)


async def test_redoc_loads_nothing_from_another_host(api: Api) -> None:
    page = await api.client.get("/redoc")
    assert page.status_code == 200
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert scripts
    texts = [page.text, *[(await api.client.get(url)).text for url in scripts]]
    for text in texts:
        assert LOADED_FROM_ELSEWHERE.search(text) is None
        assert "cdn.redoc.ly" not in text


def test_migrations_the_user_may_not_run_are_named(tmp_path: Path) -> None:
    role = f"startup_{uuid.uuid4().hex[:12]}"
    with fresh_postgres("startup") as url:
        assert PG_URL
        asyncio.run(admin_sql(PG_URL, f'CREATE ROLE "{role}" LOGIN'))
        try:
            as_role = make_url(url).set(username=role, password=None)
            env = clean_env(tmp_path, UNITS_API_DATABASE_URL=as_role.render_as_string())
            result = run(env, "migrate")
        finally:
            asyncio.run(admin_sql(PG_URL, f'DROP OWNED BY "{role}"', f'DROP ROLE "{role}"'))
    assert_refused(
        result, "UNITS_API_DATABASE_URL: migrations failed: permission denied for schema public"
    )


def test_a_port_in_use_stops_serve_before_it_migrates(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        by_option = run(clean_env(tmp_path), "serve", "--port", str(port))
        by_setting = run(clean_env(tmp_path, UNITS_API_PORT=str(port)), "serve")
    line = f"cannot listen on 127.0.0.1:{port}: address already in use"
    assert_refused(by_option, f"--port: {line}")
    assert_refused(by_setting, f"UNITS_API_PORT: {line}")
    assert not (tmp_path / "start.db").exists()


def test_a_port_in_use_stops_a_worker_s_metrics_before_it_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(clean_env(tmp_path), "worker", "--metrics-port", str(port))
    assert_refused(
        result, f"--metrics-port: cannot listen on 127.0.0.1:{port}: address already in use"
    )


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_metrics_directory_that_cannot_be_written_is_named(tmp_path: Path, command: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    under_a_file = tmp_path / "a-file" / "metrics"
    result = run(clean_env(tmp_path, **{MULTIPROCESS_DIR: str(under_a_file)}), command)
    assert_refused(result, f"{MULTIPROCESS_DIR}: cannot write in {under_a_file}: not a directory")
    assert not (tmp_path / "start.db").exists()


@pytest.mark.parametrize(
    ("required", "line"),
    [
        ("nme,foo", "'nme' is not image or a writable field of a unit; did you mean name?"),
        (
            "name, type ,unitimageurl",
            "'unitimageurl' is not image or a writable field of a unit; did you mean unitImageUrl?",
        ),
        (
            "name,foo",
            "'foo' is not image or a writable field of a unit; the README lists the names",
        ),
    ],
)
def test_publish_requires_names_only_fields_of_a_unit(
    tmp_path: Path, required: str, line: str
) -> None:
    result = run(clean_env(tmp_path, UNITS_API_PUBLISH_REQUIRES=required), "serve")
    assert_refused(result, f"UNITS_API_PUBLISH_REQUIRES: {line} (got {required!r})")
    assert not (tmp_path / "start.db").exists()


def test_publish_requires_takes_every_field_a_unit_is_written_with_or_nothing() -> None:
    written = tuple(info.alias or name for name, info in UnitFields.model_fields.items())
    assert (*written, "image") == PUBLISH_FIELDS
    every = Settings(publish_requires=" , ".join(PUBLISH_FIELDS))
    assert every.readiness == PUBLISH_FIELDS
    assert Settings(publish_requires="").readiness == ()
