"""Operational endpoints, open without a key: liveness, readiness, metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text
from starlette.responses import PlainTextResponse, Response

from units_api import __version__
from units_api.context import app_context
from units_api.errors import ServiceUnavailable
from units_api.http.docs import ref
from units_api.http.json import JSONResponse
from units_api.metrics import render_metrics
from units_api.migrate import current_revision, head_revision

router = APIRouter(tags=["operations"])


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
    summary="Readiness: the database answers and its schema is current",
    responses={
        **_json("Ready", status="string", database="string", migration="string"),
        503: {
            "description": "Not ready",
            "content": {"application/problem+json": {"schema": ref("Problem")}},
        },
    },
)
async def readyz(request: Request) -> Response:
    context = app_context(request)
    try:
        async with context.db.read() as conn:
            await conn.execute(text("SELECT 1"))
            revision = await current_revision(conn)
    except Exception as exc:
        raise ServiceUnavailable(f"The database is unreachable: {type(exc).__name__}.") from None
    head = head_revision()
    if revision != head:
        raise ServiceUnavailable(f"The database schema is at {revision}, expected {head}.")
    return JSONResponse({"status": "ready", "database": context.db.dialect, "migration": revision})


@router.get(
    "/metrics",
    operation_id="getMetrics",
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": "Prometheus text format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def metrics() -> Response:
    return PlainTextResponse(render_metrics(), media_type="text/plain; version=0.0.4")
