"""The `units-api` command: serve, worker, migrate, keys, seed, export, import."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypeVar

import orjson
import typer
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError

from units_api import migrate as migrations
from units_api import tracing
from units_api.auth import repository as keys_repository
from units_api.auth import service as keys_service
from units_api.auth.schemas import ApiKeyCreate
from units_api.clock import utcnow
from units_api.config import Settings, load_settings
from units_api.db import Database, create_engine
from units_api.errors import ApiError, SettingError, ValidationFailed
from units_api.logs import configure_logging, uvicorn_config
from units_api.metrics import prepare_directory
from units_api.preflight import (
    DATABASE,
    check_database,
    check_listening,
    check_replicas,
    check_services,
    check_tracing,
)
from units_api.process import settle_collector
from units_api.validation import pydantic_errors

app = typer.Typer(
    help="Units API: the inventory service for real-estate units.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

T = TypeVar("T")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class _Options:
    debug: bool = False


OPTIONS = _Options()


def main() -> None:
    """The `units-api` command. A bad setting ends it with one line naming the setting and
    exit code 2 (with `--debug`, after its traceback)."""
    try:
        app()
    except SettingError as exc:
        if OPTIONS.debug:
            traceback.print_exc()
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"units-api {metadata.version('units-api')}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of a start-up error.")
    ] = False,
) -> None:
    OPTIONS.debug = debug


def _settings(*, services: bool = False) -> Settings:
    """The environment's settings, checked, and the database (with `services`: Redis, the
    files directory and the read replicas too) answering; else a SettingError."""
    settings = load_settings()
    check_tracing()
    check_database(settings)
    if services:
        check_services(settings)
        check_replicas(settings)
    return settings


def _migrate(settings: Settings) -> None:
    try:
        migrations.upgrade(settings.database_url)
    except DBAPIError as exc:
        reason = " ".join(str(exc.orig or exc).split())
        raise SettingError(DATABASE, f"{DATABASE}: migrations failed: {reason}") from exc


def _run(settings: Settings, work: Callable[[Database], Awaitable[T]]) -> T:
    async def main() -> T:
        db = Database(create_engine(settings.database_url, pool_size=2))
        try:
            return await work(db)
        finally:
            await db.dispose()

    settle_collector()
    return asyncio.run(main())


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


@app.command()
def migrate() -> None:
    """Apply pending database migrations."""
    settings = _settings()
    _migrate(settings)
    typer.echo(f"database at revision {migrations.head_revision()}")


def _bootstrap(settings: Settings) -> None:
    secret = _run(settings, keys_service.bootstrap_admin_key)
    if secret:
        typer.echo("No API key existed, so an admin key was created. It is shown only once:")
        typer.echo(secret)
        sys.stdout.flush()


def _stopped(number: int, frame: object) -> None:
    raise SystemExit(0)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port to listen on.")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Worker processes.")] = None,
) -> None:
    """Serve the API (applies pending migrations first unless UNITS_API_AUTO_MIGRATE=false)."""
    import uvicorn

    from units_api.http.clients import TimedHttpToolsProtocol

    settings = _settings(services=True)
    check_listening(
        host or settings.host,
        port or settings.port,
        "--host" if host else "UNITS_API_HOST",
        "--port" if port else "UNITS_API_PORT",
    )
    configure_logging(settings.log_level)
    if settings.auto_migrate:
        _migrate(settings)
    if settings.is_sqlite and settings.bootstrap_admin_key:
        _bootstrap(settings)
    # Before any process imports prometheus-client: the directory its processes count in.
    prepare_directory()
    # uvicorn drains and shuts down on SIGTERM or SIGINT, then raises the signal again: that
    # second one is a clean end (exit 0), not a death by signal.
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, _stopped)
    uvicorn.run(
        "units_api.app:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        workers=workers or settings.workers,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        http=TimedHttpToolsProtocol,  # deadlines for slow and idle clients
        log_config=uvicorn_config(settings.log_level),  # applied in every worker process
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )


@app.command()
def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Serve /metrics, /healthz and /readyz on this port."),
    ] = None,
) -> None:
    """Run the background work outside the server: scheduled publications and reservation
    expiry, housekeeping, the event worker (feed numbering, webhook delivery), and jobs
    (exports, imports).

    Start servers with UNITS_API_RUN_JOBS=false to leave it to workers; several workers may
    run against one PostgreSQL.
    """
    from units_api import metrics
    from units_api.app import create_context
    from units_api.background import start_background
    from units_api.ops import serve_operations

    settings = _settings(services=True)
    if metrics_port:
        check_listening(settings.host, metrics_port, "UNITS_API_HOST", "--metrics-port")
    configure_logging(settings.log_level)
    tracing.configure_from_environment()

    async def main() -> None:
        context = create_context(settings)
        metrics.init()
        background = start_background(context, listen=True)
        # SIGTERM or SIGINT: the loops stop between steps, jobs and deliveries under way
        # are given back for another process, and the command exits 0.
        running = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(number, background.stop.set)
        if metrics_port:
            served = serve_operations(context, settings.host, metrics_port, background.stop)
            background.tasks.append(asyncio.create_task(served))
        try:
            await background.wait()
        finally:
            await background.close()
            await context.sender.close()
            await context.close_shared()
            await context.db.dispose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def _expires_at(expires_in: str | None) -> str | None:
    if expires_in is None:
        return None
    match = _DURATION.match(expires_in.strip())
    if not match:
        raise _fail("--expires-in takes a duration such as 90s, 15m, 12h or 30d")
    delta = timedelta(seconds=int(match.group(1)) * _SECONDS[match.group(2)])
    return (datetime.now(UTC) + delta).isoformat().replace("+00:00", "Z")


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="A name to recognise the key by.")],
    scope: Annotated[list[str], typer.Option(help="A scope; repeat for several.")],
    policy: Annotated[str | None, typer.Option(help="A filter the key is bound to.")] = None,
    expires_in: Annotated[str | None, typer.Option(help="e.g. 90s, 15m, 12h, 30d.")] = None,
    rate_limit: Annotated[str | None, typer.Option(help="e.g. 600/minute.")] = None,
) -> None:
    """Issue a key. The first line printed is the secret alone; the record follows."""
    try:
        spec = ApiKeyCreate(
            name=name,
            scopes=scope,
            policy=policy,
            expiresAt=_expires_at(expires_in),
            rateLimit=rate_limit,
        )
    except ValidationError as exc:
        raise _fail("; ".join(f"{f}: {m}" for f, m in pydantic_errors(exc))) from None

    async def work(db: Database) -> dict[str, Any]:
        async with db.transaction() as conn:
            return await keys_service.create_key(conn, spec)

    settings = _settings()
    try:
        created = _run(settings, work)
    except ValidationFailed as exc:
        raise _fail("; ".join(f"{e['field']}: {e['message']}" for e in exc.errors)) from None
    typer.echo(created.pop("key"))
    typer.echo(orjson.dumps(created, option=orjson.OPT_INDENT_2).decode())


@keys_app.command("list")
def keys_list() -> None:
    """List every key (never the secrets)."""

    async def work(db: Database) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        after = None
        async with db.read() as conn:
            while page := await keys_repository.page(conn, after, 500):
                rows += [keys_service.render_key(row) for row in page]
                after = page[-1]["id"]
        return rows

    for record in _run(_settings(), work):
        typer.echo(orjson.dumps(record).decode())


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke a key; calls with it answer 401 from then on."""

    async def work(db: Database) -> None:
        parsed = keys_service.parse_key_id(key_id)
        async with db.transaction() as conn:
            await keys_service.get_key(conn, parsed)
            await keys_repository.revoke(conn, parsed, utcnow())

    settings = _settings()
    try:
        _run(settings, work)
    except Exception as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"revoked {key_id}")


