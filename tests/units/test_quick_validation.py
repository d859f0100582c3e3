"""The quick reading of a unit body (`units/quick.py`) against the models it stands in for: it
passes only what the models pass, and gives what they give, value for value, type for type,
key for key in order."""

from __future__ import annotations

import copy
import enum
import random
from decimal import Decimal
from typing import Annotated, Any, get_args, get_origin

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StringConstraints,
    ValidationError,
    create_model,
)

from units_api.http.json import dumps, loads
from units_api.sample_data import fake_unit
from units_api.units import quick, schemas
from units_api.units.validation import _fields, validate_unit


class Three(enum.IntEnum):
    THREE = 3


def by_models(body: Any) -> dict[str, Any] | None:
    try:
        return _fields(schemas.UnitWrite.model_validate(body))
    except ValidationError:
        return None


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down and the same keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Decimal):
        return bool(a.as_tuple() == b.as_tuple())  # 1.10 is not 1.1: kept as sent
    return bool(a == b)


@pytest.mark.parametrize(
    "field",
    [
        (float | None, None),  # a type it does not know
        (Annotated[str, StringConstraints(pattern="^a")] | None, None),  # a constraint
        (Annotated[int, Field(ge=3)] | None, None),
        (Annotated[str, AfterValidator(str.strip)] | None, 7),  # a default other than None
    ],
)
def test_a_field_it_cannot_read_as_the_models_do_stops_it_at_import(field: Any) -> None:
    model = create_model("Odd", __base__=schemas.Expense, odd=field)
    with pytest.raises(TypeError, match=r"Odd\.odd: no quick reading"):
        quick.model_struct(model)


def test_its_structs_have_the_models_fields_in_their_order() -> None:
    assert quick.STRUCT.__struct_fields__ == tuple(schemas.UnitWrite.model_fields)


@pytest.mark.parametrize("seed", range(40))
def test_sample_units_read_as_the_models_read_them(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        unit = fake_unit(rng)
        for body in (unit, loads(dumps(unit))):  # as built, and as a request's body reads
            expected = by_models(body)
            assert expected is not None
            got = quick.unit_fields(body)
            assert got is not None and same(got, expected)


def with_lists(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with an item in each of its lists, for a change to reach."""
    for name in ("specs", "options", "paymentPlans", "floorsPlan", "readings"):
        body[name] = body.get(name) or [{}]
    body["gallery"] = body.get("gallery") or ["https://cdn.example.com/a.jpg"]
    return body


def a_valid_body() -> dict[str, Any]:
    body: dict[str, Any] = loads(dumps(fake_unit(random.Random(7))))
    return body


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("name",), "a\x00b"),  # a NUL
        (("unitDesc",), "\x00"),
        (("createdAt",), "\x00"),  # even where it is ignored: the models decide
        (("price",), "3"),  # a text where a number goes (msgspec reads it as a Decimal)
        (("price",), Decimal("NaN")),
        (("price",), float("inf")),
        (("price",), True),
        (("price",), -1),
        (("price",), 10**16),
        (("price",), Decimal("1.000000000000000000001")),
        (("bedrooms",), Decimal("3.0")),  # the models take it, as 3
        (("bedrooms",), Three.THREE),  # an int subclass: msgspec reads it as an int
        (("price",), Three.THREE),
        (("unitLocation", "coordinates", 0), Three.THREE),
        (("options", 0, "price"), Three.THREE),
        (("bedrooms",), "3"),
        (("name",), "   "),
        (("name",), ""),
        (("unitImageUrl",), "ftp://example.com/a.jpg"),
        (("gallery", 0), "not a url"),
        (("currency",), "egp"),
        (("country",), "eg"),
        (("handoverDate",), "2028-02-30"),
        (("readings", 0, "readingDate"), "yesterday"),
        (("unitLocation", "coordinates", 0), "31.2"),
        (("unitLocation", "type"), "Polygon"),
        (("specs", 0, "active"), 1),
        (("specs", 0, "unknown"), 1),
        (("surprise",), 1),
        (("offeringType",), "lease"),
        (("id",), 12),
    ],
)
def test_what_it_does_not_pass_goes_to_the_models(where: tuple[Any, ...], value: Any) -> None:
    body = with_lists(a_valid_body())
    place = body
    for key in where[:-1]:
        place = place[key]
    place[where[-1]] = value
    assert quick.unit_fields(body) is None
    expected = by_models(body)
    if expected is not None:  # the models' wider reading: the same unit either way
        assert same(validate_unit(body), expected)


# Values that test each kind of field's edges: texts, numbers in every form, wrong types.
TRICKY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**16), max_value=10**16),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True, places=None),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "a\x00",
            "\\u0000",
            "EGP",
            "EG",
            "sale",
            "offPlan",
            "Point",
            "2028-06-30",
            "2026-11-01T08:00:00Z",
            "https://cdn.example.com/a.jpg",
            "http://x y",
            "3",
            "x" * 501,
            "x" * 201,
        ]
    ),
    st.text(max_size=8),
    st.lists(st.integers(0, 5), max_size=3),
    st.just({}),
    st.just([{}]),
    st.just({"type": "Point", "coordinates": [Decimal("31.5"), 30]}),
)


def every_path() -> list[tuple[Any, ...]]:
    """Every field of the unit and of its parts (a list's first item, a location's second
    coordinate), from the models: a field added there is generated here too."""
    paths: list[tuple[Any, ...]] = []
    for name, info in schemas.UnitWrite.model_fields.items():
        paths.append((name,))
        inner = info.annotation
        for option in get_args(inner) or (inner,):
            listed = get_origin(option) is list
            part = get_args(option)[0] if listed else option
            if isinstance(part, type) and issubclass(part, BaseModel):
                for field in part.model_fields:
                    paths.append((name, 0, field) if listed else (name, field))
            elif listed:
                paths.append((name, 0))
    paths += [("unitLocation", "coordinates", 0), ("unitLocation", "coordinates", 1)]
    return paths


PATHS = every_path()


def put(body: Any, path: tuple[Any, ...], value: Any) -> None:
    """`value` at `path` in `body`, if every step before its last is there."""

    def has(place: Any, key: Any) -> bool:
        if isinstance(place, dict):
            return isinstance(key, str)
        return isinstance(place, list) and isinstance(key, int) and key < len(place)

    place = body
    for key in path[:-1]:
        if not has(place, key) or (isinstance(place, dict) and key not in place):
            return
        place = place[key]
    if has(place, path[-1]):
        place[path[-1]] = value


@settings(max_examples=1500, deadline=None)
@given(
    seed=st.integers(0, 50),
    changes=st.lists(st.tuples(st.sampled_from(PATHS), TRICKY), min_size=1, max_size=4),
)
def test_it_passes_only_what_the_models_pass_and_reads_it_as_they_do(
    seed: int, changes: list[tuple[tuple[Any, ...], Any]]
) -> None:
    body = with_lists(loads(dumps(fake_unit(random.Random(seed)))))
    for path, value in changes:
        put(body, path, copy.deepcopy(value))
    expected = by_models(body)
    got = quick.unit_fields(body)
    event(
        "refused"
        if expected is None
        else "passed here"
        if got is not None
        else "left to the models"
    )
    if expected is None:
        assert got is None
    elif got is not None:
        assert same(got, expected)
