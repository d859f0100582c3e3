"""Channels in the console: the admin's page (list, create or replace, delete after a
confirmation, rotate a feed token and show it once with the feed's addresses), a unit's
standing on its channels in words, and a publish's 422 in a manager's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson
from starlette.responses import Response
from starlette.routing import Route

from units_api.console.admin import admin_only
from units_api.console.api import Answer
from units_api.console.i18n import Language
from units_api.console.messages import Message, friendly
from units_api.console.web import PREFIX, Page, error_page, redirect, text_of
from units_api.filters.parser import quote as filter_value

CHANNELS_API = "/api/v2/channels"
KINDS = ("label", "website", "meta-catalog")
META_CATALOG = "meta-catalog"
# What a channel's readiness rule asks for, in words ("Channel website needs a city").
NEEDS: dict[str, tuple[str, str]] = {
    "name": ("a name", "اسم"),
    "price": ("a price", "سعر"),
    "city": ("a city", "مدينة"),
    "image": ("an image", "صورة"),
    "unitLocation": ("a map position", "موقع على الخريطة"),
    "location": ("a location", "موقع"),
    "unitDesc": ("a description", "وصف"),
    "country": ("a country", "دولة"),
}
# A readiness rule's name -> the unit field whose label names it on the page.
LABELLED = {"image": "unitImageUrl"}


def _path(name: str) -> str:
    return f"{CHANNELS_API}/{quote(name, safe='')}"


def missing_labels(missing: list[str], language: Language) -> list[str]:
    return [language.field(LABELLED.get(name, name)) for name in missing]


def why_not(standing: Mapping[str, Any], unit: Mapping[str, Any], language: Language) -> str:
    """Why a unit is not live on a channel, in words ("" when it is)."""
    if standing.get("live"):
        return ""
    if standing.get("kind") is None:
        return language.t("not a channel any more")
    if standing.get("missing"):
        labels = ", ".join(missing_labels(list(standing["missing"]), language))
        return f"{language.t('Missing')}: {labels}"
    if unit["publishing"]["status"] != "published":
        return language.t("not published")
    if unit["availability"]["status"] == "blocked":
        return language.t("blocked")
    return language.t("sold more than 30 days ago")


def publish_messages(errors: Mapping[str, str], language: Language) -> list[Message]:
    """A publish or schedule 422 in a manager's words: a channel's readiness
    (`channels.<name>.<field>`) as "Channel website needs a city", a field section 7 asks
    for as "Price is needed to publish"."""
    shown: list[Message] = []
    for field, text in errors.items():
        parts = field.split(".")
        if len(parts) == 3 and parts[0] == "channels" and parts[2] in NEEDS:
            what = NEEDS[parts[2]][1 if language.code == "ar" else 0]
            words = language.t("Channel {channel} needs {what}").format(channel=parts[1], what=what)
        elif text == "is required to publish":
            label = language.field(LABELLED.get(field, field))
            words = language.t("{field} is needed to publish").format(field=label)
        else:
            words = friendly(field, text, language)
        shown.append(Message(words, text))
    return shown


async def channels_page(page: Page) -> Response:
    values = {"name": "", "kind": "label", "urlTemplate": ""}
    answer: Answer | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in values}
        answer = await _put(page, values)
        if answer.ok and not answer.data.get("feedToken"):
            return redirect(f"{PREFIX}/channels?done=saved")
    written = answer.data if answer is not None and answer.ok else None
    return await _view(page, values, answer, written)


async def _put(page: Page, values: dict[str, str]) -> Answer:
    """PUT the channel: a meta-catalog keeps its other settings (its property types) when its
    URL template is changed here."""
    if not values["name"]:  # an empty last segment is no path of the API: named here
        blank = {"field": "name", "message": "is required"}
        return Answer(422, {}, b"", {"detail": "", "errors": [blank]})
    settings: dict[str, Any] = {}
    if values["kind"] == META_CATALOG:
        existing = await page.api.get(_path(values["name"]))
        if existing.ok and existing.data["kind"] == META_CATALOG:
            settings = dict(existing.data["settings"])
        settings.pop("urlTemplate", None)
        if values["urlTemplate"]:
            settings["urlTemplate"] = values["urlTemplate"]
    body = orjson.dumps({"kind": values["kind"], "settings": settings})
    return await page.api.send("PUT", _path(values["name"]), body)


def _errors(answer: Answer | None, language: Language) -> dict[str, Message]:
    if answer is None:
        return {}
    found = {name.removeprefix("settings."): text for name, text in answer.errors.items()}
    return {name: Message(friendly(name, text, language), text) for name, text in found.items()}


async def _view(
    page: Page,
    values: dict[str, str],
    answer: Answer | None,
    written: dict[str, Any] | None,
) -> Response:
    listed = await page.api.get(CHANNELS_API)
    errors = _errors(answer, page.language)
    status = 200
    if answer is not None:
        status = answer.status if not answer.ok else 200
    return page.render(
        "channels.html",
        min(status, 503),
        channels=listed.data["data"] if listed.ok else [],
        values=values,
        kinds=KINDS,
        written=written,
        errors=errors,
        problem=None if answer is None or answer.ok or errors else answer.detail,
        done=page.request.query_params.get("done"),
    )


async def rotate_token(page: Page) -> Response:
    name = page.request.path_params["name"]
    answer = await page.api.send("POST", f"{_path(name)}/rotate-token", b"{}")
    if not answer.ok:
        return _refused(page, answer)
    values = {"name": "", "kind": "label", "urlTemplate": ""}
    return await _view(page, values, None, answer.data)


async def delete_channel(page: Page) -> Response:
    """GET: what deleting the channel does, and a button to do it; POST: delete it."""
    name = page.request.path_params["name"]
    if page.request.method == "POST":
        answer = await page.api.call("DELETE", _path(name))
        if answer.ok:
            return redirect(f"{PREFIX}/channels?done=deleted")
        return _refused(page, answer)
    found = await page.api.get(_path(name))
    if not found.ok:
        return error_page(page, found.status)
    query = {"p": f"channel=={filter_value(name)}", "limit": 1, "fields": "id"}
    units = await page.api.get("/api/v2/units/", query, {"prefer": "count=exact"})
    count = (units.data.get("meta") or {}).get("total") if units.ok else None
    return page.render("channel_delete.html", channel=found.data, count=count)


def _refused(page: Page, answer: Answer) -> Response:
    back = f"{PREFIX}/channels"
    return page.render("message.html", min(answer.status, 503), message=answer.detail, back=back)


ROUTES = [
    Route(f"{PREFIX}/channels", admin_only(channels_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/channels/{{name}}/rotate", admin_only(rotate_token), methods=["POST"]),
    Route(
        f"{PREFIX}/channels/{{name}}/delete", admin_only(delete_channel), methods=["GET", "POST"]
    ),
]