@app.command()
def seed(
    count: Annotated[int, typer.Option(min=1, help="How many units to create.")] = 100,
    seed: Annotated[int | None, typer.Option(help="Random seed, for reproducible data.")] = None,
) -> None:
    """Create realistic bilingual units (with history and events)."""
    from units_api.units.seeding import seed_units

    settings = _settings()
    if settings.auto_migrate:
        _migrate(settings)

    async def work(db: Database) -> int:
        return await seed_units(db, count, seed)

    started = datetime.now(UTC)
    created = _run(settings, work)
    seconds = (datetime.now(UTC) - started).total_seconds()
    typer.echo(f"seeded {created} units in {seconds:.1f}s")


class _Bar:
    """A rich progress bar that a job's body reports to (its progress and checkpoints)."""

    def __init__(self, progress: Any, label: str) -> None:
        self._progress = progress
        self._task = progress.add_task(label, total=None)

    async def progress(self, done: int, total: int | None) -> None:
        self._progress.update(self._task, completed=done, total=total)

    async def checkpoint(self, conn: Any, state: Any, done: int, total: int | None) -> None:
        await self.progress(done, total)


def _progress_bar() -> Any:
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        transient=False,
    )


@app.command()
def export(
    format: Annotated[str, typer.Option("--format", help="csv, jsonl, xlsx or parquet.")],
    filter: Annotated[str | None, typer.Option(help="An RSQL filter, as the list's p.")] = None,
    q: Annotated[str | None, typer.Option(help="Search text, as the list's q.")] = None,
    fields: Annotated[
        str | None, typer.Option(help="A comma list of fields (id is always first).")
    ] = None,
    compression: Annotated[str, typer.Option(help="none, or gzip (csv, jsonl).")] = "none",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="The file (default units-<time>.<ext>).")
    ] = None,
) -> None:
    """Export units to a file, as POST /api/v2/units/exports does (one snapshot, oldest
    first), with a progress bar."""
    from units_api.exports.formats import ExportError, file_extension
    from units_api.exports.schemas import ExportCreate
    from units_api.exports.service import plan, write_export

    try:
        spec = ExportCreate(
            format=format,
            filter=filter,
            q=q,
            fields=[name.strip() for name in fields.split(",")] if fields else None,
            compression=compression,
        )
        params = plan(spec, None)
    except ValidationError as exc:
        raise _fail("; ".join(f"{f}: {m}" for f, m in pydantic_errors(exc))) from None
    except ApiError as exc:
        raise _fail(_api_error_text(exc)) from None
    settings = _settings()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    target = output or Path(f"units-{stamp}.{file_extension(params.format, params.compression)}")
    partial = target.with_name(target.name + ".part")
    started = datetime.now(UTC)
    with _progress_bar() as bar:
        tracker = _Bar(bar, f"export {params.format}")
        try:
            rows, size = _run(
                settings, lambda db: write_export(db, params, partial, tracker.progress)
            )
        except ExportError as exc:
            partial.unlink(missing_ok=True)
            raise _fail(str(exc)) from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    partial.replace(target)
    seconds = (datetime.now(UTC) - started).total_seconds()
    typer.echo(f"exported {rows} units to {target} ({size:,} bytes) in {seconds:.1f}s")


