"""The admin pages: webhooks (create, test ping, delivery log with every attempt, redeliver,
rotate the secret and show the new one once, enable, disable, delete), API keys (issue,
show the secret once, revoke) and display names (set, override a built-in one, delete).
Admin keys only, as in the API."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import orjson
from starlette.datastructures import FormData
from starlette.responses import Response
from starlette.routing import Route

from units_api.auth.scopes import ADMIN, ALL_SCOPES
from units_api.console.api import Answer
from units_api.console.web import PREFIX, Page, error_page, redirect, signed_in, text_of
from units_api.events.types import EVENT_TYPES
from units_api.names.values import FIELDS as NAMED_FIELDS

WEBHOOKS_API = "/api/v2/webhooks"
KEYS_API = "/api/v2/api-keys"
NAMES_API = "/api/v2/display-names"
DELIVERY_STATUSES = ("pending", "succeeded", "failed")
LISTED = 100  # webhooks or keys a page lists


def admin_only(handler: Any) -> Any:
    async def page(current: Page) -> Response:
        if not current.may(ADMIN):
            return error_page(current, 403)
        response: Response = await handler(current)
        return response

    return signed_in(page)


def _page_of(page: Page) -> dict[str, Any]:
    """A page of a list, oldest first, after the cursor the page was given."""
    return {"limit": LISTED, "cursor": page.request.query_params.get("cursor")}


def _problem(answer: Answer | None) -> str | None:
    return None if answer is None or answer.ok or answer.errors else answer.detail


def _status(answer: Answer | None) -> int:
    return 200 if answer is None or answer.ok else min(answer.status, 503)


async def _create_then_list(
    page: Page, api: str, body: dict[str, Any] | None, template: str, listed_as: str, **shown: Any
) -> Response:
    """A page that creates (webhooks, keys): `body` sent to `api` when the form was posted,
    then a page of the list, shown as `listed_as` beside what was created, the API's errors
    and the rest of what the page shows (`shown`)."""
    answer: Answer | None = None
    created: dict[str, Any] | None = None
    if body is not None:
        answer = await page.api.send("POST", api, orjson.dumps(body))
        if answer.ok:
            created = answer.data
    listed = await page.api.get(api, _page_of(page))
    shown[listed_as] = listed.data["data"] if listed.ok else []
    return page.render(
        template,
        201 if created else _status(answer),
        next_cursor=listed.data.get("nextCursor") if listed.ok else None,
        created=created,
        errors=answer.errors if answer else {},
        problem=_problem(answer),
        **shown,
    )


async def webhooks_page(page: Page) -> Response:
    values = {"url": "", "description": "", "filter": "", "eventTypes": ["*"]}
    body: dict[str, Any] | None = None
    if page.request.method == "POST":
        values = _webhook_values(await page.request.form())
        body = {k: v for k, v in values.items() if v not in ("", [])}
    types = ("*", *EVENT_TYPES)
    return await _create_then_list(
        page, WEBHOOKS_API, body, "webhooks.html", "webhooks", values=values, event_types=types
    )


def _webhook_values(form: FormData) -> dict[str, Any]:
    types = [str(value) for value in form.getlist("eventTypes") if str(value)]
    return {
        "url": text_of(form, "url"),
        "description": text_of(form, "description"),
        "filter": text_of(form, "filter"),
        "eventTypes": types,
    }


async def webhook_page(page: Page) -> Response:
    webhook_id = page.request.path_params["webhook_id"]
    path = f"{WEBHOOKS_API}/{webhook_id}"
    answer = await page.api.get(path)
    if not answer.ok:
        return error_page(page, answer.status)
    status = page.request.query_params.get("status", "")
    query = {"limit": 50, "status": status if status in DELIVERY_STATUSES else ""}
    deliveries = await page.api.get(f"{path}/deliveries", query)
    chosen = page.request.query_params.get("delivery")
    attempts = None
    if chosen:
        found = await page.api.get(f"{path}/deliveries/{chosen}/attempts", {"limit": 50})
        attempts = found.data["data"] if found.ok else []
    return page.render(
        "webhook.html",
        webhook=answer.data,
        deliveries=deliveries.data["data"] if deliveries.ok else [],
        statuses=DELIVERY_STATUSES,
        shown=query["status"],
        chosen=chosen,
        attempts=attempts,
        done=page.request.query_params.get("done"),
    )


async def webhook_action(page: Page) -> Response:
    """The buttons of a webhook's page; a new secret is shown on the page that answers, once."""
    webhook_id = page.request.path_params["webhook_id"]
    path = f"{WEBHOOKS_API}/{webhook_id}"
    form = await page.request.form()
    action = text_of(form, "action")
    here = f"{PREFIX}/webhooks/{webhook_id}"
    if action == "test":
        answer = await page.api.send("POST", f"{path}/test", b"{}")
        if answer.ok:
            return page.render("webhook_result.html", result=answer.data, back=here)
    elif action == "rotate":
        answer = await page.api.send("POST", f"{path}/rotate-secret", b"{}")
        if answer.ok:
            return page.render("webhook_result.html", secret=answer.data["secret"], back=here)
    elif action in ("enable", "disable"):
        body = orjson.dumps({"enabled": action == "enable"})
        answer = await page.api.send("PATCH", path, body)
    elif action == "redeliver":
        delivery = text_of(form, "delivery")
        answer = await page.api.send("POST", f"{path}/deliveries/{delivery}/redeliver", b"{}")
    elif action == "delete":
        answer = await page.api.call("DELETE", path)
        if answer.ok:
            return redirect(f"{PREFIX}/webhooks")
    else:
        return error_page(page, 404)
    if answer.ok:
        return redirect(f"{here}?done={action}")
    return page.render("message.html", _status(answer), message=answer.detail, back=here)


