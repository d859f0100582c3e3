"""Bulk update: many merge patches, or one patch for every unit a filter matches.

Work is done in batches: the rows are locked in one query, every patch is merged and validated
in Python, and the units, search words, history entries and events are written with one
statement each. A policy breach is found by the database after the write; in partial mode that
write is rolled back to a savepoint and redone without the breaching items.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import ColumnElement, and_
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.errors import ApiError, BulkFailed, ValidationFailed
from units_api.filters.parser import parse_filter
from units_api.units import changes, repository
from units_api.units.filtering import unit_condition
from units_api.units.record import UnitRecord, diff
from units_api.units.schemas import EDITABLE_FIELDS, MAX_MATCHED, BulkByFilter, BulkItems
from units_api.units.service import Caller, Vocabularies
from units_api.units.validation import check_patch_keys, validate_patched
from units_api.validation import parse_model

MAX_LISTED_ERRORS = 100


@dataclass(slots=True)
class _Item:
    index: int
    unit_id: uuid.UUID
    version: int | None
    patch: dict[str, Any]


@dataclass(slots=True)
class _Outcome:
    planned: list[tuple[_Item, UnitRecord, dict[str, Any], dict[str, Any]]] = field(
        default_factory=list
    )
    failures: dict[int, dict[str, Any]] = field(default_factory=dict)
    unchanged: dict[int, tuple[uuid.UUID, int]] = field(default_factory=dict)


def _failure(
    index: int, unit_id: str | None, status: int, errors: list[dict[str, str]]
) -> dict[str, Any]:
    return {"index": index, "id": unit_id, "status": status, "errors": errors}


def _parse_items(spec: BulkItems) -> tuple[list[_Item], dict[int, dict[str, Any]]]:
    items: list[_Item] = []
    failures: dict[int, dict[str, Any]] = {}
    seen: dict[uuid.UUID, int] = {}
    for index, raw in enumerate(spec.units):
        body = dict(raw)
        raw_id, version = body.pop("id", None), body.pop("version", None)
        try:
            unit_id = uuid.UUID(str(raw_id))
        except ValueError:
            shown = None if raw_id is None else str(raw_id)
            failures[index] = _failure(
                index, shown, 422, [{"field": "id", "message": "must be a unit id"}]
            )
            continue
        if unit_id in seen:
            raise ValidationFailed([(f"units[{index}].id", f"repeats units[{seen[unit_id]}].id")])
        seen[unit_id] = index
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            failures[index] = _failure(
                index, str(unit_id), 422, [{"field": "version", "message": "must be an integer"}]
            )
            continue
        items.append(_Item(index, unit_id, version, body))
    return items, failures


def _merge(item: _Item, record: UnitRecord, vocabularies: Vocabularies) -> dict[str, Any]:
    check_patch_keys(item.patch)
    editable = {key: value for key, value in item.patch.items() if key in EDITABLE_FIELDS}
    return validate_patched(record.fields, editable, vocabularies)


async def _plan(
    conn: AsyncConnection, items: list[_Item], who: Caller, vocabularies: Vocabularies
) -> _Outcome:
    policy = _policy(conn, who)
    rows = await repository.fetch_many_for_update(conn, [i.unit_id for i in items], policy)
    outcome = _Outcome()
    for item in items:
        row = rows.get(item.unit_id)
        if row is None:
            outcome.failures[item.index] = _failure(
                item.index, str(item.unit_id), 404, [{"field": "id", "message": "no such unit"}]
            )
            continue
        if item.version is not None and item.version != row["version"]:
            outcome.failures[item.index] = _failure(
                item.index,
                str(item.unit_id),
                412,
                [{"field": "version", "message": f"the unit is at version {row['version']}"}],
            )
            continue
        record = UnitRecord.from_row(item.unit_id, row)
        try:
            fields = _merge(item, record, vocabularies)
        except ValidationFailed as exc:
            outcome.failures[item.index] = _failure(item.index, str(item.unit_id), 422, exc.errors)
            continue
        diffs = diff(record.fields, fields)
        if diffs:
            outcome.planned.append((item, record, fields, diffs))
        else:
            outcome.unchanged[item.index] = (item.unit_id, record.version)
    return outcome


def _policy(conn: AsyncConnection, who: Caller) -> ColumnElement[bool] | None:
    if who.policy_tree is None:
        return None
    return unit_condition(who.policy_tree, conn.dialect.name, "policy")


async def _write(
    conn: AsyncConnection,
    planned: list[tuple[_Item, UnitRecord, dict[str, Any], dict[str, Any]]],
    who: Caller,
) -> dict[int, int]:
    """Write every planned change; returns each item's new version by index."""
    batch = []
    for _, base, fields, diffs in planned:
        record = replace(base, fields=fields)
        batch.append(changes.updated(record, "bulk", diffs))
    await changes.write(conn, "update", batch, who.actor)
    return {
        item.index: change.record.version for (item, *_), change in zip(planned, batch, strict=True)
    }


