"""Schemas of the admin API for keys."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from units_api.auth.scopes import ALL_SCOPES
from units_api.clock import parse_future_time
from units_api.http.rates import parse_rate

Scope = Literal[
    "units:read", "units:write", "units:publish", "units:export", "events:read", "admin"
]
assert set(Scope.__args__) == set(ALL_SCOPES)  # type: ignore[attr-defined]


def _future_time(value: str) -> str:
    parse_future_time(value)
    return value


def _rate(value: str) -> str:
    parse_rate(value)
    return value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain the NUL character")
    return value


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "website",
                    "scopes": ["units:read"],
                    "rateLimit": "600/minute",
                    "expiresAt": "2027-06-30T00:00:00Z",
                }
            ]
        },
    )

    name: Annotated[
        str, StringConstraints(min_length=1, max_length=200), AfterValidator(_non_blank)
    ]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(ALL_SCOPES))]
    policy: str | None = Field(
        default=None,
        description="A filter (RSQL) joined by AND to every read and write the key makes.",
    )
    expiresAt: Annotated[str, AfterValidator(_future_time)] | None = Field(
        default=None, description="RFC 3339, in the future.", examples=["2027-06-30T00:00:00Z"]
    )
    rateLimit: Annotated[str, AfterValidator(_rate)] | None = Field(
        default=None, description="Requests per window, e.g. 600/minute.", examples=["600/minute"]
    )


class ApiKeyRead(BaseModel):
    id: str
    name: str
    prefix: str
    scopes: list[str]
    policy: str | None
    rateLimit: str | None
    expiresAt: str | None
    createdAt: str
    lastUsedAt: str | None
    revokedAt: str | None


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="The secret. Shown only in this response.")


class ApiKeyPage(BaseModel):
    data: list[ApiKeyRead]
    nextCursor: str | None
