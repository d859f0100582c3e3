"""Schemas of the display names' API: the names sent (`DisplayNameWrite`), the field and
value they name (`NameKey`, from the path), and an entry as read."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from units_api.names.values import FIELDS, MAX_NAME, MAX_VALUE, control_free, normalize

NamedField = Literal[
    "type", "city", "location", "country", "view", "featureType", "service", "priceBase", "uom"
]
assert NamedField.__args__ == FIELDS  # type: ignore[attr-defined]


def _no_control(text: str) -> str:
    if not control_free(text):
        raise ValueError("must not contain control characters")
    return text


def _value(text: str) -> str:
    _no_control(text)
    if not normalize(text):
        raise ValueError("must not be blank")
    if len(normalize(text)) > MAX_VALUE:
        raise ValueError(f"must be at most {MAX_VALUE} characters")
    return text


NameText = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME),
    AfterValidator(_no_control),
]


class DisplayNameWrite(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"en": "Twin house", "ar": "توين هاوس"}]},
    )

    en: NameText = Field(description=f"The English name, 1 to {MAX_NAME} characters.")
    ar: NameText = Field(description=f"The Arabic name, 1 to {MAX_NAME} characters.")


class NameKey(BaseModel):
    """The field and value of a display-names path, checked as a body is."""

    model_config = ConfigDict(extra="forbid")

    field: NamedField
    value: Annotated[str, AfterValidator(_value)]


class NamePair(BaseModel):
    en: str
    ar: str


class DisplayNameRead(BaseModel):
    field: NamedField
    value: str = Field(description="The value named, trimmed and case-folded.")
    en: str
    ar: str
    builtIn: bool = Field(description="The names shown are the built-in ones (none stored).")
    builtInNames: NamePair | None = Field(
        description="The value's built-in names, if it has any (a stored entry overrides "
        "them; deleting it brings them back)."
    )
    updatedAt: str | None = Field(
        description="When the stored entry was last set; null for a built-in one."
    )


class DisplayNameList(BaseModel):
    data: list[DisplayNameRead]
