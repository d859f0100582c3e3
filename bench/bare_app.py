"""The bare baseline of the write benchmark: FastAPI and an asyncpg pool, nothing else.

The same routes and documents as the service, with none of its work: no authentication,
validation, history, events, search words or counts. POST inserts the body as it came, GET
returns a stored unit's document, PATCH merges one level of JSON into it in a transaction.

    BARE_DATABASE_URL=postgresql://... uvicorn bare_app:app --port 8001
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

CREATE_TABLE = "CREATE TABLE IF NOT EXISTS bare_units (id uuid PRIMARY KEY, doc text NOT NULL)"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    pool = await asyncpg.create_pool(os.environ["BARE_DATABASE_URL"], min_size=20, max_size=20)
    await pool.execute(CREATE_TABLE)
    app.state.pool = pool
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


@app.post("/api/v2/units/")
async def create(request: Request) -> Response:
    body = await request.body()
    await request.app.state.pool.execute(
        "INSERT INTO bare_units (id, doc) VALUES ($1, $2)", uuid.uuid4(), body.decode()
    )
    return Response(body, status_code=201, media_type="application/json")


@app.get("/api/v2/units/{unit_id}")
async def read(unit_id: uuid.UUID, request: Request) -> Response:
    doc = await request.app.state.pool.fetchval("SELECT doc FROM units WHERE id = $1", unit_id)
    if doc is None:
        return Response(status_code=404)
    return Response(doc, media_type="application/json")


@app.patch("/api/v2/units/{unit_id}")
async def patch(unit_id: uuid.UUID, request: Request) -> Response:
    changes = orjson.loads(await request.body())
    async with request.app.state.pool.acquire() as conn, conn.transaction():
        doc = await conn.fetchval("SELECT doc FROM units WHERE id = $1 FOR UPDATE", unit_id)
        if doc is None:
            return Response(status_code=404)
        merged = orjson.dumps({**orjson.loads(doc), **changes}).decode()
        await conn.execute("UPDATE units SET doc = $2 WHERE id = $1", unit_id, merged)
    return Response(merged, media_type="application/json")
