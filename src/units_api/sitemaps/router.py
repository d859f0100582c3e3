"""What search engines read (section 17): robots.txt, the sitemap index and its files, and
the IndexNow key file. Public (no key), outside /api/ and, like the console, outside the API
document."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from units_api.channels.router import check_public_limit, public_base
from units_api.context import app_context
from units_api.errors import NotFound
from units_api.http.compression import GzipStream, accepts_gzip
from units_api.http.etag import matches_tag
from units_api.sitemaps import service

router = APIRouter(include_in_schema=False)

XML = "application/xml; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
CACHE = "public, max-age=60"
# gzip's level: the fastest; the sitemaps' repeated markup still shrinks about 18 times.
GZIP_LEVEL = 1


async def _gzipped(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    packer = GzipStream(GZIP_LEVEL)
    async for chunk in body:
        if packed := packer.add(chunk):
            yield packed
    yield packer.finish()


def _xml(request: Request, body: AsyncIterator[bytes], tag: str) -> Response:
    headers = {"ETag": tag, "Cache-Control": CACHE, "Vary": "Accept-Encoding"}
    wanted = request.headers.get("if-none-match")
    if wanted is not None and matches_tag(wanted, tag.removeprefix("W/")):
        return Response(status_code=304, headers=headers)
    if accepts_gzip(request.headers.get("accept-encoding")):
        headers["Content-Encoding"] = "gzip"
        body = _gzipped(body)
    return StreamingResponse(body, media_type=XML, headers=headers)


@router.api_route("/robots.txt", methods=["GET", "HEAD"])
async def robots(request: Request) -> Response:
    await check_public_limit(request)
    text = service.robots(public_base(request))
    return Response(text, media_type=TEXT, headers={"Cache-Control": CACHE})


@router.get(service.INDEX_PATH)
async def sitemap_index(request: Request) -> Response:
    await check_public_limit(request)
    context = app_context(request)
    async with context.db.read() as conn:
        plan = await service.plan(conn, public_base(request))
    return _xml(request, service.index_body(context.db, plan), plan.tag("index"))


@router.get(service.FILES + "{name}")
async def sitemap_file(request: Request, name: str) -> Response:
    await check_public_limit(request)
    after = service.file_start(name)
    context = app_context(request)
    async with context.db.read() as conn:
        await service.check_file(conn, after)
        plan = await service.plan(conn, public_base(request))
    return _xml(request, service.file_body(context.db, plan, after), plan.tag(name))


@router.api_route("/{name}.txt", methods=["GET", "HEAD"])
async def indexnow_key(request: Request, name: str) -> Response:
    """The IndexNow key file, when UNITS_API_INDEXNOW_KEY is set: the key itself."""
    await check_public_limit(request)
    key = app_context(request).settings.indexnow_key
    if key is None or name != key:
        raise NotFound(f"No route for {request.url.path}.")
    return Response(key, media_type=TEXT, headers={"Cache-Control": CACHE})
