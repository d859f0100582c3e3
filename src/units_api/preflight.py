"""Checks a command makes before it starts: the database, Redis, the files directory, the
metrics directory and the read replicas of its settings answer, and traces asked for can be
sent. Each failure is a `SettingError`, one line that names the setting."""

from __future__ import annotations

import asyncio
import errno
import getpass
import os
import socket
import sqlite3
import tempfile
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import URL

from units_api import dburls, tracing
from units_api.config import Settings, database_url
from units_api.errors import SettingError
from units_api.metrics import MULTIPROCESS_DIR
from units_api.replicas import refuse_unusable

# How long a check waits for a server before calling it out of reach.
CONNECT_TIMEOUT = 5.0
DATABASE = "UNITS_API_DATABASE_URL"
REDIS = "UNITS_API_REDIS_URL"
FILES = "UNITS_API_FILES_DIR"
STORAGE = "UNITS_API_STORAGE_URL"


def check_database(settings: Settings) -> None:
    """The database opens: a SQLite file opens (or, when there is none yet, can be made in
    its folder), or a PostgreSQL server takes a connection as the URL says."""
    url = database_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        _open_sqlite(url)
    else:
        asyncio.run(_connect_postgres(url))


def check_services(settings: Settings) -> None:
    """What a server or worker needs besides the database: Redis answers, files and (when
    `PROMETHEUS_MULTIPROC_DIR` is set) metrics can be written, the object store's client is
    installed."""
    if settings.redis_url:
        asyncio.run(_ping_redis(settings.redis_url))
    _check_folder(FILES, settings.files_dir)
    if metrics_dir := os.environ.get(MULTIPROCESS_DIR):
        _check_folder(MULTIPROCESS_DIR, metrics_dir)
    if settings.storage_url:
        try:
            import obstore  # noqa: F401
        except ImportError:
            message = f"{STORAGE}: an s3:// store needs the s3 extra: pip install 'units-api[s3]'"
            raise SettingError(STORAGE, message) from None


def check_replicas(settings: Settings) -> None:
    """Each read replica URL can serve as one (see `replicas.refuse_unusable`)."""
    if settings.replica_urls:
        asyncio.run(refuse_unusable(settings.database_url, settings.replica_urls))


def check_tracing(environ: Mapping[str, str] = os.environ) -> None:
    """Traces asked for need the OpenTelemetry SDK and an exporter installed for each name."""
    if not tracing.wanted(environ):
        return
    name = tracing.EXPORTER
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise SettingError(
            name, f"{name}: traces need the OpenTelemetry SDK: pip install 'units-api[otel]'"
        ) from None
    for exporter, entry in tracing.exporter_entries(environ):
        if not list(entry_points(group="opentelemetry_traces_exporter", name=entry)):
            raise SettingError(name, f"{name}: no exporter {exporter!r} is installed")


def check_listening(host: str, port: int, host_name: str, port_name: str) -> None:
    """The server can listen on `host`:`port` (named as the caller set them: a setting or an
    option), so a port in use stops it before it migrates or prints anything."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds
    try:
        with socket.socket(family) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        name = port_name if exc.errno == errno.EADDRINUSE else host_name
        message = f"{name}: cannot listen on {host}:{port}: {_reason(exc)}"
        raise SettingError(name, message) from exc


def _check_folder(name: str, folder: str) -> None:
    try:
        _writable(Path(folder))
    except OSError as exc:
        raise SettingError(name, f"{name}: cannot write in {folder}: {_reason(exc)}") from exc


def _open_sqlite(url: URL) -> None:
    path = url.database
    if not path or path == ":memory:":
        return
    try:
        if not Path(path).exists():
            _writable(Path(path).parent)  # the file is made by the command that needs it
            return
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=rw", uri=True)
        try:
            conn.execute("PRAGMA schema_version")
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        raise SettingError(DATABASE, f"{DATABASE}: cannot open {path}: {_reason(exc)}") from exc


async def _connect_postgres(url: URL) -> None:
    dsn = dburls.driver_dsn(url)
    user = url.username or getpass.getuser()
    where = dburls.where(url)
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        message = f'{DATABASE}: cannot connect to {where} as "{user}": {_reason(exc)}'
        raise SettingError(DATABASE, message) from exc
    await conn.close()


async def _ping_redis(url: str) -> None:
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    client = Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT
    )
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise SettingError(REDIS, f"{REDIS}: no answer: {_reason(exc)}") from exc
    finally:
        await client.aclose()


def _writable(folder: Path) -> None:
    """`folder` exists (made if missing) and a file can be made in it; else OSError."""
    _make_folder(folder)
    with tempfile.TemporaryFile(dir=folder):
        pass


def _make_folder(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(0, f"{path} is a file, not a folder") from None


def _reason(exc: BaseException) -> str:
    """An exception as the end of a one-line message."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running, on that port?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:1].lower() + text[1:]