async def _breaching(conn: AsyncConnection, outcome: _Outcome, who: Caller) -> set[uuid.UUID]:
    policy = _policy(conn, who)
    if policy is None or not outcome.planned:
        return set()
    return await repository.outside(conn, [p[0].unit_id for p in outcome.planned], policy)


def _mark_breaches(outcome: _Outcome, breaching: set[uuid.UUID]) -> None:
    for item, *_ in [p for p in outcome.planned if p[0].unit_id in breaching]:
        outcome.failures[item.index] = _failure(
            item.index,
            str(item.unit_id),
            403,
            [
                {
                    "field": "id",
                    "message": "the change would move the unit outside this key's policy",
                }
            ],
        )
    outcome.planned = [p for p in outcome.planned if p[0].unit_id not in breaching]


async def _apply_atomic(
    conn: AsyncConnection, outcome: _Outcome, who: Caller, total: int | None = None
) -> dict[int, int]:
    if outcome.failures:
        raise _failed(outcome, total)
    versions = await _write(conn, outcome.planned, who)
    breaching = await _breaching(conn, outcome, who)
    if breaching:
        _mark_breaches(outcome, breaching)
        raise _failed(outcome, total)
    return versions


def _failed(outcome: _Outcome, total: int | None) -> ApiError:
    listed = [outcome.failures[i] for i in sorted(outcome.failures)][:MAX_LISTED_ERRORS]
    return BulkFailed(listed, total if total is not None else len(outcome.failures))


async def _apply_partial(conn: AsyncConnection, outcome: _Outcome, who: Caller) -> dict[int, int]:
    savepoint = await conn.begin_nested()
    versions = await _write(conn, outcome.planned, who)
    breaching = await _breaching(conn, outcome, who)
    if not breaching:
        await savepoint.commit()
        return versions
    await savepoint.rollback()
    _mark_breaches(outcome, breaching)
    return await _write(conn, outcome.planned, who)


async def update_items(
    conn: AsyncConnection, body: Any, who: Caller, vocabularies: Vocabularies
) -> dict[str, Any]:
    spec = parse_model(BulkItems, body)
    items, failures = _parse_items(spec)
    outcome = await _plan(conn, items, who, vocabularies)
    outcome.failures.update(failures)
    if spec.atomic:
        versions = await _apply_atomic(conn, outcome, who)
    else:
        versions = await _apply_partial(conn, outcome, who)
    results = []
    for index, raw in enumerate(spec.units):
        if index in outcome.failures:
            failure = outcome.failures[index]
            results.append(
                {
                    "id": failure["id"],
                    "status": failure["status"],
                    "error": {"errors": failure["errors"]},
                }
            )
        elif index in versions:
            results.append({"id": str(raw["id"]), "status": 200, "version": versions[index]})
        else:
            unit_id, version = outcome.unchanged[index]
            results.append({"id": str(unit_id), "status": 200, "version": version})
    failed = len(outcome.failures)
    return {"results": results, "succeeded": len(results) - failed, "failed": failed}


async def update_matching(
    conn: AsyncConnection, body: Any, who: Caller, vocabularies: Vocabularies
) -> dict[str, Any]:
    spec = parse_model(BulkByFilter, body)
    try:
        check_patch_keys(spec.patch)
    except ValidationFailed as exc:
        raise ValidationFailed(
            [(f"patch.{e['field']}", e["message"]) for e in exc.errors]
        ) from None
    condition = unit_condition(parse_filter(spec.filter, "filter"), conn.dialect.name, "filter")
    policy = _policy(conn, who)
    if policy is not None:
        condition = and_(condition, policy)
    ids = await repository.matching_ids(conn, condition, MAX_MATCHED + 1)
    if len(ids) > MAX_MATCHED:
        raise ValidationFailed(
            [("filter", f"matches more than {MAX_MATCHED:,} units; narrow it or patch by items")]
        )
    if spec.dryRun:
        return {"matched": len(ids)}
    items = [_Item(index, unit_id, None, spec.patch) for index, unit_id in enumerate(ids)]
    outcome = await _plan(conn, items, who, vocabularies)
    versions = await _apply_atomic(conn, outcome, who)
    return {"matched": len(ids), "updated": len(versions)}


# A bulk update by items of more units than this, or any by filter, may write for long.
LONG_AFTER = 100


def is_long(body: Any) -> bool:
    """Whether a bulk update's body may write many units (`Database.transaction`'s `long`):
    one by filter (up to MAX_MATCHED units), or by more than LONG_AFTER items."""
    if not isinstance(body, dict):
        return False
    items = body.get("units")
    return "filter" in body or (isinstance(items, list) and len(items) > LONG_AFTER)


async def run(conn: AsyncConnection, body: Any, who: Caller, vocabularies: Vocabularies) -> Any:
    """Either shape of the bulk body: `units` (items) or `filter` + `patch`."""
    if isinstance(body, dict) and "filter" in body and "units" not in body:
        return await update_matching(conn, body, who, vocabularies)
    return await update_items(conn, body, who, vocabularies)
