"""A valid unit body's fields at a fraction of the models' cost.

`schemas.UnitWrite` validates a body with pydantic: every error at once, each with its path,
but a valid unit of 3 KB costs about 30 us there, most of it in the nested models made and
taken apart again and in a call of a Python validator per value. Most bodies are valid. This
module reads them with msgspec instead (about 19 us, checks included), into structs that
mirror the models field for field (a test holds them equal), then checks what msgspec has no
constraint for (a URL's form, a code's list, a date, a non-integer number's size and places)
with the very functions the models use (`types.py`). A body it does not pass, invalid or
merely outside its narrower reading (a whole number sent as 3.0, a NUL anywhere, even in an
ignored field), gets None, and the models decide, with every error. It never passes what the
models refuse, and what it passes reads as the models read it: the tests compare both on
generated bodies (bench/README.md, "Single-unit operations", for what it saves a create).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from units_api.units.schemas import EDITABLE_FIELDS, CompletionStatus, OfferingType
from units_api.units.types import (
    LONG_TEXT_MAX,
    NAME_MAX,
    NUMBER_MAX,
    TEXT_MAX,
    amount,
    country_code,
    currency_code,
    exact_number,
    http_url,
    iso_date,
    non_blank,
    reading_date,
)


def _number_sent(check: Callable[[Any], Any], sent: Any) -> Any:
    """A number msgspec read as a Decimal (from a JSON number, or from a text: msgspec reads
    both), by the models' `check` of the value sent, which must have been a number."""
    if type(sent) is not Decimal and type(sent) is not float:
        raise ValueError
    return check(sent)


Text = Annotated[str, Meta(max_length=TEXT_MAX)]
LongText = Annotated[str, Meta(max_length=LONG_TEXT_MAX)]
Whole = Annotated[int, Meta(ge=0, le=NUMBER_MAX)]
Amount = Whole | Decimal
Coordinate = Annotated[int, Meta(ge=-NUMBER_MAX, le=NUMBER_MAX)] | Decimal
Url = Text


def _array(item: Any, most: int) -> Any:
    return Annotated[list[item], Meta(max_length=most)] | None  # null is []


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    pass


# Each struct lists its model's fields in the model's order (their dicts keep it).
class UnitLocation(_Strict):
    type: Literal["Point"]
    coordinates: Annotated[list[Coordinate], Meta(min_length=2, max_length=2)]


class Expense(_Strict):
    name: Text | None = None
    value: Amount | None = None


class Spec(_Strict):
    featureNumber: Whole | None = None
    featureType: Text | None = None
    featureImage: Url | None = None
    featureDesc: LongText | None = None
    featureDescAr: LongText | None = None
    featureTag: Text | None = None
    active: bool | None = None


class Option(_Strict):
    optionNumber: Whole | None = None
    optionName: Text | None = None
    optionNameAr: Text | None = None
    area: Amount | None = None
    uom: Text | None = None
    price: Amount | None = None
    active: bool | None = None


class PaymentPlan(_Strict):
    planNumber: Whole | None = None
    planName: Text | None = None
    planNameAr: Text | None = None
    planDesc: LongText | None = None
    planDescAr: LongText | None = None
    minPrice: Amount | None = None
    maxPrice: Amount | None = None
    default: bool | None = None
    downPayment: Amount | None = None
    installmentsValue: Amount | None = None
    paymentDetails: LongText | None = None
    active: bool | None = None


class Floor(_Strict):
    floorsNumber: Whole | None = None
    floorName: Text | None = None
    floorNameAr: Text | None = None
    floorDesc: LongText | None = None
    floorDescAr: LongText | None = None
    rooms: Whole | None = None
    baths: Whole | None = None
    view: Text | None = None
    area: Amount | None = None
    uom: Text | None = None
    price: Amount | None = None
    extras: LongText | None = None
    floorImage: Url | None = None


class Reading(_Strict):
    service: Text | None = None
    currentReading: Amount | None = None
    previousReading: Amount | None = None
    cost: Amount | None = None
    readingDate: Annotated[str, Meta(max_length=40)] | None = None
    Notes: LongText | None = None


