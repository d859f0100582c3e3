"""The validation functions on their own: paths, exact numbers, defaults."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from units_api.errors import ValidationFailed
from units_api.http.json import dumps, load_stored, loads
from units_api.sample_data import fake_unit
from units_api.units.merge_patch import merge_patch
from units_api.units.schemas import EDITABLE_FIELDS, UnitWrite
from units_api.units.validation import check_patch_keys, validate_patched, validate_unit
from units_api.validation import format_path


def errors_of(body: object, vocabularies: dict[str, tuple[str, ...]] | None = None) -> set[str]:
    with pytest.raises(ValidationFailed) as caught:
        validate_unit(body, vocabularies)
    return {error["field"] for error in caught.value.errors}


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("name",), "name"),
        (("paymentPlans", 1, "minPrice"), "paymentPlans[1].minPrice"),
        (("gallery", 0), "gallery[0]"),
        (("unitLocation", "function-after", "coordinates", 1), "unitLocation.coordinates[1]"),
    ],
)
def test_paths_read_like_the_record(loc: tuple[int | str, ...], path: str) -> None:
    assert format_path(loc) == path


def test_every_field_is_present_with_null_or_empty_defaults() -> None:
    fields = validate_unit({"name": "a", "type": "b", "gallery": None})
    assert fields["gallery"] == [] and fields["readings"] == []
    assert fields["price"] is None and fields["unitLocation"] is None


@given(st.decimals(min_value=0, max_value=10**15, places=2, allow_nan=False))
def test_money_is_kept_exactly(value: Decimal) -> None:
    assert validate_unit({"name": "a", "type": "b", "price": value})["price"] == value
    assert str(validate_unit({"name": "a", "type": "b", "price": value})["price"]) == str(value)


@pytest.mark.parametrize("value", ["1", True, None, [1], {"a": 1}])
def test_non_numbers_are_rejected_for_amounts(value: object) -> None:
    if value is None:
        assert validate_unit({"name": "a", "type": "b", "price": value})["price"] is None
    else:
        assert errors_of({"name": "a", "type": "b", "price": value}) == {"price"}


def test_whole_numbers_accept_integral_decimals_only() -> None:
    floors = validate_unit({"name": "a", "type": "b", "floorsPlan": [{"rooms": Decimal("3.0")}]})
    assert floors["floorsPlan"][0]["rooms"] == 3
    body = {"name": "a", "type": "b", "floorsPlan": [{"rooms": Decimal("3.5")}]}
    assert errors_of(body) == {"floorsPlan[0].rooms"}


def test_vocabularies_apply_to_nested_fields() -> None:
    body = {
        "name": "a",
        "type": "villa",
        "specs": [{"featureType": "odd"}],
        "readings": [{"service": "gas"}],
    }
    assert errors_of(body, {"featureType": ("amenity",), "service": ("water",)}) == {
        "specs[0].featureType",
        "readings[0].service",
    }


def test_patch_keys_catch_unknown_fields_before_null_hides_them() -> None:
    with pytest.raises(ValidationFailed) as caught:
        check_patch_keys({"notes": None, "expense": {"amount": None}, "price": 1})
    assert {e["field"] for e in caught.value.errors} == {"notes", "expense.amount"}
    check_patch_keys({"unitDesc": None, "id": "x", "version": 3})


_SPARSE = st.sampled_from([None, []])


@given(
    seed=st.integers(0, 10_000),
    cleared=st.lists(st.sampled_from(EDITABLE_FIELDS), max_size=8),
    emptied=_SPARSE,
)
def test_the_fields_are_exactly_what_the_model_dumps(
    seed: int, cleared: list[str], emptied: object
) -> None:
    """`validate_unit` copies the validated models' values rather than dumping them: the same
    data, types and key order, nested items included."""
    body = loads(dumps(fake_unit(random.Random(seed))))
    for name in cleared:
        if name not in ("name", "type"):
            body[name] = emptied if isinstance(body.get(name), list) else None
    if body.get("completionStatus") != "offPlan":
        body["handoverDate"] = None  # a date goes with an off-plan unit alone
    expected = UnitWrite.model_validate(body).model_dump(include=set(EDITABLE_FIELDS))
    fields = validate_unit(body)
    assert fields == expected
    assert dumps(fields) == dumps(expected)
    assert list(fields) == list(EDITABLE_FIELDS)


_JUNK = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.decimals(min_value=-10, max_value=10**16, places=3, allow_nan=False),
    st.text(max_size=3),
    st.just("\x00"),
    st.just("not a url"),
    st.booleans(),
    st.lists(st.one_of(st.integers(-1, 1), st.text(max_size=2)), max_size=2),
    st.dictionaries(
        st.sampled_from(["type", "coordinates", "name", "value", "featureNumber", "x"]),
        st.one_of(st.integers(-200, 200), st.text(max_size=2), st.just("Point")),
        max_size=3,
    ),
)


@given(
    stored_seed=st.integers(0, 10_000),
    other_seed=st.integers(0, 10_000),
    patch_spec=st.dictionaries(
        st.sampled_from(EDITABLE_FIELDS), st.one_of(st.just("other"), _JUNK), max_size=5
    ),
    vocabularies=st.sampled_from([None, {"type": ("villa", "apartment"), "uom": ("m2",)}]),
)
def test_a_patch_is_judged_as_the_whole_merged_unit(
    stored_seed: int,
    other_seed: int,
    patch_spec: dict[str, object],
    vocabularies: dict[str, tuple[str, ...]] | None,
) -> None:
    """Validating only the patched fields (and the rules across fields) of a stored unit
    gives what validating the whole merged unit gives: the same fields, or the same errors."""
    # As a stored unit is read back: its document parsed again.
    document = load_stored(dumps(validate_unit(fake_unit(random.Random(stored_seed)))).decode())
    stored = {name: document.get(name) for name in EDITABLE_FIELDS}
    other = validate_unit(loads(dumps(fake_unit(random.Random(other_seed)))))
    patch = {name: other[name] if value == "other" else value for name, value in patch_spec.items()}
    outcomes = []
    for judge in (
        lambda: validate_unit(merge_patch(stored, patch), vocabularies),
        lambda: validate_patched(stored, patch, vocabularies),
    ):
        try:
            fields = judge()
        except ValidationFailed as failed:
            outcomes.append(("failed", [(e["field"], e["message"]) for e in failed.errors]))
        else:
            outcomes.append(("valid", dumps(fields)))
    assert outcomes[0] == outcomes[1]
