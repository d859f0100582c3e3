"""The application factory: middleware, error handlers, routers, lifespan."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi_offline import FastAPIOffline
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Route

from units_api import metrics, tracing
from units_api.auth.access import authenticate
from units_api.auth.router import router as keys_router
from units_api.auth.service import Authenticator
from units_api.background import start_background
from units_api.channels.router import router as channels_router
from units_api.channels.service import ChannelCache
from units_api.config import Settings
from units_api.console import web as console_web
from units_api.console.router import routes as console_routes
from units_api.console.sessions import Sessions
from units_api.context import AppContext
from units_api.db import BUSY as DATABASE_BUSY
from units_api.db import UNAVAILABLE as DATABASE_UNAVAILABLE
from units_api.db import Database, create_engine, disk_fault
from units_api.errors import (
    PROBLEM_CONTENT_TYPE,
    ApiError,
    DatabaseUnavailable,
    InvalidParameter,
    MethodNotAllowed,
    NotFound,
    bound_error,
)
from units_api.events.router import router as events_router
from units_api.exports.router import router as exports_router
from units_api.feeds.router import router as feeds_router
from units_api.http.direct import DirectRoutes, Prefixed
from units_api.http.draining import drain_on_signals
from units_api.http.idempotency import Idempotency
from units_api.http.json import JSONResponse, dumps
from units_api.http.middleware import RequestContextMiddleware
from units_api.http.parameters import DeclaredQuery
from units_api.http.ratelimit import create_limiter
from units_api.http.reads import ReadAgain, RetryReads
from units_api.http.redoc import add_redoc
from units_api.http.tracing import TracingMiddleware
from units_api.imports.router import router as imports_router
from units_api.jobs.storage import open_storage
from units_api.names.router import router as names_router
from units_api.names.service import NameCache
from units_api.openapi import build_openapi
from units_api.ops import router as ops_router
from units_api.process import settle_collector
from units_api.redis_link import RedisLink
from units_api.replicas import unreachable
from units_api.scrape import watch_pools
from units_api.sitemaps.router import router as sitemaps_router
from units_api.units.counting import CountCache
from units_api.units.dashboards import Dashboards
from units_api.units.dashboards import available as dashboards_available
from units_api.units.gathering import Gatherer
from units_api.units.remembering import create_result_cache
from units_api.units.repository import located_by_time
from units_api.units.router import DIRECT_OPERATIONS
from units_api.units.router import router as units_router
from units_api.webhooks.router import router as webhooks_router
from units_api.webhooks.sender import Sender
from units_api.website import router as website_router_module
from units_api.website.router import router as website_router

log = logging.getLogger(__name__)


def problem_response(request: Request, error: ApiError) -> Response:
    if request.url.path.startswith(console_web.PREFIX):  # a page, never a problem's JSON
        return console_web.problem_page(request, error.status)
    state = request.scope.get("state", {})
    body = error.problem(state.get("original_path", request.url.path), state.get("request_id"))
    return Response(
        dumps(body),
        status_code=error.status,
        headers=error.headers,
        media_type=PROBLEM_CONTENT_TYPE,
    )


ROUTERS = (
    exports_router,
    imports_router,
    units_router,
    channels_router,
    website_router,
    feeds_router,
    events_router,
    webhooks_router,
    keys_router,
    names_router,
    ops_router,
    sitemaps_router,
)
API_PREFIX = "/api/"
DOCS_ASSETS = "/docs/assets"


def _method_table(app: FastAPI) -> list[tuple[re.Pattern[str], set[str]]]:
    """Every route's path pattern and methods: a 405's `Allow` is the union for its path."""
    routes = [*app.routes, *(route for router in ROUTERS for route in router.routes)]
    return [
        (route.path_regex, set(route.methods))
        for route in routes
        if isinstance(route, Route) and route.methods
    ]


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for regex, route_methods in request.app.state.method_table:
        if regex.match(request.url.path):
            methods |= route_methods
    return sorted(methods)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return problem_response(request, exc)


async def _key_first(request: Request) -> ApiError | None:
    """Under /api/ the key comes first, as on every call there: without one the answer is a
    401, over its rate a 429, whatever else is wrong with the request."""
    if request.url.path.startswith(API_PREFIX):
        try:
            await authenticate(request)
        except ApiError as error:
            return error
    return None


async def _routing_error(request: Request, status: int) -> ApiError:
    """An unknown path (404) or method (405), after the key."""
    if (error := await _key_first(request)) is not None:
        return error
    if status == 404:
        return NotFound(f"No route for {request.url.path}.")
    allowed = ", ".join(_allowed_methods(request))
    return MethodNotAllowed(
        f"{request.method} is not allowed here; use {allowed}.", headers={"Allow": allowed}
    )


async def _reject_query(request: Request, error: ApiError) -> Response:
    """An unknown or repeated query parameter (http/parameters.py), after the key. Answered
    before the app's exception handlers, so a database out of reach is answered here."""
    try:
        error = await _key_first(request) or error
    except DATABASE_UNAVAILABLE as exc:
        return await _database_error(request, exc)
    return problem_response(request, error)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    error: ApiError
    if exc.status_code in (404, 405):
        error = await _routing_error(request, exc.status_code)
    else:
        error = ApiError(str(exc.detail), headers=exc.headers)
        error.status, error.code, error.title = exc.status_code, "http-error", str(exc.detail)
    return problem_response(request, error)