@app.command("import")
def import_file(
    file: Annotated[Path, typer.Argument(help="A csv, jsonl or xlsx file.", exists=True)],
    mode: Annotated[str, typer.Option(help="create, or upsert (by id).")] = "create",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check every row; write nothing.")] = (
        False
    ),
    atomic: Annotated[
        bool, typer.Option("--atomic", help="Write every row or, if any fails, none.")
    ] = False,
    format: Annotated[
        str | None, typer.Option(help="csv, jsonl or xlsx (default: by extension).")
    ] = None,
) -> None:
    """Import units from a file, as POST /api/v2/units/imports does, with a progress bar and a
    summary. Exits with 1 when a row failed (failing rows are listed)."""
    from units_api.imports.readers import FORMATS, format_of
    from units_api.imports.service import MODES, ImportParams, Report, run_import
    from units_api.jobs.work import JobFailed

    fmt = format or format_of(file.name)
    if fmt not in FORMATS:
        raise _fail(f"give --format {' or '.join(FORMATS)} (the file name does not say)")
    if mode not in MODES:
        raise _fail(f"--mode is {' or '.join(MODES)}")
    settings = _settings()
    if settings.auto_migrate:
        _migrate(settings)
    actor = {"type": "system", "id": None, "name": "units-api import"}
    params = ImportParams(fmt, mode, dry_run, atomic, str(file), None, actor)
    started = datetime.now(UTC)
    with _progress_bar() as bar:
        tracker = _Bar(bar, f"import {file.name}")

        async def work(db: Database) -> Report:
            return await run_import(
                db,
                params,
                file,
                settings.vocabularies,
                tracker,
                max_expanded=settings.max_import_expanded_bytes,
            )

        try:
            report = _run(settings, work).result()
            failure = None
        except JobFailed as exc:
            report = orjson.loads(exc.values.get("result", "{}"))
            failure = str(exc)
    seconds = (datetime.now(UTC) - started).total_seconds()
    for error in (report.get("errors") or [])[:_SHOWN_ERRORS]:
        typer.echo(f"row {error['row']}: {error['field'] or '(row)'}: {error['message']}", err=True)
    if failure:
        raise _fail(failure)
    counts = (
        f"{report['rowsCreated']} created, {report['rowsUpdated']} updated,"
        f" {report['rowsUnchanged']} unchanged"
    )
    if dry_run:
        summary = f"{report['rowsOk']} valid (dry run: nothing written), {report['rowsFailed']}"
        summary += f" failed; would be {counts}"
    else:
        summary = f"{counts}, {report['rowsFailed']} failed"
    typer.echo(f"{report['rowsTotal']} rows: {summary} in {seconds:.1f}s")
    if report["rowsFailed"]:
        raise typer.Exit(code=1)


_SHOWN_ERRORS = 20


def _api_error_text(exc: ApiError) -> str:
    errors = exc.extra.get("errors")
    if errors:
        return "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return exc.detail