class UnitWrite(_Strict):
    name: Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
    type: Annotated[str, Meta(min_length=1, max_length=TEXT_MAX)]
    location: Text | None = None
    price: Amount | None = None
    surface: Amount | None = None
    guaranty: Amount | None = None
    city: Text | None = None
    subProjectId: Text | None = None
    priceBase: Text | None = None
    unitImageUrl: Url | None = None
    unitNameAr: Text | None = None
    unitLocation: UnitLocation | None = None
    expense: Expense | None = None
    startingPrice: Amount | None = None
    maxPrice: Amount | None = None
    unitDesc: LongText | None = None
    unitDescAr: LongText | None = None
    unitShortDesc: LongText | None = None
    unitShortDescAr: LongText | None = None
    gallery: _array(Url, 100) = None  # type: ignore[valid-type]
    specs: _array(Spec, 200) = None  # type: ignore[valid-type]
    options: _array(Option, 200) = None  # type: ignore[valid-type]
    paymentPlans: _array(PaymentPlan, 200) = None  # type: ignore[valid-type]
    floorsPlan: _array(Floor, 200) = None  # type: ignore[valid-type]
    readings: _array(Reading, 1000) = None  # type: ignore[valid-type]
    currency: str | None = None
    country: str | None = None
    offeringType: OfferingType | None = None
    bedrooms: Whole | None = None
    bathrooms: Whole | None = None
    completionStatus: CompletionStatus | None = None
    handoverDate: str | None = None
    # The server's fields, sent back by a client and ignored.
    id: str | None = None
    createdAt: Any = None
    updatedAt: Any = None
    version: Any = None
    publishing: Any = None
    availability: Any = None


STRUCTS: dict[str, type[msgspec.Struct]] = {
    "UnitLocation": UnitLocation,
    "Expense": Expense,
    "Spec": Spec,
    "Option": Option,
    "PaymentPlan": PaymentPlan,
    "Floor": Floor,
    "Reading": Reading,
    "UnitWrite": UnitWrite,
}


@dataclass(frozen=True, slots=True)
class _Needs:
    """What a struct's fields need beyond msgspec's reading: its amounts (a Decimal checked
    by `types.amount`; a bounded integer is what the models take too) and its texts' checks,
    the models' own functions."""

    amounts: tuple[str, ...] = ()
    texts: tuple[tuple[str, Callable[[str], str]], ...] = ()


_UNIT = _Needs(
    ("price", "surface", "guaranty", "startingPrice", "maxPrice"),
    (
        ("name", non_blank),
        ("type", non_blank),
        ("unitImageUrl", http_url),
        ("currency", currency_code),
        ("country", country_code),
        ("handoverDate", iso_date),
    ),
)
_EXPENSE = _Needs(("value",))
_LISTED: dict[str, _Needs] = {
    "specs": _Needs((), (("featureImage", http_url),)),
    "options": _Needs(("area", "price")),
    "paymentPlans": _Needs(("minPrice", "maxPrice", "downPayment", "installmentsValue")),
    "floorsPlan": _Needs(("area", "price"), (("floorImage", http_url),)),
    "readings": _Needs(
        ("currentReading", "previousReading", "cost"), (("readingDate", reading_date),)
    ),
}
# A NUL as msgspec writes it in JSON; a text holding a backslash then "u0000" matches too,
# and goes to the models, which take it.
_NUL = b"\\u0000"
_encode = msgspec.json.Encoder().encode
_asdict = msgspec.structs.asdict


def _checked(values: dict[str, Any], sent: dict[str, Any], needs: _Needs) -> None:
    for name in needs.amounts:
        value = values[name]
        if value is not None and type(value) is not int:
            values[name] = _number_sent(amount, sent[name])
    for name, check in needs.texts:
        value = values[name]
        if value is not None:
            check(value)


def unit_fields(body: dict[str, Any]) -> dict[str, Any] | None:
    """A valid unit body's editable fields, each present, as `validation._fields` gives them
    from the models; None when the models must decide."""
    try:
        if _NUL in _encode(body):  # no text may hold one: the models name where
            return None
        values = _asdict(msgspec.convert(body, UnitWrite))
        _checked(values, body, _UNIT)
        if (location := values["unitLocation"]) is not None:
            values["unitLocation"] = location = _asdict(location)
            location["coordinates"] = [
                value if type(value) is int else _number_sent(exact_number, sent)
                for value, sent in zip(
                    location["coordinates"], body["unitLocation"]["coordinates"], strict=True
                )
            ]
        if (expense := values["expense"]) is not None:
            values["expense"] = expense = _asdict(expense)
            _checked(expense, body["expense"], _EXPENSE)
        gallery = values["gallery"]
        if gallery is None:  # null is []
            values["gallery"] = []
        else:
            for url in gallery:
                http_url(url)
        for name, needs in _LISTED.items():
            items = values[name]
            if items is None:
                values[name] = []
            elif items:
                values[name] = items = [_asdict(item) for item in items]
                for item, sent in zip(items, body[name], strict=True):
                    _checked(item, sent, needs)
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError, RecursionError):
        return None
    return {name: values[name] for name in EDITABLE_FIELDS}
