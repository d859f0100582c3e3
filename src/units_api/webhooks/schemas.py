"""Schemas of the webhooks API."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from units_api.events.types import EVENT_TYPES
from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.webhooks.guard import ALLOW_PRIVATE, MAX_URL_LENGTH, UnsafeTarget, split_url
from units_api.webhooks.sender import KEEP_AT_MOST

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = (24, 64)
ALL_TYPES = "*"
_EXAMPLE_URL = "https://crm.example.com/hooks/units"


def _url(value: str) -> str:
    try:
        split_url(value)
    except UnsafeTarget as exc:
        raise ValueError(str(exc)) from None
    return value


def _event_types(value: list[str]) -> list[str]:
    if value == [ALL_TYPES]:
        return value
    unknown = [name for name in value if name not in EVENT_TYPES]
    if unknown:
        raise ValueError(
            f"unknown event type(s) {', '.join(unknown)}; use ['*'] or any of "
            + ", ".join(EVENT_TYPES)
        )
    return list(dict.fromkeys(value))


def _secret(value: str) -> str:
    raw = value.removeprefix(SECRET_PREFIX)
    try:
        decoded = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    low, high = SECRET_BYTES
    if not value.startswith(SECRET_PREFIX) or not low <= len(decoded) <= high:
        raise ValueError(f"must be '{SECRET_PREFIX}' + base64 of {low} to {high} random bytes")
    return value


Url = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_URL_LENGTH), AfterValidator(_url)
]
EventTypes = Annotated[list[str], Field(min_length=1, max_length=64), AfterValidator(_event_types)]
Description = Annotated[str, StringConstraints(max_length=500)]
Filter = Annotated[str, StringConstraints(min_length=1, max_length=MAX_FILTER_LENGTH)]

_URL_TEXT = (
    "The receiver: an http(s) URL whose host is public (a host that is or resolves to a "
    "private, loopback, link-local or other non-global address is refused, unless the "
    f"server runs with `{ALLOW_PRIVATE}=true`)."
)
_TYPES_TEXT = 'Event types to deliver, or `["*"]` for all.'
_FILTER_TEXT = (
    "A unit filter (RSQL, as a key policy): only events whose unit matches it are delivered, "
    "judged on the unit as the event carries it, and the event by which a unit leaves it "
    '(matching before the change, not after), sent with `"left": true` and `data` '
    '`{"unitId"}` only. Job events are not delivered: a filter with job event types '
    "(`export.*`, `import.*`) is a 422."
)


class WebhookCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "url": _EXAMPLE_URL,
                    "eventTypes": ["unit.published", "unit.unpublished", "unit.sold"],
                    "description": "CRM sync",
                    "filter": "city==Cairo",
                }
            ]
        },
    )

    url: Url = Field(description=_URL_TEXT)
    eventTypes: EventTypes = Field(description=_TYPES_TEXT)
    description: Description | None = None
    secret: Annotated[str, AfterValidator(_secret)] | None = Field(
        default=None,
        description=f"`whsec_` + base64 of {SECRET_BYTES[0]} to {SECRET_BYTES[1]} random bytes; "
        "generated when absent.",
    )
    filter: Filter | None = Field(default=None, description=_FILTER_TEXT)


class WebhookPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": True}]})

    url: Url | None = Field(default=None, description=_URL_TEXT)
    eventTypes: EventTypes | None = Field(default=None, description=_TYPES_TEXT)
    description: Description | None = None
    filter: Filter | None = Field(default=None, description=_FILTER_TEXT + " `null` removes it.")
    enabled: bool | None = Field(
        default=None,
        description="`true` enables a disabled webhook again: it receives the events that "
        "happen from then on.",
    )


class WebhookRead(BaseModel):
    id: str
    url: str
    eventTypes: list[str]
    description: str | None
    filter: str | None
    enabled: bool
    disabledReason: str | None = Field(description="Why it was disabled, when it is.")
    createdAt: str
    updatedAt: str


class WebhookCreated(WebhookRead):
    secret: str = Field(description="The signing secret. Shown only in this response.")


class WebhookPage(BaseModel):
    data: list[WebhookRead]
    nextCursor: str | None


class Delivery(BaseModel):
    id: str
    eventId: str = Field(description="Also the `webhook-id` header of every attempt.")
    eventType: str
    status: str = Field(description="pending, succeeded or failed.")
    attempts: int
    nextAttemptAt: str | None
    lastAttemptAt: str | None
    lastStatusCode: int | None
    lastError: str | None
    lastDurationMs: int | None
    lastResponse: str | None = Field(description="The start of the last answer's body.")


class DeliveryPage(BaseModel):
    data: list[Delivery]
    nextCursor: str | None


class DeliveryAttempt(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "attemptedAt": "2026-11-25T10:15:03.120Z",
                    "statusCode": 503,
                    "durationMs": 184,
                    "error": "answered 503",
                    "responseBody": "upstream unavailable",
                }
            ]
        }
    )

    attemptedAt: str
    statusCode: int | None = Field(description="The receiver's status; null if none came.")
    durationMs: int
    error: str | None = Field(description="Why it failed; null for a 2xx.")
    responseBody: str | None = Field(
        description=f"The first {KEEP_AT_MOST:,} bytes of the answer's body, cut at a "
        "character boundary; null if no answer came."
    )


class DeliveryAttempts(BaseModel):
    data: list[DeliveryAttempt] = Field(description="Every attempt, newest first.")


class TestResult(BaseModel):
    statusCode: int | None = Field(description="The receiver's status; null if none came.")
    durationMs: int
    error: str | None
