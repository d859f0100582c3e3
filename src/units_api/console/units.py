"""The units pages: the list with its filter builder and map, one unit with its history and
actions, the create and edit form, and bulk change by filter. Every read and write is a call
to the API as the session's key (console/api.py)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from units_api.auth.scopes import UNITS_PUBLISH, UNITS_WRITE
from units_api.console import cells, channels, forms, history, maps, messages
from units_api.console.api import Answer
from units_api.console.web import (
    PREFIX,
    Page,
    error_page,
    redirect,
    signed_in,
    text_of,
)
from units_api.filters.parser import quote
from units_api.names.service import Names
from units_api.units.fields import SORTABLE
from units_api.units.states import AVAILABILITY, PUBLISHING

UNITS_API = "/api/v2/units/"
PAGE_SIZES = (20, 50, 100)
HISTORY_SHOWN = 20
BULK_FIELDS = ("filter", "price", "city", "type")
FILTER_FIELDS = ("q", "city", "type", "status", "availability", "minPrice", "maxPrice")
BOX_FIELDS = ("west", "south", "east", "north")
PUBLISHING_STATES = tuple(PUBLISHING)
AVAILABILITY_STATES = tuple(AVAILABILITY)
# Columns of the list, and the fields the list asks the API for.
LIST_FIELDS = (
    "name,unitNameAr,type,city,price,currency,publishing,availability,unitLocation,updatedAt"
)


def filter_of(asked: dict[str, str], names: Names) -> str:
    """The filter builder's choices and the raw filter, joined by AND into one expression. A
    city or type may be given by its display name in either language: it finds the values so
    named as well as the text itself."""
    parts: list[str] = []
    for field in ("city", "type"):
        if asked.get(field):
            parts.append(names.named_filter(field, asked[field]))
    if asked.get("status"):
        parts.append(f"status=={asked['status']}")
    if asked.get("availability"):
        parts.append(f"availability=={asked['availability']}")
    if asked.get("minPrice"):
        parts.append(f"price=ge={quote(asked['minPrice'])}")
    if asked.get("maxPrice"):
        parts.append(f"price=le={quote(asked['maxPrice'])}")
    box = [asked.get(name, "") for name in BOX_FIELDS]
    if all(box):
        parts.append(f"unitLocation=within=({','.join(box)})")
    if asked.get("p"):
        parts.append(f"({asked['p']})")
    return ";".join(parts)


def _asked(request: Request) -> dict[str, str]:
    names = (*FILTER_FIELDS, *BOX_FIELDS, "p", "sortBy", "order", "page", "limit")
    return {name: request.query_params.get(name, "").strip() for name in names}


def _map(page: Page, units: list[dict[str, Any]], asked: dict[str, str]) -> dict[str, Any] | None:
    """The page's units with a location, on a frame that holds them all (or the box filter's,
    when one is set)."""
    points = [
        maps.Point(unit, float(location["coordinates"][0]), float(location["coordinates"][1]))
        for unit in units
        if (location := unit.get("unitLocation") or {}).get("coordinates")
    ]
    box: tuple[float, float, float, float] | None = None
    try:
        west, south, east, north = (float(asked.get(name, "")) for name in BOX_FIELDS)
        box = (west, south, east, north)
    except ValueError:
        pass
    return maps.frame(points, box, page.context.settings.console_tile_url)


def _pages(meta: dict[str, Any]) -> dict[str, Any]:
    total = meta.get("total")
    pages = meta.get("totalPages")
    return {"page": meta.get("page", 1), "total": total, "pages": pages, "count": meta.get("count")}


async def units_page(page: Page) -> Response:
    asked = _asked(page.request)
    limit = (
        int(asked["limit"])
        if asked["limit"].isdigit() and int(asked["limit"]) in PAGE_SIZES
        else 20
    )
    names = await page.context.names.current()
    query = {
        "p": filter_of(asked, names),
        "q": asked["q"],
        "sortBy": asked["sortBy"],
        "order": asked["order"],
        "page": asked["page"],
        "limit": limit,
        "fields": LIST_FIELDS,
    }
    answer = await page.api.get(UNITS_API, query, {"prefer": "count=estimated"})
    problem = None if answer.ok else answer.detail
    data = answer.data if answer.ok else {"data": [], "meta": {}}
    units = data["data"]
    links = {
        name: _console_link(page.request, value)
        for name, value in (data.get("links") or {}).items()
        if value
    }
    shown = _map(page, units, asked)
    return page.render(
        "units.html",
        400 if answer.status == 400 else 200,
        units=units,
        asked=asked,
        limit=limit,
        sizes=PAGE_SIZES,
        meta=_pages(data.get("meta") or {}),
        links=links,
        problem=problem,
        rows=cells.rows(units, page.language, names, page.context.settings.default_currency),
        choices={
            field: [found.in_language(page.language.code) for _, found in names.choices(field)]
            for field in ("city", "type")
        },
        map=shown,
        marks=cells.marks(shown, page.language),
        sorts=tuple(SORTABLE),
        publishing_states=PUBLISHING_STATES,
        availability_states=AVAILABILITY_STATES,
        may_write=page.may(UNITS_WRITE),
    )


def _console_link(request: Request, api_link: str) -> str:
    """An API page link as the same console page: its page number, with the console's own
    filter fields kept as they are."""
    asked = {k: v for k, v in request.query_params.items() if v}
    number = parse_qs(urlsplit(api_link).query).get("page", ["1"])[0]
    asked["page"] = number
    return f"{PREFIX}/units?{urlencode(asked)}"


def _unit_path(unit_id: str) -> str:
    return f"{UNITS_API}{unit_id}"


async def unit_page(page: Page) -> Response:
    return await _unit_view(page, page.request.path_params["unit_id"])


async def _unit_view(
    page: Page, unit_id: str, refused: list[messages.Message] | None = None, status: int = 200
) -> Response:
    """The unit's page; `refused`, a publishing action's 422 in words, beside its form."""
    history_query = {"limit": HISTORY_SHOWN, "cursor": page.request.query_params.get("history")}
    answer, past, standing, channel_list, names = await asyncio.gather(
        page.api.get(_unit_path(unit_id)),
        page.api.get(f"{_unit_path(unit_id)}/history", history_query),
        page.api.get(f"{_unit_path(unit_id)}/channels"),
        page.api.get(channels.CHANNELS_API),
        page.context.names.current(),
    )
    if not answer.ok:
        return error_page(page, answer.status)
    unit = answer.data
    currency = page.context.settings.default_currency
    on = standing.data["data"] if standing.ok else []
    wording = history.Wording(page.language, currency, names)
    return page.render(
        "unit.html",
        status,
        unit=unit,
        history=wording.entries(past.data["data"] if past.ok else [], unit.get("currency")),
        older=past.data["nextCursor"] if past.ok else None,
        action_words=history.action,
        details=cells.details(unit, page.language, currency, names),
        tables=cells.nested_tables(unit, page.language, names),
        named=cells.namer(names, page.language),
        standing=[(entry, channels.why_not(entry, unit, page.language)) for entry in on],
        channel_names=[c["name"] for c in channel_list.data["data"]] if channel_list.ok else [],
        refused=refused or [],
        publishing_actions=_allowed(PUBLISHING, unit["publishing"]["status"])
        if page.may(UNITS_PUBLISH)
        else [],
        availability_actions=_allowed(AVAILABILITY, unit["availability"]["status"])
        if page.may(UNITS_WRITE)
        else [],
        may_write=page.may(UNITS_WRITE),
        done=page.request.query_params.get("done"),
    )


def _allowed(table: dict[str, dict[str, str]], state: str) -> list[str]:
    return list(table.get(state, {}))


async def new_unit(page: Page) -> Response:
    if not page.may(UNITS_WRITE):
        return error_page(page, 403)
    values: dict[str, str] = {}
    if page.request.method == "POST":
        form = await page.request.form()
        values = forms.posted_values(form)
        if "_more" not in form:
            answer = await page.api.send("POST", UNITS_API, forms.body_of(values))
            if answer.ok:
                return redirect(f"{PREFIX}/units/{answer.data['id']}?done=saved")
            return _form(page, values, None, answer)
    return _form(page, values, None, None)


async def edit_unit(page: Page) -> Response:
    if not page.may(UNITS_WRITE):
        return error_page(page, 403)
    unit_id = page.request.path_params["unit_id"]
    if page.request.method == "POST":
        form = await page.request.form()
        values = forms.posted_values(form)
        version = text_of(form, "_version")
        if "_more" in form:
            return _form(page, values, unit_id, None, version)
        answer = await page.api.send(
            "PUT", _unit_path(unit_id), forms.body_of(values), {"if-match": f'"{version}"'}
        )
        if answer.ok:
            return redirect(f"{PREFIX}/units/{unit_id}?done=saved")
        return _form(page, values, unit_id, answer, version)
    answer = await page.api.get(_unit_path(unit_id))
    if not answer.ok:
        return error_page(page, answer.status)
    return _form(page, forms.values_of(answer.data), unit_id, None, str(answer.data["version"]))


def _form(
    page: Page,
    values: dict[str, str],
    unit_id: str | None,
    answer: Answer | None,
    version: str = "",
) -> Response:
    status = 200
    errors: dict[str, str] = {}
    problem = None
    conflict = False
    if answer is not None:
        status = answer.status if answer.status in (400, 403, 404, 409, 412, 422) else 503
        conflict = answer.status == 412
        errors = messages.in_words(answer.errors, page.language)
        problem = None if conflict or errors else answer.detail or None
    return page.render(
        "unit_form.html",
        status,
        values=values,
        unit_id=unit_id,
        version=version,
        form=forms.unit_form(),
        tables=list(forms.tables_with_blanks(values)),
        errors=errors,
        problem=problem,
        conflict=conflict,
    )


async def unit_action(page: Page) -> Response:
    """A publishing or availability action from the unit page's buttons."""
    unit_id = page.request.path_params["unit_id"]
    axis = page.request.path_params["axis"]
    if axis not in ("publishing", "availability"):
        return error_page(page, 404)
    form = await page.request.form()
    action = text_of(form, "action")
    body: dict[str, Any] = {"action": action}
    if axis == "publishing":
        if text_of(form, "at"):
            body["at"] = _as_time(text_of(form, "at"))
        # The form's checkboxes (`_channels` says they were offered): none checked is none.
        chosen = [str(name) for name in form.getlist("channels") if str(name)]
        if chosen or "_channels" in form:
            body["channels"] = chosen
    elif text_of(form, "until"):
        body["until"] = _as_time(text_of(form, "until"))
    version = text_of(form, "version")
    path = f"{UNITS_API}{axis}-actions/{unit_id}"
    answer = await page.api.send("PUT", path, orjson.dumps(body), {"if-match": f'"{version}"'})
    if answer.ok:
        return redirect(f"{PREFIX}/units/{unit_id}?done={action}")
    if answer.status == 422 and answer.errors:
        refused = channels.publish_messages(answer.errors, page.language)
        return await _unit_view(page, unit_id, refused, 422)
    unit = await page.api.get(_unit_path(unit_id))
    if not unit.ok:
        return error_page(page, unit.status)
    return page.render(
        "message.html",
        answer.status if answer.status < 500 else 503,
        message=page.t("Changed by someone else since you opened it.")
        if answer.status == 412
        else answer.detail,
        errors=answer.errors,
        back=f"{PREFIX}/units/{unit_id}",
    )


