"""The `units-api` command: serve, migrate, keys, seed."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

import orjson
import typer
from pydantic import ValidationError

from units_api import migrate as migrations
from units_api.auth import repository as keys_repository
from units_api.auth import service as keys_service
from units_api.auth.schemas import ApiKeyCreate
from units_api.config import Settings
from units_api.db import Database, create_engine, utcnow
from units_api.errors import ValidationFailed
from units_api.logs import configure_logging
from units_api.validation import pydantic_errors

app = typer.Typer(
    help="Units API: the inventory service for real-estate units.", no_args_is_help=True
)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

T = TypeVar("T")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _run(settings: Settings, work: Callable[[Database], Awaitable[T]]) -> T:
    async def main() -> T:
        db = Database(create_engine(settings.database_url, pool_size=2))
        try:
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(main())


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


@app.command()
def migrate() -> None:
    """Apply pending database migrations."""
    settings = Settings()
    migrations.upgrade(settings.database_url)
    typer.echo(f"database at revision {migrations.head_revision()}")


def _bootstrap(settings: Settings) -> None:
    secret = _run(settings, keys_service.bootstrap_admin_key)
    if secret:
        typer.echo("No API key existed, so an admin key was created. It is shown only once:")
        typer.echo(secret)
        sys.stdout.flush()


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes.")] = None,
) -> None:
    """Serve the API (applies pending migrations first unless UNITS_API_AUTO_MIGRATE=false)."""
    import uvicorn

    settings = Settings()
    configure_logging(settings.log_level)
    if settings.auto_migrate:
        migrations.upgrade(settings.database_url)
    if settings.is_sqlite and settings.bootstrap_admin_key:
        _bootstrap(settings)
    uvicorn.run(
        "units_api.app:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        workers=workers or settings.workers,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        http="httptools",
        log_config=None,
        access_log=False,
        server_header=False,
    )


@app.command()
def worker() -> None:
    """Run the background work outside the server: scheduled publications and reservation
    expiry, housekeeping, and the event worker (feed numbering, webhook delivery).

    Start servers with UNITS_API_RUN_JOBS=false to leave it to workers; several workers may
    run against one PostgreSQL.
    """
    from units_api.app import create_context
    from units_api.jobs.runner import start_background

    settings = Settings()
    configure_logging(settings.log_level)

    async def main() -> None:
        context = create_context(settings)
        background = start_background(context, listen=True)
        try:
            await background.wait()
        finally:
            await background.close()
            await context.sender.close()
            await context.limiter.close()
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

    try:
        created = _run(Settings(), work)
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

    for record in _run(Settings(), work):
        typer.echo(orjson.dumps(record).decode())


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke a key; calls with it answer 401 from then on."""

    async def work(db: Database) -> None:
        parsed = keys_service.parse_key_id(key_id)
        async with db.transaction() as conn:
            await keys_service.get_key(conn, parsed)
            await keys_repository.revoke(conn, parsed, utcnow())

    try:
        _run(Settings(), work)
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

    settings = Settings()
    if settings.auto_migrate:
        migrations.upgrade(settings.database_url)

    async def work(db: Database) -> int:
        return await seed_units(db, count, seed)

    started = datetime.now(UTC)
    created = _run(settings, work)
    seconds = (datetime.now(UTC) - started).total_seconds()
    typer.echo(f"seeded {created} units in {seconds:.1f}s")
