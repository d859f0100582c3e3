"""Field types of the unit record: exact numbers, bounded strings, http(s) URLs, dates, ISO
codes."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainValidator,
    StringConstraints,
)
from pydantic.json_schema import JsonSchemaValue, WithJsonSchema
from pydantic_core import core_schema

from units_api.codes import COUNTRIES, CURRENCIES

NAME_MAX = 200
TEXT_MAX = 500
LONG_TEXT_MAX = 20_000


NUMBER_MAX = 10**15
DECIMALS_MAX = 20

# The checks of a unit's values, by the models below and by `quick.py`: each gives the value
# as read, or raises a ValueError whose text is the problem's.


def exact_number(value: Any) -> Decimal | int:
    kind = type(value)
    if kind is int:  # the common case, first: a JSON integer
        if -NUMBER_MAX <= value <= NUMBER_MAX:
            number: int = value
            return number
        raise ValueError(f"must be at most {NUMBER_MAX:.0e} in magnitude")
    if kind is float:
        value = Decimal(repr(value))
    elif kind is not Decimal:
        raise ValueError("must be a JSON number")
    if not value.is_finite():
        raise ValueError("must be a finite number")
    if abs(value) > NUMBER_MAX:
        raise ValueError(f"must be at most {NUMBER_MAX:.0e} in magnitude")
    if value != 0 and -int(value.as_tuple().exponent) > DECIMALS_MAX:
        raise ValueError(f"must have at most {DECIMALS_MAX} decimal places")
    decimal: Decimal = value
    return decimal


def amount(value: Any) -> Decimal | int:
    if type(value) is int and 0 <= value <= NUMBER_MAX:  # the common case, in one call
        whole: int = value
        return whole
    number = exact_number(value)
    if number < 0:
        raise ValueError("must be greater than or equal to 0")
    return number


def whole_number(value: Any) -> int:
    if type(value) is int and 0 <= value <= NUMBER_MAX:
        whole: int = value
        return whole
    number = amount(value)
    if number != int(number):
        raise ValueError("must be a whole number")
    return int(number)


# Most URLs: a scheme, a plain host, then anything but whitespace. These pass without a parse.
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?:[:/?#][^\s]*)?\Z")


def http_url(value: str) -> str:
    if _PLAIN_URL.match(value):
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or " " in value:
        raise ValueError("must be an absolute http(s) URL")
    return value


_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def reading_date(value: str) -> str:
    try:
        if len(value) == 10:
            date.fromisoformat(value)
            return value
        if _DATE_TIME.match(value):
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
            return value
    except ValueError:
        pass
    raise ValueError("must be an ISO 8601 date (YYYY-MM-DD) or an RFC 3339 date-time")


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


def iso_date(value: str) -> str:
    try:
        if _DATE.match(value):
            date.fromisoformat(value)
            return value
    except ValueError:
        pass
    raise ValueError("must be an ISO 8601 date (YYYY-MM-DD)")


def currency_code(value: str) -> str:
    if value not in CURRENCIES:
        raise ValueError("must be an ISO 4217 currency code, three capitals (EGP, AED, SAR)")
    return value


def country_code(value: str) -> str:
    if value not in COUNTRIES:
        raise ValueError("must be an ISO 3166-1 alpha-2 country code, two capitals (EG, AE, SA)")
    return value


def non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain the NUL character")
    return value


def _none_as_empty(value: Any) -> Any:
    return [] if value is None else value


Amount = Annotated[
    Decimal | int,
    PlainValidator(amount),
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": NUMBER_MAX}),
]
Coordinate = Annotated[
    Decimal | int,
    PlainValidator(exact_number),
    WithJsonSchema({"type": "number"}),
]
Whole = Annotated[
    int,
    PlainValidator(whole_number),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": NUMBER_MAX}),
]
NoNul = AfterValidator(no_nul)
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=NAME_MAX),
    AfterValidator(non_blank),
    NoNul,
]
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=TEXT_MAX),
    AfterValidator(non_blank),
    NoNul,
]
Text = Annotated[str, StringConstraints(max_length=TEXT_MAX), NoNul]
LongText = Annotated[str, StringConstraints(max_length=LONG_TEXT_MAX), NoNul]
Url = Annotated[
    str,
    StringConstraints(max_length=TEXT_MAX),
    AfterValidator(http_url),
    NoNul,
    WithJsonSchema(
        {"type": "string", "format": "uri", "maxLength": TEXT_MAX, "pattern": "^https?://"}
    ),
]
ReadingDate = Annotated[
    str,
    StringConstraints(max_length=40),
    AfterValidator(reading_date),
    WithJsonSchema(
        {
            "type": "string",
            "description": "ISO 8601 date (YYYY-MM-DD) or RFC 3339 date-time; returned as sent.",
            "examples": ["2026-11-01", "2026-11-01T08:00:00Z"],
            "anyOf": [{"format": "date"}, {"format": "date-time"}],
        }
    ),
]

IsoDate = Annotated[
    str,
    AfterValidator(iso_date),
    WithJsonSchema(
        {"type": "string", "format": "date", "description": "ISO 8601 date (YYYY-MM-DD)."}
    ),
]
Currency = Annotated[
    str,
    AfterValidator(currency_code),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^[A-Z]{3}$",
            "description": "ISO 4217 currency code.",
            "examples": ["EGP", "AED", "SAR"],
        }
    ),
]
Country = Annotated[
    str,
    AfterValidator(country_code),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^[A-Z]{2}$",
            "description": "ISO 3166-1 alpha-2 country code.",
            "examples": ["EG", "AE", "SA"],
        }
    ),
]


class _NullAsEmpty:
    """A list where null means empty: a client may send either (the document says so), and
    null is read as `[]`. A returned record always carries the list, so the schema of a
    response (serialization mode) is the list alone."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(_none_as_empty, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        listed = handler(schema)
        if handler.mode == "serialization":
            return listed
        return {"anyOf": [listed, {"type": "null"}], "description": "null is the same as []."}


NullAsEmpty = _NullAsEmpty()
