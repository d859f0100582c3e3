"""Small builders for the OpenAPI parts FastAPI cannot infer from hand-parsed requests."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from units_api.clock import duration_text
from units_api.config import DEFAULTS
from units_api.http.etag import ETAG_PATTERN, IF_MATCH_PATTERN
from units_api.http.idempotency import KEY_SCHEMA, REPLAYED
from units_api.http.middleware import MAX_URL_BYTES
from units_api.http.paging import CURSOR_SCHEMA, Limit

_DESCRIPTIONS = {
    304: "Not modified (If-None-Match matched the current ETag)",
    400: "Bad request: malformed JSON, a bad, unknown or repeated query parameter (named in "
    "`parameter`; unknown ones each listed in `errors`) or a malformed header (named in "
    "`header`)",
    401: "Missing, malformed, unknown, revoked or expired API key",
    403: "The API key lacks the scope this operation needs",
    404: "No such resource",
    405: "Method not allowed",
    408: "The request's headers or body did not arrive within UNITS_API_CLIENT_TIMEOUT_SECONDS "
    f"({duration_text(DEFAULTS.client_timeout_seconds, short=True)} by default); the "
    "connection is closed",
    409: "Conflict",
    410: "Gone",
    412: "If-Match does not match the current version",
    413: "Body too large",
    414: f"URL (path and query) longer than {MAX_URL_BYTES:,} bytes",
    415: "Unsupported Content-Type",
    422: "Validation failed; `errors` lists every violation with its path",
    429: "Rate limit exceeded (see Retry-After)",
    503: "The database is unreachable, restarting, failing over or busy, or did not answer "
    "within UNITS_API_DB_UNAVAILABLE_SECONDS (`/problems/unavailable`, with Retry-After in "
    "seconds); safe to retry then (a write with its Idempotency-Key)",
    507: "Storage cannot take the write (the file store; on SQLite, the database's disk): "
    "`type` ending `/storage-full` (no space left) or `/storage-unavailable` (failing, "
    "read-only or out of reach); nothing was kept, try again once it has room or works again",
}
AUTH = (401, 403, 429)
# The most bytes a character of a query value takes in a URL: four of UTF-8, percent-encoded.
ENCODED_CHAR_BYTES = len(quote(chr(0x10FFFF)))
STRING: dict[str, Any] = {"type": "string"}
_RESPONSE_HEADERS: dict[str, dict[str, Any]] = {
    "ETag": {
        "description": 'The version as a strong entity-tag, e.g. "3".',
        "schema": {"type": "string", "pattern": ETAG_PATTERN},
    },
    "Location": {
        "description": "The path of the created resource.",
        "schema": {"type": "string", "format": "uri-reference"},
    },
    "Link": {
        "description": "The non-null page links (RFC 8288).",
        "schema": STRING,
    },
    REPLAYED: {
        "description": "Present on a replay of the first response to this Idempotency-Key.",
        "schema": {"type": "string", "enum": ["true"]},
    },
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def problem(code: int) -> dict[str, Any]:
    return {
        "description": _DESCRIPTIONS[code],
        "content": {"application/problem+json": {"schema": ref("Problem")}},
    }


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: problem(code) for code in (*codes, *AUTH)}


def success(
    code: int, schema: str, description: str, headers: tuple[str, ...] = ()
) -> dict[int | str, dict[str, Any]]:
    return {
        code: {
            "description": description,
            "content": {"application/json": {"schema": ref(schema)}},
            "headers": {name: _RESPONSE_HEADERS[name] for name in headers},
        }
    }


def json_body(schema: str, media_types: tuple[str, ...] = ("application/json",)) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {media: {"schema": ref(schema)} for media in media_types},
        }
    }


def _parameter(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": False,
        "description": description,
        "schema": schema,
    }


def query(name: str, description: str, schema: dict[str, Any] = STRING) -> dict[str, Any]:
    """A documented query parameter that the handler reads itself (no per-request binding)."""
    return _parameter(name, "query", description, schema)


def url_room(path: str, name: str) -> int:
    """The most characters (as `maxLength` counts them) of a query parameter's value that fit
    in the URL beside the path, whatever the characters."""
    return (MAX_URL_BYTES - len(f"{path}?{name}=")) // ENCODED_CHAR_BYTES


def header(name: str, description: str, schema: dict[str, Any] = STRING) -> dict[str, Any]:
    return _parameter(name, "header", description, schema)


def comma_list(names: Iterable[str], default: str | None = None) -> dict[str, Any]:
    """A string of comma-separated names from a fixed set (a client sends one string)."""
    item = rf"[ \t]*(?:{'|'.join(re.escape(name) for name in names)})[ \t]*"
    schema: dict[str, Any] = {"type": "string", "pattern": rf"^{item}(?:,{item})*$"}
    if default is not None:
        schema["default"] = default
    return schema


def limit(size: Limit) -> dict[str, Any]:
    return query("limit", f"Page size: {size.text}.", size.schema)


CURSOR = query("cursor", "`nextCursor` of the previous page (opaque).", CURSOR_SCHEMA)
IF_MATCH = header(
    "If-Match",
    'Apply only if the resource is at this version, e.g. "3" (else 412); `*` matches any. '
    "A value that is not `*` or a list of entity-tags is a 400.",
    {"type": "string", "pattern": IF_MATCH_PATTERN},
)
IF_NONE_MATCH = header("If-None-Match", "Answer 304 if the ETag matches.")


def idempotency_key(ttl_seconds: int) -> dict[str, Any]:
    return header(
        "Idempotency-Key",
        f"Replays the first response to the same key and body for {ttl_seconds // 3600} hours; "
        "the same key with another body is a 422, and while the first is running a 409.",
        KEY_SCHEMA,
    )
