"""The routes every kind of job shares: the list of its jobs, one job, and the answer to a
request that queued one. A kind's router adds them beside its own (`add_job_routes`)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Path, Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from units_api.db import Database
from units_api.http import docs
from units_api.http.docs import problems, success
from units_api.http.json import JSONResponse
from units_api.http.paging import Limit
from units_api.http.paths import ID
from units_api.jobs import queue, service
from units_api.jobs.kinds import JobKind

JOBS_LIMIT = Limit(default=50, maximum=200)
JobId = Annotated[uuid.UUID, Path(description="The job's id (a UUID).")]


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks for jobs, once authorized: the database to read them in, and whose jobs they
    may see (an API key's id; None: every job)."""

    db: Database
    owner: uuid.UUID | None


# Authorizes a request to see a kind's jobs (raising if it may not), and says whose it sees.
Authorize = Callable[[Request], Awaitable[Viewer]]


def job_location(kind: str, job_id: object) -> str:
    return f"/api/v2/units/{kind}s/{job_id}"


async def queued(conn: AsyncConnection, kind: JobKind, job_id: uuid.UUID) -> Response:
    """The answer to a request that queued the job `job_id`: the job, and where to follow it."""
    row = await queue.get(conn, job_id)
    assert row is not None
    location = job_location(kind.name, job_id)
    return JSONResponse(service.render(row, kind), status_code=202, headers={"Location": location})


def add_job_routes(
    router: APIRouter, job: JobKind, authorize: Authorize, listed: str, shown: str | None = None
) -> None:
    """Add to `router` the list of the kind `job`'s jobs and the read of one; `listed` and
    `shown` describe them."""
    kind = job.name

    async def list_jobs(request: Request) -> Response:
        viewer = await authorize(request)
        size = JOBS_LIMIT.parse(request.query_params.get("limit"))
        cursor = request.query_params.get("cursor")
        async with viewer.db.read() as conn:
            page = await service.list_page(conn, job, viewer.owner, size, cursor)
        return JSONResponse(page)

    async def get_job(request: Request, id: JobId) -> Response:
        viewer = await authorize(request)
        async with viewer.db.read() as conn:
            row = await service.get(conn, id, viewer.owner, kind)
        return JSONResponse(service.render(row, job))

    name = kind.capitalize()
    router.add_api_route(
        "",
        list_jobs,
        methods=["GET"],
        name=f"list_{kind}s",
        operation_id=f"list{name}s",
        summary=f"List {kind}s",
        description=listed,
        responses={**success(200, "JobPage", f"A page of {kind} jobs"), **problems(400)},
        openapi_extra={"parameters": [docs.limit(JOBS_LIMIT), docs.CURSOR]},
    )
    router.add_api_route(
        f"/{ID}",
        get_job,
        methods=["GET"],
        name=f"get_{kind}",
        operation_id=f"get{name}",
        summary=f"Read {'an' if kind[0] in 'aeiou' else 'a'} {kind} job",
        description=shown,
        responses={**success(200, "Job", "The job"), **problems(404)},
    )
