"""Reading request bodies: media type, size limit, then exact JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from units_api.errors import MalformedJson, PayloadTooLarge, UnsupportedMediaType
from units_api.http.json import loads

JSON = ("application/json",)
MERGE_PATCH = ("application/json", "application/merge-patch+json")


@dataclass(frozen=True, slots=True)
class JsonBody:
    raw: bytes
    value: Any


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int, media_types: tuple[str, ...] = JSON) -> JsonBody:
    media = _media_type(request)
    if media not in media_types:
        raise UnsupportedMediaType(
            f"Send the body as {' or '.join(media_types)} (got {media or 'no Content-Type'})."
        )
    raw = await _read_limited(request, limit)
    if not raw.strip():
        raise MalformedJson("The request body is empty.")
    return JsonBody(raw=raw, value=loads(raw))
