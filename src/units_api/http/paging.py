"""Paging, written once: limits, opaque keyset cursors, page links and the `Link` header.

A cursor is the base64url (unpadded) JSON array `[scope, value, ...]`: the scope names the
listing and its order, so a cursor handed to another listing or order is a 400, and every
value is read back as the kind its key declares (a time, a number, an id...) or it is a 400.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

import orjson
from pydantic import Field
from starlette.datastructures import URL

from units_api.errors import InvalidParameter

Value = int | str | uuid.UUID | datetime | Decimal | float | None
Kind = Callable[[Any], Value]
Row = TypeVar("Row")

CURSOR = "cursor"
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"
CURSOR_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": CURSOR_PATTERN}
_CURSOR = re.compile(CURSOR_PATTERN)


def whole_number(name: str, raw: str | None, default: int, low: int, high: int | None) -> int:
    """A query parameter that is a whole number within bounds, or a 400 naming it."""
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < low or (high is not None and int(raw) > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise InvalidParameter(name, f"must be a whole number {bound}")
    return int(raw)


@dataclass(frozen=True, slots=True)
class Limit:
    """A page size: 1 to `maximum`, `default` when absent."""

    default: int
    maximum: int

    @property
    def text(self) -> str:
        return f"1..{self.maximum:,}, default {self.default:,}"

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": 1, "maximum": self.maximum, "default": self.default}

    def parse(self, raw: str | None) -> int:
        return whole_number("limit", raw, self.default, 1, self.maximum)

    def field(self) -> Any:
        """The same bounds as a field of a JSON body (a bad value is then a 422)."""
        return Field(default=self.default, ge=1, le=self.maximum, description=self.text)


# Kinds: how a cursor value is read back. Each raises ValueError or TypeError on a bad one.


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise TypeError("not text")
    return raw


def _integer(raw: Any) -> int:
    if type(raw) is not int:
        raise TypeError("not an integer")
    return raw


def _number(raw: Any) -> Decimal:
    number = Decimal(_text(raw))
    if not number.is_finite():
        raise ValueError("not a finite number")
    return number


def _float(raw: Any) -> float:
    number = float(_text(raw))
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _time(raw: Any) -> datetime:
    moment = datetime.fromisoformat(_text(raw))
    if moment.tzinfo is None:
        raise ValueError("a time without its offset")
    return moment


def _uuid(raw: Any) -> uuid.UUID:
    return uuid.UUID(_text(raw))


TEXT: Kind = _text
INTEGER: Kind = _integer
NUMBER: Kind = _number
FLOAT: Kind = _float  # a binary float, such as a computed distance
TIME: Kind = _time
UUID: Kind = _uuid


def nullable(kind: Kind) -> Kind:
    def read(raw: Any) -> Value:
        return None if raw is None else kind(raw)

    return read


def _plain(value: Value | float) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal | float | uuid.UUID):
        return str(value)
    return value


def _bad_cursor(why: str = "is not a valid cursor") -> InvalidParameter:
    return InvalidParameter(CURSOR, f"{why}; start again without one")


def _unpack(cursor: str) -> list[Any]:
    if not _CURSOR.fullmatch(cursor):
        raise _bad_cursor()
    try:
        parts = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise _bad_cursor() from None
    if not isinstance(parts, list) or not parts:
        raise _bad_cursor()
    return parts


@dataclass(frozen=True, slots=True)
class Keyset:
    """The cursors of one listing in one order: its scope and the kinds of its key values."""

    scope: str
    kinds: tuple[Kind, ...]

    def encode(self, values: Sequence[Value | float]) -> str:
        raw = orjson.dumps([self.scope, *(_plain(value) for value in values)])
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(self, cursor: str | None) -> tuple[Any, ...] | None:
        """The key values a cursor stands after, each of its kind; None without a cursor.

        A cursor that does not decode, or was given by another listing or order, is a 400.
        """
        if cursor is None:
            return None
        scope, *values = _unpack(cursor)
        if scope != self.scope:
            raise _bad_cursor("belongs to another listing or sort order")
        if len(values) != len(self.kinds):
            raise _bad_cursor()
        try:
            return tuple(kind(value) for kind, value in zip(self.kinds, values, strict=True))
        except (ValueError, TypeError, ArithmeticError):
            raise _bad_cursor() from None

    def page(
        self, rows: Sequence[Row], limit: int, key: Callable[[Row], Sequence[Value | float]]
    ) -> tuple[list[Row], str | None]:
        """Of `limit + 1` rows fetched: the page, and the cursor after it if more follow."""
        shown = list(rows[:limit])
        if len(rows) <= limit:
            return shown, None
        return shown, self.encode(key(shown[-1]))


def page_links(url: URL, page: int, last: int | None, has_next: bool) -> dict[str, str | None]:
    """self, first, prev, next and last of a numbered page; prev and next null at the ends."""
    # As URL.include_query_params(page=n) gives, with the other parameters encoded once.
    others = [(k, v) for k, v in parse_qsl(url.query, keep_blank_values=True) if k != "page"]
    base = str(url.replace(query=urlencode(others) + "&" if others else ""))

    def at(number: int) -> str:
        return f"{base}{'' if others else '?'}page={number}"

    return {
        "self": at(page),
        "first": at(1),
        "prev": at(page - 1) if page > 1 else None,
        "next": at(page + 1) if has_next else None,
        "last": at(last) if last is not None else None,
    }


def link_header(links: Mapping[str, str | None]) -> str:
    """The non-null links as an RFC 8288 `Link` header."""
    return ", ".join(f'<{href}>; rel="{rel}"' for rel, href in links.items() if href)
