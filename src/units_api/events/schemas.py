"""Schemas of the change feed (for the documentation: events are rendered as stored)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from units_api.events.types import EVENT_TYPES


class Actor(BaseModel):
    type: str = Field(examples=["apiKey"], description="`apiKey` or `system`.")
    id: str | None = Field(description="The key's id; null for the system.")
    name: str


class Event(BaseModel):
    """One change. A unit event's `data` is `{"unit": ..., "changes": ...}`: the unit after the
    change (for `unit.deleted`, as it was), and for `unit.updated` the changed fields as
    `{field: {from, to}}`. A job event's `data` is the job; its `unitId` and `version` are
    null. The event by which a unit leaves a key's policy or a webhook's filter (inside before
    the change, outside after) reaches that key or webhook with `"left": true` and `data`
    `{"unitId"}` alone: a follower that mirrors what it may see drops the unit."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "019ab3f0-8c1e-7b2a-9d4e-5f6a7b8c9d0e",
                    "type": "unit.updated",
                    "occurredAt": "2026-11-23T10:15:30.123Z",
                    "unitId": "019ab3ef-1a2b-7c3d-8e4f-5a6b7c8d9e0f",
                    "version": 4,
                    "actor": {
                        "type": "apiKey",
                        "id": "019ab3e0-0000-7000-8000-000000000001",
                        "name": "crm",
                    },
                    "data": {
                        "unit": {"id": "019ab3ef-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "price": 2600000},
                        "changes": {"price": {"from": 2500000, "to": 2600000}},
                    },
                }
            ]
        }
    )

    id: str = Field(description="Unique; also the `webhook-id` of its deliveries.")
    type: str = Field(description="One of: " + ", ".join(EVENT_TYPES) + ".")
    occurredAt: str
    unitId: str | None
    version: int | None = Field(description="The unit's version after the change.")
    actor: Actor
    left: bool = Field(
        default=False,
        description="Present, and true, only on the event by which the unit left the "
        "reader's policy or the webhook's filter; its `data` is then `{\"unitId\"}` alone.",
    )
    data: dict[str, Any] = Field(
        description="A unit event's `{unit, changes}`, a job event's job, or, when `left`, "
        "`{unitId}`."
    )


class EventPage(BaseModel):
    data: list[Event]
    nextCursor: str = Field(
        description="Never null: the position to read from next (at the end, to poll from)."
    )
