"""The channel's request and response models, and each kind's settings."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from units_api.channels.readiness import KINDS, META_CATALOG, NAME_PATTERN

Kind = Literal["label", "website", "meta-catalog"]
PROPERTY_TYPES = ("apartment", "condo", "house", "townhouse", "land", "other")
TOKEN_PREFIX = "uft_"  # noqa: S105 (a prefix, so scanners can spot feed tokens)


def _url_template(value: str) -> str:
    if "{id}" not in value:
        raise ValueError("must contain {id}, where the unit's id goes")
    parts = urlsplit(value.replace("{id}", "x"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http(s) URL")
    return value


class LabelSettings(BaseModel):
    """A label sends nothing anywhere: it takes no settings."""

    model_config = ConfigDict(extra="forbid")


class WebsiteSettings(BaseModel):
    """The website's pages are this service's own (/listings/): no settings."""

    model_config = ConfigDict(extra="forbid")


class MetaCatalogSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    urlTemplate: (
        Annotated[str, StringConstraints(max_length=2000), AfterValidator(_url_template)] | None
    ) = Field(
        default=None,
        description="Each listing's `url`, `{id}` replaced by the unit's id "
        "(e.g. `https://homes.example.com/units/{id}`); absent, the unit's page on the website.",
    )
    propertyTypes: (
        dict[
            Annotated[str, StringConstraints(min_length=1, max_length=500)],
            Literal["apartment", "condo", "house", "townhouse", "land", "other"],
        ]
        | None
    ) = Field(
        default=None,
        max_length=500,
        description="A unit's `type` (compared without case) -> Meta's `property_type`; a type "
        "not named is `other`.",
    )


SETTINGS: dict[str, type[BaseModel]] = {
    "label": LabelSettings,
    "website": WebsiteSettings,
    "meta-catalog": MetaCatalogSettings,
}
assert tuple(SETTINGS) == KINDS


class ChannelPut(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"kind": "label"},
                {
                    "kind": META_CATALOG,
                    "settings": {"propertyTypes": {"apartment": "apartment", "villa": "house"}},
                },
            ]
        },
    )

    kind: Kind = Field(
        description="`label`: a name, nothing is sent anywhere. `website`: the public pages "
        "(/listings/), the sitemaps and IndexNow. `meta-catalog`: a home-listings feed for "
        "Facebook and Instagram catalog ads (/feeds/{name}.xml and .csv)."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="By kind: `meta-catalog` takes `urlTemplate` and `propertyTypes` "
        "(MetaCatalogSettings); `label` and `website` take none.",
    )


class ChannelRead(BaseModel):
    name: str = Field(pattern=NAME_PATTERN)
    kind: Kind
    settings: dict[str, Any]
    feedUrls: dict[str, str] | None = Field(
        description="A meta-catalog channel's feed, as XML and CSV (fetched with HTTP Basic: "
        "the channel's name and its feed token); null for other kinds."
    )
    feedTokenPrefix: str | None = Field(
        description="The feed token's first characters, to tell tokens apart; never the token."
    )
    createdAt: str
    updatedAt: str


class ChannelWritten(ChannelRead):
    feedToken: str | None = Field(
        description="A meta-catalog channel's new feed token, shown in this answer only: when "
        "the channel is created (or becomes a meta-catalog) and when its token is rotated."
    )


class ChannelList(BaseModel):
    data: list[ChannelRead]


class UnitChannel(BaseModel):
    channel: str
    kind: Kind | None = Field(description="Null for a name that is no channel any more.")
    live: bool = Field(
        description="Published, named in `publishing.channels`, not blocked, and meeting "
        "the channel's readiness rules (and, for a feed, its required fields)."
    )
    url: str | None = Field(
        description="Where buyers find it: the public page (website), the listing's `url` "
        "(meta-catalog); null for a label."
    )
    missing: list[str] = Field(
        description="What the channel's rules lack now (e.g. after an edit cleared a field); "
        "while any is missing the unit is left out of the channel's output."
    )


class UnitChannels(BaseModel):
    data: list[UnitChannel]