def _as_time(value: str) -> str:
    """A `datetime-local` input (no zone) is read as UTC, the zone the console shows times in."""
    if len(value) == 16 and value[10] == "T":
        return f"{value}:00Z"
    return value


async def bulk_page(page: Page) -> Response:
    """Change every unit that matches a filter: the first post previews the count (the API's
    dry run), the second, with the count confirmed, applies."""
    if not page.may(UNITS_WRITE):
        return error_page(page, 403)
    values: dict[str, str] = {}
    preview: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    answer: Answer | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in BULK_FIELDS}
        patch = {
            name: (_number_or_text(values[name]) if name == "price" else values[name])
            for name in ("price", "city", "type")
            if values[name]
        }
        # Applied only as previewed: a filter or change edited after its preview is previewed
        # again rather than applied unseen.
        previewed = text_of(form, "_previewed")
        apply = text_of(form, "_apply") == "1" and previewed == _signature(values)
        body = {"filter": values["filter"], "patch": patch, "dryRun": not apply}
        answer = await page.api.send("PUT", f"{UNITS_API}bulk/update", orjson.dumps(body))
        if answer.ok:
            if apply:
                result = answer.data
            else:
                preview = answer.data
    return page.render(
        "bulk.html",
        200 if answer is None or answer.ok else min(answer.status, 503),
        signature=_signature(values) if preview else "",
        values=values,
        preview=preview,
        result=result,
        errors=answer.errors if answer is not None else {},
        problem=None if answer is None or answer.ok or answer.errors else answer.detail,
    )


def _signature(values: dict[str, str]) -> str:
    return orjson.dumps([values.get(name, "") for name in BULK_FIELDS]).decode()


def _number_or_text(text: str) -> Any:
    try:
        number = Decimal(text.replace(",", ""))
    except ArithmeticError:
        return text
    return orjson.Fragment(str(number).encode()) if number.is_finite() else text


ROUTES = [
    Route(f"{PREFIX}/units", signed_in(units_page), methods=["GET"]),
    Route(f"{PREFIX}/units/new", signed_in(new_unit), methods=["GET", "POST"]),
    Route(f"{PREFIX}/units/{{unit_id}}", signed_in(unit_page), methods=["GET"]),
    Route(f"{PREFIX}/units/{{unit_id}}/edit", signed_in(edit_unit), methods=["GET", "POST"]),
    Route(
        f"{PREFIX}/units/{{unit_id}}/{{axis:str}}",
        signed_in(unit_action),
        methods=["POST"],
    ),
    Route(f"{PREFIX}/bulk", signed_in(bulk_page), methods=["GET", "POST"]),
]
