"""Availability: the only writer of a unit's stock status, and its state machine."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, utcnow
from units_api.errors import ValidationFailed
from units_api.units.publishing import future_time
from units_api.units.record import UnitRecord
from units_api.units.schemas import AvailabilityAction
from units_api.units.service import Caller, Written, locked, move_when_due, save_state
from units_api.units.states import AVAILABILITY, next_state
from units_api.validation import parse_model

EVENTS = {
    "reserve": "unit.reserved",
    "release": "unit.released",
    "sell": "unit.sold",
    "block": "unit.blocked",
    "unblock": "unit.unblocked",
}


def _moved(record: UnitRecord, action: str, until: datetime | None) -> None:
    target = next_state(AVAILABILITY, record.availability["status"], action)
    record.availability = {
        "status": target,
        "reservedUntil": format_time(until) if target == "reserved" else None,
        "changedAt": format_time(utcnow()),
    }


async def act(
    conn: AsyncConnection, unit_id: uuid.UUID, body: Any, if_match: str | None, who: Caller
) -> Written:
    spec = parse_model(AvailabilityAction, body)
    record = await locked(conn, unit_id, if_match, who)
    next_state(AVAILABILITY, record.availability["status"], spec.action)  # 409 before any 422
    if spec.until is not None and spec.action != "reserve":
        raise ValidationFailed([("until", "applies to the reserve action only")])
    until = future_time("until", spec.until) if spec.action == "reserve" else None
    before = dict(record.availability)
    _moved(record, spec.action, until)
    changes = {"availability": {"from": before, "to": record.availability}}
    return await save_state(conn, record, who, spec.action, EVENTS[spec.action], changes)


async def release_expired(conn: AsyncConnection, unit_id: uuid.UUID, who: Caller) -> bool:
    """Release a reservation whose hold has passed; False if there is none to release."""
    due = ("reserved", "reservedUntil")

    def release(record: UnitRecord) -> None:
        _moved(record, "release", None)

    return await move_when_due(
        conn, unit_id, who, "availability", due, "release", EVENTS["release"], release
    )
