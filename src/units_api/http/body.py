"""Reading request bodies: media type, size limit, then exact JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.types import Message

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


MULTIPART = "multipart/form-data"
# What a multipart body may carry besides its file: the boundaries and a few small fields.
_FORM_OVERHEAD = 64 * 1024


async def read_form(request: Request, file_limit: int, max_fields: int) -> FormData:
    """A multipart/form-data body with at most one file of `file_limit` bytes (spooled to
    disk past 1 MiB) and `max_fields` small fields. A larger body is a 413 as soon as it
    passes the limit, before it is all received."""
    if _media_type(request) != MULTIPART:
        raise UnsupportedMediaType(
            f"Send the body as {MULTIPART} (got {_media_type(request) or 'no Content-Type'})."
        )
    limit = file_limit + _FORM_OVERHEAD
    too_large = PayloadTooLarge(f"The file is larger than {file_limit:,} bytes.")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    received = 0
    receive = request.receive

    async def limited() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise too_large
        return message

    form = await Request(request.scope, limited).form(max_files=1, max_fields=max_fields)
    for value in form.values():
        if isinstance(value, UploadFile) and value.size is not None and value.size > file_limit:
            await form.close()
            raise too_large
    return form
