"""What search engines read (section 17): robots.txt, the sitemap index and its files, and
the IndexNow key file. Public (no key), outside /api/ and, like the console, outside the API
document."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from units_api.channels.router import public_base
from units_api.context import app_context
from units_api.errors import NotFound
from units_api.sitemaps import service

router = APIRouter(include_in_schema=False)

XML = "application/xml; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
CACHE = "public, max-age=60"
# gzip's level: the fastest; the sitemaps' repeated markup still shrinks about 18 times.
GZIP_LEVEL = 1


def _gzip_asked(request: Request) -> bool:
    """Whether Accept-Encoding takes gzip (or anything, `*`) with a weight above 0."""
    for part in request.headers.get("accept-encoding", "").split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() not in ("gzip", "*"):
            continue
        weight = params.strip().lower().removeprefix("q=").strip() if params else "1"
        try:
            return float(weight) > 0
        except ValueError:
            return False
    return False


async def _gzipped(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    async for chunk in body:
        packed = packer.compress(chunk)
        if packed:
            yield packed
    yield packer.flush()


def _fresh(request: Request, tag: str) -> bool:
    """If-None-Match names `tag` (compared weakly), or is `*`."""
    header = request.headers.get("if-none-match")
    if header is None:
        return False
    tags = {part.strip().removeprefix("W/") for part in header.split(",")}
    return "*" in tags or tag.removeprefix("W/") in tags


def _xml(request: Request, body: AsyncIterator[bytes], tag: str) -> Response:
    headers = {"ETag": tag, "Cache-Control": CACHE, "Vary": "Accept-Encoding"}
    if _fresh(request, tag):
        return Response(status_code=304, headers=headers)
    if _gzip_asked(request):
        headers["Content-Encoding"] = "gzip"
        body = _gzipped(body)
    return StreamingResponse(body, media_type=XML, headers=headers)


@router.api_route("/robots.txt", methods=["GET", "HEAD"])
async def robots(request: Request) -> Response:
    text = service.robots(public_base(request))
    return Response(text, media_type=TEXT, headers={"Cache-Control": CACHE})


@router.get(service.INDEX_PATH)
async def sitemap_index(request: Request) -> Response:
    context = app_context(request)
    async with context.db.read() as conn:
        plan = await service.plan(conn, public_base(request))
    return _xml(request, service.index_body(context.db, plan), plan.tag("index"))


@router.get(service.FILES + "{name}")
async def sitemap_file(request: Request, name: str) -> Response:
    after = service.file_start(name)
    context = app_context(request)
    async with context.db.read() as conn:
        await service.check_file(conn, after)
        plan = await service.plan(conn, public_base(request))
    return _xml(request, service.file_body(context.db, plan, after), plan.tag(name))


@router.api_route("/{name}.txt", methods=["GET", "HEAD"])
async def indexnow_key(request: Request, name: str) -> Response:
    """The IndexNow key file, when UNITS_API_INDEXNOW_KEY is set: the key itself."""
    key = app_context(request).settings.indexnow_key
    if key is None or name != key:
        raise NotFound(f"No route for {request.url.path}.")
    return Response(key, media_type=TEXT, headers={"Cache-Control": CACHE})
