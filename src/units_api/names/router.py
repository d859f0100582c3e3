"""The display names' API: read them (`units:read`), set and delete them (`admin`)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from units_api.auth.access import authorize
from units_api.auth.scopes import ADMIN, UNITS_READ
from units_api.context import app_context
from units_api.errors import InvalidParameter
from units_api.http import docs
from units_api.http.body import read_json
from units_api.http.docs import json_body, problems, success
from units_api.http.json import JSONResponse
from units_api.names import service
from units_api.names.builtin import BUILT_IN
from units_api.names.values import FIELDS, MAX_NAME, MAX_VALUE

PATH = "/api/v2/display-names"
router = APIRouter(prefix=PATH, tags=["display names"])
_FIELDS = ", ".join(f"`{name}`" for name in FIELDS)
_BUILT_IN = ", ".join(f"`{name}`" for name in BUILT_IN)
_MATCHING = (
    "A value is matched as the unit's text is compared in filters: trimmed, runs of white "
    "space made one, case-insensitively (`New Cairo` and ` new cairo` are one value, stored "
    "as `new cairo`)."
)
_ONE = "/{field}/{value:text}"
Field = Annotated[
    str,
    Path(
        description=f"The unit's field: one of {_FIELDS}.",
        json_schema_extra={"enum": list(FIELDS)},
    ),
]
Value = Annotated[
    str,
    Path(
        description=f"The field's value, up to {MAX_VALUE} characters. {_MATCHING}",
        json_schema_extra={"minLength": 1, "maxLength": MAX_VALUE},
    ),
]
_FIELD_QUERY = docs.query(
    "field",
    f"Only the entries of this field: one of {_FIELDS}.",
    {"type": "string", "enum": list(FIELDS)},
)


def _location(field: str, value: str) -> str:
    return f"{PATH}/{field}/{quote(value, safe='')}"


@router.get(
    "",
    operation_id="listDisplayNames",
    summary="List display names",
    description="Every value that has display names, by field and value: the built-in ones "
    f"(for {_BUILT_IN}: common types of unit, cities, countries and views; `builtIn: true`) "
    "and those stored, which override a built-in entry of the same value. A value without "
    "an entry is shown as it is. Needs `units:read`. A `field` that is not one of the list "
    f"is a 400. At most {service.MAX_STORED:,} entries are stored, so the list has no pages.",
    responses={**success(200, "DisplayNameList", "Every entry"), **problems(400)},
    openapi_extra={"parameters": [_FIELD_QUERY]},
)
async def list_names(request: Request) -> Response:
    await authorize(request, UNITS_READ)
    field = request.query_params.get("field")
    if field is not None and field not in FIELDS:
        raise InvalidParameter("field", f"must be one of {', '.join(FIELDS)}")
    async with app_context(request).db.read() as conn:
        entries = await service.list_entries(conn, field)
    return JSONResponse({"data": entries})


@router.get(
    _ONE,
    operation_id="getDisplayName",
    summary="Read a value's display names",
    description=f"The stored entry, or the built-in one. Needs `units:read`. {_MATCHING}",
    responses={**success(200, "DisplayNameRead", "The entry"), **problems(404, 422)},
)
async def get_name(request: Request, field: Field, value: Value) -> Response:
    await authorize(request, UNITS_READ)
    key = service.key_of(field, value)
    async with app_context(request).db.read() as conn:
        entry = await service.get_entry(conn, key)
    return JSONResponse(entry)


@router.put(
    _ONE,
    operation_id="putDisplayName",
    summary="Set a value's display names",
    description="Creates the entry (201) or replaces it (200); an entry of a value with "
    "built-in names overrides them. Both names are needed, each 1 to "
    f"{MAX_NAME} characters (trimmed); any other key is a 422. {_MATCHING} At most "
    f"{service.MAX_STORED:,} entries are stored (then a 409). Needs `admin`. This process "
    f"shows the new names at once, other processes within "
    f"{service.CACHE_SECONDS:g} s.",
    responses={
        **success(200, "DisplayNameRead", "The entry, replaced"),
        **success(201, "DisplayNameRead", "The entry, created", ("Location",)),
        **problems(409, 413, 415, 422),
    },
    openapi_extra=json_body("DisplayNameWrite"),
)
async def put_name(request: Request, field: Field, value: Value) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    key, names = service.parse_put(field, value, body.value)
    async with context.db.transaction() as conn:
        entry, created = await service.put(conn, key, names)
    context.names.forget()
    if created:
        return JSONResponse(entry, status_code=201, headers={"Location": _location(*key)})
    return JSONResponse(entry)


@router.delete(
    _ONE,
    status_code=204,
    operation_id="deleteDisplayName",
    summary="Delete a value's stored display names",
    description="A value with built-in names shows them again; one without is shown as it is. "
    "A value with no stored entry is a 404 (built-in names cannot be deleted, only "
    f"overridden). Needs `admin`. {_MATCHING}",
    response_class=Response,
    responses={204: {"description": "Deleted"}, **problems(404, 422)},
)
async def delete_name(request: Request, field: Field, value: Value) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    key = service.key_of(field, value)
    async with context.db.transaction() as conn:
        await service.delete(conn, key)
    context.names.forget()
    return Response(status_code=204)
