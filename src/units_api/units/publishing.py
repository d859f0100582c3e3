"""Publishing: the only writer of a unit's publishing status, and its state machine."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.channels.readiness import missing_to_publish, requirement_text
from units_api.clock import format_time, parse_future_time, utcnow
from units_api.errors import ValidationFailed
from units_api.units import changes, repository
from units_api.units.record import UnitRecord
from units_api.units.schemas import PublishingAction
from units_api.units.service import Caller, Written, locked, locked_many, move_when_due, save_state
from units_api.units.states import PUBLISHING, next_state
from units_api.validation import parse_model

EVENTS = {
    "publish": "unit.published",
    "schedule": "unit.scheduled",
    "unpublish": "unit.unpublished",
    "archive": "unit.archived",
    "restore": "unit.restored",
}


def future_time(field: str, value: str | None) -> datetime:
    """An RFC 3339 time in the future, or a 422 naming the field."""
    if value is None:
        raise ValidationFailed([(field, "is required for this action")])
    try:
        return parse_future_time(value)
    except ValueError as error:
        raise ValidationFailed([(field, str(error))]) from None


_READINESS_TEXT = {
    "price": "price > 0",
    "image": "an image (`unitImageUrl` or a `gallery` item)",
}


def readiness_text(required: tuple[str, ...]) -> str:
    """The readiness rules in words, for the documentation."""
    return ", ".join(_READINESS_TEXT.get(name, name) for name in required)


def missing_for_publishing(fields: dict[str, Any], required: tuple[str, ...]) -> list[str]:
    """What stops a unit from being published: the readiness rules, configurable."""
    missing = []
    for name in required:
        if name == "image":
            ready = bool(fields.get("unitImageUrl")) or bool(fields.get("gallery"))
        elif name == "price":
            ready = fields.get("price") is not None and fields["price"] > 0
        else:
            value = fields.get(name)
            ready = bool(value.strip()) if isinstance(value, str) else value not in (None, [])
        if not ready:
            missing.append(name)
    return missing


def _moved(record: UnitRecord, action: str, spec: PublishingAction, at: datetime | None) -> None:
    before = record.publishing
    target = next_state(PUBLISHING, before["status"], action)
    after = {**before, "status": target}
    if spec.channels is not None:
        after["channels"] = list(dict.fromkeys(spec.channels))
    if action == "publish":
        after["scheduledAt"] = None
        if before["status"] != "published":
            after["publishedAt"] = format_time(utcnow())
    elif action == "schedule":
        after["scheduledAt"] = format_time(at)
    elif action in ("unpublish", "archive"):
        after["scheduledAt"] = None
    elif action == "restore":
        after["publishedAt"] = None
        after["scheduledAt"] = None
    record.publishing = after


def _check_names(names: list[str], known: Mapping[str, str]) -> None:
    """Every name is a channel, or a 422 listing the channels."""
    unknown = [(f"channels[{i}]", name) for i, name in enumerate(names) if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise ValidationFailed(
            [
                (path, f"{name!r} is no channel; the channels are: {listed}")
                for path, name in unknown
            ],
            detail="Publish to channels by name (GET /api/v2/channels lists them): "
            + ", ".join(repr(name) for _, name in unknown)
            + " is no channel.",
        )


def _check_ready(
    fields: Mapping[str, Any],
    channels: list[str],
    readiness: tuple[str, ...],
    known: Mapping[str, str],
) -> None:
    """Section 7's readiness, then each channel's rules, in one 422 naming every miss (a
    channel's as `channels.<name>.<field>`)."""
    missing = missing_for_publishing(dict(fields), readiness)
    errors = [(name, "is required to publish") for name in missing]
    for channel in channels:
        kind = known[channel]
        for name in missing_to_publish(kind, fields):
            needs = f"channel {channel} ({kind}) needs {requirement_text(name)}"
            errors.append((f"channels.{channel}.{name}", needs))
            missing.append(f"{name} (for {channel})")
    if errors:
        raise ValidationFailed(
            errors, detail="The unit is not ready to publish: " + ", ".join(missing) + "."
        )


async def _move(
    conn: AsyncConnection,
    record: UnitRecord,
    who: Caller,
    spec: PublishingAction,
    readiness: tuple[str, ...],
    known: Mapping[str, str],
) -> Written:
    next_state(PUBLISHING, record.publishing["status"], spec.action)  # 409 before any 422
    if spec.at is not None and spec.action != "schedule":
        raise ValidationFailed([("at", "applies to the schedule action only")])
    at = future_time("at", spec.at) if spec.action == "schedule" else None
    if spec.channels is not None:
        _check_names(spec.channels, known)
    if spec.action in ("publish", "schedule"):
        channels = record.publishing["channels"] if spec.channels is None else spec.channels
        _check_names(channels, known)
        _check_ready(record.fields, list(dict.fromkeys(channels)), readiness, known)
    before = dict(record.publishing)
    _moved(record, spec.action, spec, at)
    changes = {"publishing": {"from": before, "to": record.publishing}}
    return await save_state(conn, record, who, spec.action, EVENTS[spec.action], changes)


async def act(
    conn: AsyncConnection,
    unit_id: uuid.UUID,
    body: Any,
    if_match: str | None,
    who: Caller,
    readiness: tuple[str, ...],
    known: Mapping[str, str],
) -> Written:
    """Run a publishing action; `known`: every channel's name and kind."""
    spec = parse_model(PublishingAction, body)
    record = await locked(conn, unit_id, if_match, who)
    return await _move(conn, record, who, spec, readiness, known)


async def publish_due(conn: AsyncConnection, unit_id: uuid.UUID, who: Caller) -> bool:
    """Publish a scheduled unit whose time has come; False if it no longer is one."""
    due = ("scheduled", "scheduledAt")

    def publish(record: UnitRecord) -> None:
        _moved(record, "publish", PublishingAction(action="publish"), None)

    return await move_when_due(
        conn, unit_id, who, "publishing", due, "publish", EVENTS["publish"], publish
    )


# Units whose channels a deleted channel is taken out of, per statement.
DROP_BATCH = 500


async def drop_channel(conn: AsyncConnection, name: str, who: Caller) -> int:
    """Take `name` out of every unit's `publishing.channels` (a deleted channel), each a new
    version with its history entry and `unit.updated` event whose `changes` show the
    publishing before and after (so a follower whose filter names the channel is told the
    unit left it). Returns how many units changed."""
    changed = 0
    while ids := await repository.carrying_channel(conn, name, DROP_BATCH):
        batch = []
        for record in (await locked_many(conn, ids)).values():
            before = record.publishing
            kept = [channel for channel in before["channels"] if channel != name]
            record.publishing = {**before, "channels": kept}
            diffs = {"publishing": {"from": before, "to": record.publishing}}
            batch.append(changes.Change(record, "channel-delete", "unit.updated", diffs, False))
        await changes.write(conn, "update", batch, who.actor)
        changed += len(batch)
    return changed
