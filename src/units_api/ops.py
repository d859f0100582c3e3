"""Operational endpoints, open without a key: liveness, readiness, metrics."""

from __future__ import annotations

import hmac
import logging
from asyncio import Event, create_task, timeout
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from sqlalchemy import text
from starlette.responses import PlainTextResponse, Response

from units_api import __version__
from units_api.context import AppContext, app_context
from units_api.errors import (
    PROBLEM_CONTENT_TYPE,
    ApiError,
    DatabaseUnavailable,
    ServiceUnavailable,
    Unauthorized,
)
from units_api.http.docs import ref
from units_api.http.draining import draining
from units_api.http.json import JSONResponse, dumps
from units_api.metrics import CONTENT_TYPE
from units_api.migrate import current_revision, head_revision
from units_api.scrape import scrape

router = APIRouter(tags=["operations"])
log = logging.getLogger(__name__)


def _json(description: str, **properties: str) -> dict[int | str, dict[str, Any]]:
    schema = {
        "type": "object",
        "required": list(properties),
        "properties": {name: {"type": kind} for name, kind in properties.items()},
    }
    return {200: {"description": description, "content": {"application/json": {"schema": schema}}}}


@router.get(
    "/healthz",
    operation_id="getHealth",
    summary="Liveness: the process answers",
    responses=_json("The process is alive", status="string", version="string"),
)
async def healthz() -> Response:
    return JSONResponse({"status": "ok", "version": __version__})


@router.get(
    "/readyz",
    operation_id="getReadiness",
    summary="Readiness: the database answers and its schema is current, files can be written",
    description=(
        "200 when the database answers within `UNITS_API_DB_UNAVAILABLE_SECONDS`, its schema "
        "is current and the local files directory (UNITS_API_FILES_DIR: exports, uploaded "
        "imports, and the files being made for an object store) can be written; otherwise a "
        "503 problem that names which (the database with `Retry-After`). `/healthz` stays "
        "200 meanwhile: the process is alive.\n\n"
        "A server asked to stop (SIGTERM or SIGINT) with `UNITS_API_SHUTDOWN_DRAIN_SECONDS` "
        "above 0 answers 503 here at once, for that long, while it goes on serving every other "
        "request (each answer with `Connection: close`): a proxy's health check on this path "
        "takes it out of rotation before it stops accepting connections."
    ),
    responses={
        **_json("Ready", status="string", database="string", migration="string"),
        503: {
            "description": "Not ready",
            "content": {"application/problem+json": {"schema": ref("Problem")}},
        },
    },
)
async def readyz(request: Request) -> Response:
    if draining():
        raise ServiceUnavailable("The server is stopping: send requests to another one.")
    context = app_context(request)
    try:
        # Within the bound in all, waiting for a connection included.
        async with timeout(context.db.bound), context.db.read() as conn:
            await conn.execute(text("SELECT 1"))
            revision = await current_revision(conn)
    except Exception as exc:
        log.warning("readiness: the database is unreachable", exc_info=exc)
        raise ServiceUnavailable(
            "The database is unreachable.", headers={"Retry-After": DatabaseUnavailable.RETRY_AFTER}
        ) from None
    head = head_revision()
    if revision != head:
        raise ServiceUnavailable(f"The database schema is at {revision}, expected {head}.")
    fault = await anyio.to_thread.run_sync(context.storage.check)
    if fault is not None:
        raise ServiceUnavailable(f"The files directory cannot be written: {fault}")
    return JSONResponse({"status": "ready", "database": context.db.dialect, "migration": revision})


@router.get(
    "/metrics",
    operation_id="getMetrics",
    summary="Prometheus metrics",
    description=(
        "The server's series in the Prometheus text format, summed over all its processes. "
        "Open without a key unless `UNITS_API_METRICS_KEY` is set; then it takes "
        "`Authorization: Bearer <that value>`."
    ),
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": "Prometheus text format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        401: {
            "description": "UNITS_API_METRICS_KEY is set and was not given",
            "content": {"application/problem+json": {"schema": ref("Problem")}},
        },
    },
)
async def metrics(request: Request) -> Response:
    context = app_context(request)
    key = context.settings.metrics_key
    if key is not None:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {key.get_secret_value()}".encode()):
            raise Unauthorized("GET /metrics takes the metrics key: Authorization: Bearer <key>.")
    return Response(await scrape(context.db), media_type=CONTENT_TYPE)


def operations_app(context: AppContext) -> FastAPI:
    """`/healthz`, `/readyz` and `/metrics` alone, for a process that serves no API
    (`units-api worker --metrics-port`)."""

    async def problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        body = dumps(exc.problem(request.url.path, None))
        return Response(body, exc.status, exc.headers, media_type=PROBLEM_CONTENT_TYPE)

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router)
    app.add_exception_handler(ApiError, problem)
    app.state.context = context
    return app


async def serve_operations(context: AppContext, host: str, port: int, stop: Event) -> None:
    """Serve `operations_app` on `host`:`port` until `stop`."""
    import uvicorn

    config = uvicorn.Config(
        operations_app(context),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    server = uvicorn.Server(config)

    async def stop_when_asked() -> None:
        await stop.wait()
        server.should_exit = True

    watcher = create_task(stop_when_asked())
    try:
        await server.serve()
    finally:
        watcher.cancel()
