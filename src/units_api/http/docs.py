"""Small builders for the OpenAPI parts FastAPI cannot infer from hand-parsed bodies."""

from __future__ import annotations

from typing import Any

_DESCRIPTIONS = {
    304: "Not modified (If-None-Match matched the current ETag)",
    400: "Bad request: malformed JSON or a bad query parameter",
    401: "Missing, malformed, unknown, revoked or expired API key",
    403: "The API key lacks the scope this operation needs",
    404: "No such resource",
    405: "Method not allowed",
    409: "Conflict",
    412: "If-Match does not match the current version",
    413: "Body too large",
    415: "Unsupported Content-Type",
    422: "Validation failed; `errors` lists every violation with its path",
    429: "Rate limit exceeded (see Retry-After)",
}
AUTH = (401, 403, 429)


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {
        code: {
            "description": _DESCRIPTIONS[code],
            "content": {"application/problem+json": {"schema": ref("Problem")}},
        }
        for code in (*codes, *AUTH)
    }


def success(
    code: int, schema: str, description: str, headers: tuple[str, ...] = ()
) -> dict[int | str, dict[str, Any]]:
    return {
        code: {
            "description": description,
            "content": {"application/json": {"schema": ref(schema)}},
            "headers": {name: {"schema": {"type": "string"}} for name in headers},
        }
    }


def json_body(schema: str, media_types: tuple[str, ...] = ("application/json",)) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {media: {"schema": ref(schema)} for media in media_types},
        }
    }


def _parameter(name: str, where: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": False,
        "description": description,
        "schema": {"type": "string"},
    }


def query(name: str, description: str) -> dict[str, Any]:
    """A documented query parameter that the handler reads itself (no per-request binding)."""
    return _parameter(name, "query", description)


def header(name: str, description: str) -> dict[str, Any]:
    return _parameter(name, "header", description)
