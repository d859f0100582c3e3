"""Opaque cursors for keyset pagination, and limit parsing shared by paged endpoints."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from units_api.errors import InvalidParameter


def encode_cursor(*values: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(values))).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise InvalidParameter("cursor", "is not a valid cursor") from None
    if not isinstance(values, list) or len(values) != arity:
        raise InvalidParameter("cursor", "is not a valid cursor")
    return values


def parse_limit(raw: str | None, default: int, maximum: int) -> int:
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise InvalidParameter("limit", f"must be a whole number from 1 to {maximum}")
    return int(raw)