async def _request_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "header")]
    name = ".".join(loc) or "request"
    return problem_response(request, InvalidParameter(name, str(first.get("msg", "is invalid"))))


async def _database_error(request: Request, exc: Exception) -> Response:
    """The database busy (SQLite) or out of reach: a 503, the detail in the log only; its
    disk full or failing (SQLite): a 507. A read whose connection broke under it is run
    again first, once (`http/reads.py`); a statement's own fault stays the 500 it is."""
    if (storage := disk_fault(exc)) is not None:
        log.warning("database not written", extra={"error": storage.detail})
        return problem_response(request, storage)
    if not isinstance(exc, DATABASE_BUSY) and not unreachable(exc):
        raise exc
    if ReadAgain.allowed(request.scope, exc):
        raise ReadAgain() from exc
    # One line with the cause, not a traceback per request: an outage fails many at once.
    original = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    cause = " ".join(f"{type(original).__name__}: {original}".split())
    log.warning("database unavailable", extra={"error": bound_error(cause, 300)})
    return problem_response(request, DatabaseUnavailable())


def create_context(settings: Settings) -> AppContext:
    bound = settings.db_unavailable_seconds
    db = Database(
        create_engine(
            settings.database_url,
            settings.db_pool_size,
            settings.db_parallel_workers,
            bound=bound,
        ),
        settings.db_parallel_workers,
        bound,
    )
    authenticator = Authenticator(db, settings.auth_cache_seconds)
    redis = RedisLink(settings.redis_url) if settings.redis_url else None
    return AppContext(
        settings=settings,
        db=db,
        redis=redis,
        limiter=create_limiter(redis),
        authenticator=authenticator,
        console=Sessions(db, authenticator, settings.auth_cache_seconds),
        idempotency=Idempotency(db, settings.idempotency_ttl_seconds),
        counts=CountCache(settings.count_cache_size),
        results=create_result_cache(db, settings.result_cache_bytes, redis),
        sender=Sender(settings.webhook_timeout_seconds, settings.webhook_allow_private),
        storage=open_storage(settings.storage_url, settings.files_dir, settings.machine_name),
        jobs_wake=asyncio.Event(),
        names=NameCache(db),
        channels=ChannelCache(db),
        writes=Gatherer(db),
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    tracing.configure_from_environment()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        context = create_context(settings)
        app.state.context = context
        await context.db.open_fast_pool(settings.db_fast_pool_size)
        context.db.open_writer()
        async with context.db.read() as conn:
            context.located_by_time = await located_by_time(conn)
        await context.db.open_replicas(
            settings.replica_urls, settings.replica_max_lag_seconds, settings.db_pool_size
        )
        metrics.init()
        if settings.dashboards_copy and dashboards_available():
            context.dashboards = Dashboards(context.db, settings.dashboards_threads)
            context.dashboards.start()
        background = start_background(context, listen=settings.run_jobs)
        pools = asyncio.create_task(watch_pools(context.db, background.stop))
        settle_collector()
        # Inside uvicorn's start (its signal handlers are set), before it serves.
        undrain = drain_on_signals(settings.shutdown_drain_seconds)
        try:
            yield
        finally:
            undrain()
            await background.close()
            await pools
            if context.dashboards is not None:
                await context.dashboards.close()
            metrics.process_ended()
            tracing.flush()
            await context.sender.close()
            await context.close_shared()
            await context.db.dispose()

    # Swagger UI and ReDoc from the files fastapi-offline ships (ReDoc through http/redoc.py,
    # which leaves out its logo from a CDN): the pages work offline.
    app = FastAPIOffline(
        title="Units API",
        lifespan=lifespan,
        redirect_slashes=False,
        default_response_class=JSONResponse,
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
        openapi_url="/openapi.json",
        swagger_ui_parameters={"validatorUrl": None},
        # The service's own spans (tracing.py) cover the direct routes too; FastAPI's would
        # double them, and its check for them costs every request.
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    add_redoc(app, "/redoc", DOCS_ASSETS)
    for router in ROUTERS:
        app.include_router(router)
    app.router.routes.insert(0, Prefixed(console_web.PREFIX, console_routes))
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    for unavailable in DATABASE_UNAVAILABLE:
        app.add_exception_handler(unavailable, _database_error)
    api_routes = [route for router in ROUTERS for route in router.routes]
    every_route = [*app.routes, *console_routes, *api_routes]
    app.add_middleware(
        DirectRoutes,
        routes=api_routes,
        operations=(*DIRECT_OPERATIONS, *website_router_module.DIRECT_OPERATIONS),
        handlers=app.exception_handlers,
    )
    app.add_middleware(
        DeclaredQuery,
        routes=api_routes,
        reject=_reject_query,
    )
    app.add_middleware(RetryReads)
    app.add_middleware(
        RequestContextMiddleware,
        log_requests=settings.access_log,
        count_requests=settings.request_metrics,
        routes=every_route,
        pages=website_router_module.error_page,
    )
    if tracing.on:  # outside every other layer: a span per request (tracing.py)
        app.add_middleware(
            TracingMiddleware,
            routes=every_route,
        )

    def openapi() -> dict[str, Any]:
        return build_openapi(app)

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return JSONResponse(
            {"name": "Units API", "openapi": "/openapi.json", "docs": "/docs", "redoc": "/redoc"}
        )

    app.state.method_table = _method_table(app)
    return app
