"""JSON in and out. Numbers stay exact: bodies parse floats as Decimal, and Decimals are
written back as the digits they were sent with."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson
from starlette.responses import Response

from units_api.errors import MalformedJson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value).encode())
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_default, option=_OPTIONS)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(raw: bytes | str) -> Any:
    """Parse JSON with exact numbers; NaN and Infinity are not JSON."""
    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=_reject_constant)
    except RecursionError:
        raise MalformedJson("The JSON body is nested too deeply.") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedJson(f"The body is not valid JSON: {exc}") from None


def load_stored(raw: str | bytes) -> Any:
    """Parse a document the service wrote itself (trusted, exact numbers)."""
    return json.loads(raw, parse_float=Decimal)


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else dumps(content)
