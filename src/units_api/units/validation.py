"""Validation of a unit body: every violation reported at once, each with its path."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from units_api.errors import ValidationFailed
from units_api.units import quick
from units_api.units.merge_patch import merge_patch
from units_api.units.schemas import (
    EDITABLE_FIELDS,
    OBJECT_FIELDS,
    SERVER_FIELDS,
    UnitFields,
    UnitWrite,
)
from units_api.validation import pydantic_errors

# Where each vocabulary field lives: top level, or inside elements of an array.
VOCABULARY_PATHS: dict[str, tuple[str | None, str]] = {
    "type": (None, "type"),
    "priceBase": (None, "priceBase"),
    "uom": ("options", "uom"),
    "featureType": ("specs", "featureType"),
    "view": ("floorsPlan", "view"),
    "service": ("readings", "service"),
}
_EXTRA_UOM_ARRAY = "floorsPlan"


def _is_number(value: Any) -> TypeGuard[int | Decimal | float]:
    return isinstance(value, int | Decimal | float) and not isinstance(value, bool)


def _range_errors(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    start: Any = body.get("startingPrice")
    top: Any = body.get("maxPrice")
    if _is_number(start) and _is_number(top) and start > top:
        yield "startingPrice", "must be less than or equal to maxPrice"
    plans = body.get("paymentPlans")
    if not isinstance(plans, list):
        return
    defaults = 0
    for index, plan in enumerate(plans):
        if not isinstance(plan, dict):
            continue
        low: Any = plan.get("minPrice")
        high: Any = plan.get("maxPrice")
        if _is_number(low) and _is_number(high) and low > high:
            yield f"paymentPlans[{index}].minPrice", "must be less than or equal to maxPrice"
        if plan.get("default") is True:
            defaults += 1
            if defaults == 2:
                yield f"paymentPlans[{index}].default", "at most one payment plan may be default"


def _handover_errors(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if body.get("handoverDate") is not None and body.get("completionStatus") != "offPlan":
        yield "handoverDate", "is only for an off-plan unit (completionStatus offPlan)"


def _location_errors(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    location = body.get("unitLocation")
    if not isinstance(location, dict):
        return
    coords: Any = location.get("coordinates")
    if not isinstance(coords, list) or len(coords) != 2:
        return
    for index, bound in enumerate((180, 90)):
        value: Any = coords[index]
        if _is_number(value) and abs(float(value)) > bound:
            axis = "longitude" if index == 0 else "latitude"
            yield f"unitLocation.coordinates[{index}]", f"{axis} must be within [-{bound}, {bound}]"


def _vocabulary_values(body: Mapping[str, Any], field: str) -> Iterator[tuple[str, Any]]:
    array, key = VOCABULARY_PATHS[field]
    arrays = [array] if array else []
    if field == "uom":
        arrays.append(_EXTRA_UOM_ARRAY)
    if not arrays:
        yield key, body.get(key)
    for name in arrays:
        items = body.get(name)
        for index, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                yield f"{name}[{index}].{key}", item.get(key)


def _vocabulary_errors(
    body: Mapping[str, Any], vocabularies: Mapping[str, tuple[str, ...]]
) -> Iterator[tuple[str, str]]:
    for field, allowed in vocabularies.items():
        for path, value in _vocabulary_values(body, field):
            if isinstance(value, str) and value not in allowed:
                yield path, f"must be one of: {', '.join(allowed)}"


def _field_model(name: str) -> type[BaseModel]:
    """A model of one editable field, declared exactly as in the unit's model."""
    info = UnitFields.model_fields[name]
    config = ConfigDict(extra="forbid")
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"UnitField_{name}", __config__=config, **{name: (info.annotation, info)}
    )
    return model


_FIELD_MODELS = {name: _field_model(name) for name in EDITABLE_FIELDS}


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return dict(value.__dict__)
    if type(value) is list and value and isinstance(value[0], BaseModel):
        return [dict(item.__dict__) for item in value]
    return value


def _fields(model: UnitWrite) -> dict[str, Any]:
    """The editable fields as plain data, as `model_dump(include=...)` gives them, at a fifth
    of its cost: the unit's models have no aliases or serializers, and a nested model (a
    location, an expense, a list's items) holds only plain values, so each model's own values
    are copied as they are."""
    values = model.__dict__
    return {name: _plain(values[name]) for name in EDITABLE_FIELDS}


def validate_unit(
    body: Any, vocabularies: Mapping[str, tuple[str, ...]] | None = None
) -> dict[str, Any]:
    """Validate a whole unit body; return its editable fields, every one present."""
    if not isinstance(body, dict):
        raise ValidationFailed([("", "the body must be a JSON object")])
    fields = quick.unit_fields(body)  # most bodies, valid, read at a fraction of the cost
    if fields is not None:
        if errors := list(_cross_field_errors(body, vocabularies)):
            raise ValidationFailed(dict.fromkeys(errors))
        return fields
    errors = []
    model: UnitWrite | None = None
    try:
        model = UnitWrite.model_validate(body)
    except ValidationError as exc:
        errors.extend(pydantic_errors(exc))
    errors.extend(_cross_field_errors(body, vocabularies))
    if errors or model is None:
        raise ValidationFailed(dict.fromkeys(errors))
    return _fields(model)


def _cross_field_errors(
    body: Mapping[str, Any], vocabularies: Mapping[str, tuple[str, ...]] | None
) -> Iterator[tuple[str, str]]:
    yield from _range_errors(body)
    yield from _handover_errors(body)
    yield from _location_errors(body)
    yield from _vocabulary_errors(body, vocabularies or {})


def validate_patched(
    fields: dict[str, Any],
    patch: Mapping[str, Any],
    vocabularies: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """A stored unit's editable `fields` after a merge patch of editable fields, validated
    as `validate_unit` would validate the merged unit: the patched fields one by one (the
    others passed when they were stored), then the rules across fields on the whole."""
    merged = merge_patch(fields, patch)
    errors: list[tuple[str, str]] = []
    result = dict(fields)
    for name in EDITABLE_FIELDS:
        if name not in patch:
            continue
        try:
            model = _FIELD_MODELS[name].model_validate(
                {name: merged[name]} if name in merged else {}
            )
        except ValidationError as exc:
            errors.extend(pydantic_errors(exc))
            continue
        result[name] = _plain(model.__dict__[name])
    errors.extend(_cross_field_errors(merged, vocabularies))
    if errors:
        raise ValidationFailed(dict.fromkeys(errors))
    return {name: result.get(name) for name in EDITABLE_FIELDS}


def check_patch_keys(patch: Mapping[str, Any]) -> None:
    """Merge patch drops null keys, so unknown ones must be caught before merging."""
    errors = [
        (key, "unknown field")
        for key in patch
        if key not in EDITABLE_FIELDS and key not in SERVER_FIELDS
    ]
    for name, model in OBJECT_FIELDS.items():
        value = patch.get(name)
        if isinstance(value, dict):
            errors.extend(
                (f"{name}.{key}", "unknown field") for key in value if key not in model.model_fields
            )
    if errors:
        raise ValidationFailed(errors)