async def keys_page(page: Page) -> Response:
    values: dict[str, Any] = {"name": "", "scopes": [], "policy": "", "rateLimit": ""}
    values["expiresAt"] = ""
    body: dict[str, Any] | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in ("name", "policy", "rateLimit")}
        values["expiresAt"] = text_of(form, "expiresAt")
        values["scopes"] = [str(scope) for scope in form.getlist("scopes")]
        body = {k: v for k, v in values.items() if v not in ("", [])}
        body.setdefault("scopes", [])
        if values["expiresAt"] and len(values["expiresAt"]) == 16:
            body["expiresAt"] = f"{values['expiresAt']}:00Z"
    current = str(page.session.principal.key_id) if page.session else ""
    return await _create_then_list(
        page, KEYS_API, body, "keys.html", "keys", values=values, scopes=ALL_SCOPES, current=current
    )


async def revoke_key(page: Page) -> Response:
    key_id = page.request.path_params["key_id"]
    answer = await page.api.call("DELETE", f"{KEYS_API}/{key_id}")
    if not answer.ok:
        return page.render("message.html", _status(answer), message=answer.detail)
    return redirect(f"{PREFIX}/keys")


def _name_path(field: str, value: str) -> str:
    return f"{NAMES_API}/{quote(field, safe='')}/{value}"


async def names_page(page: Page) -> Response:
    """Every display name (of one field, if chosen), and the form that sets one: blank, or
    filled with an entry to edit (`?field=&value=`)."""
    query = page.request.query_params
    shown = query.get("show", "")
    shown = shown if shown in NAMED_FIELDS else ""
    values = {"field": query.get("field", "type"), "value": query.get("value", "")}
    values.update(en="", ar="")
    answer: Answer | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in ("field", "value", "en", "ar")}
        shown = text_of(form, "show") if text_of(form, "show") in NAMED_FIELDS else ""
        answer = await _put_name(page, values)
        if answer.ok:
            done = urlencode({"show": shown, "done": answer.data["value"]})
            return redirect(f"{PREFIX}/display-names?{done}")
    listed = await page.api.get(NAMES_API, {"field": shown})
    entries = listed.data["data"] if listed.ok else []
    if page.request.method == "GET" and values["value"]:
        values.update(_names_of(entries, values["field"], values["value"]))
    return page.render(
        "names.html",
        _status(answer) if listed.ok else min(listed.status, 503),
        entries=entries,
        fields=NAMED_FIELDS,
        shown=shown,
        values=values,
        done=query.get("done"),
        errors=answer.errors if answer else {},
        problem=_problem(answer) or (None if listed.ok else listed.detail),
    )


async def _put_name(page: Page, values: dict[str, str]) -> Answer:
    body = orjson.dumps({"en": values["en"], "ar": values["ar"]})
    if not values["value"]:  # an empty last segment is no path of the API: named here
        blank = {"field": "value", "message": page.t("must not be blank")}
        return Answer(422, {}, b"", {"detail": "", "errors": [blank]})
    return await page.api.send("PUT", _name_path(values["field"], values["value"]), body)


def _names_of(entries: list[dict[str, Any]], field: str, value: str) -> dict[str, str]:
    for entry in entries:
        if entry["field"] == field and entry["value"] == value:
            return {"en": entry["en"], "ar": entry["ar"]}
    return {}


async def delete_name(page: Page) -> Response:
    form = await page.request.form()
    field, value = text_of(form, "field"), text_of(form, "value")
    answer = await page.api.call("DELETE", _name_path(field, value))
    back = f"{PREFIX}/display-names"
    if not answer.ok:
        return page.render("message.html", _status(answer), message=answer.detail, back=back)
    return redirect(f"{back}?{urlencode({'show': text_of(form, 'show'), 'done': value})}")


ROUTES = [
    Route(f"{PREFIX}/webhooks", admin_only(webhooks_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/webhooks/{{webhook_id}}", admin_only(webhook_page), methods=["GET"]),
    Route(
        f"{PREFIX}/webhooks/{{webhook_id}}/actions", admin_only(webhook_action), methods=["POST"]
    ),
    Route(f"{PREFIX}/keys", admin_only(keys_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/keys/{{key_id}}/revoke", admin_only(revoke_key), methods=["POST"]),
    Route(f"{PREFIX}/display-names", admin_only(names_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/display-names/delete", admin_only(delete_name), methods=["POST"]),
]
