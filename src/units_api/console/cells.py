"""The console's HTML written in Python rather than in a template: the units list's rows and
map points, and one unit's fields and tables. A unit may hold a thousand readings, and a
template spends many times longer on each cell. Every value is escaped (`_text`)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from units_api.console import forms
from units_api.console.i18n import Language
from units_api.console.web import PREFIX, status, unit_name
from units_api.names.service import Names
from units_api.names.values import FIELDS as NAMED_FIELDS


def namer(names: Names, language: Language) -> Callable[[str, Any], Any]:
    """A field's value as the page shows it: its display name in the page's language when it
    has one (names/), any other value as it is."""

    def named(field: str, value: Any) -> Any:
        return names.display(field, value, language.code) if isinstance(value, str) else value

    return named


def rows(units: list[dict[str, Any]], language: Language, names: Names, currency: str) -> Markup:
    """The list's rows, a type and a city by their display names, a price with the unit's
    currency (`currency` when it has none). A field the key may not read is an empty cell."""
    code = language.code
    written = []
    for unit in units:
        price = unit.get("price")
        unit_currency = unit.get("currency") or currency
        money = "" if price is None else f"{language.number(price)} {unit_currency}"
        publishing = (unit.get("publishing") or {}).get("status")
        availability = (unit.get("availability") or {}).get("status")
        written.append(
            f'<tr><td><a href="{PREFIX}/units/{_text(unit.get("id") or "")}" dir="auto">'
            f"{_text(unit_name(unit, language))}</a></td>"
            f'<td dir="auto">{_text(names.display("type", unit.get("type"), code))}</td>'
            f'<td dir="auto">{_text(names.display("city", unit.get("city"), code))}</td>'
            f'<td class="num">{_text(money)}</td>'
            f"<td>{status(publishing, language.t) if publishing else ''}</td>"
            f"<td>{status(availability, language.t) if availability else ''}</td>"
            f"<td>{_text(language.time(unit.get('updatedAt')))}</td></tr>"
        )
    return Markup("\n".join(written))  # noqa: S704 - each value in it escaped above


def marks(shown: dict[str, Any] | None, language: Language) -> Markup:
    """The map's points, each a link to its unit, named in its title."""
    if shown is None:
        return Markup()
    radius = shown["radius"]
    return Markup(  # noqa: S704 - each value in it escaped here
        "".join(
            f'<a href="{PREFIX}/units/{_text(point["unit"].get("id") or "")}">'
            f'<circle class="point" cx="{point["x"]}" cy="{point["y"]}" r="{radius}">'
            f"<title>{_text(unit_name(point['unit'], language))}</title></circle></a>"
            for point in shown["points"]
        )
    )


# Shown first on an Arabic page: the unit's Arabic texts.
ARABIC_FIRST = ("unitNameAr", "unitDescAr", "unitShortDescAr")


def details(unit: dict[str, Any], language: Language, currency: str, names: Names) -> Markup:
    """The unit's own fields as the items of a description list (`<dt>` label, `<dd>` value),
    a value with a display name by that name; a unit without a currency shows `currency`,
    the server's default, marked as such."""
    first = ARABIC_FIRST if language.code == "ar" else ()
    items = [
        _item(name, language, f'<dd dir="auto">{_text(unit.get(name) or "")}</dd>')
        for name in first
    ]
    for field in forms.unit_form().scalars:
        if field.name in first:
            continue
        value = unit.get(field.name)
        if field.kind in ("number", "whole"):
            shown = f'<dd class="num">{_text(language.number(value))}</dd>'
        elif field.kind == "choice":
            shown = f"<dd>{_text(language.choice(value))}</dd>"
        elif field.name in NAMED_FIELDS and isinstance(value, str):
            shown = f'<dd dir="auto">{_text(names.display(field.name, value, language.code))}</dd>'
        elif field.name == "currency" and value is None:
            shown = f'<dd dir="ltr">{_text(currency)} ({_text(language.t("by default"))})</dd>'
        elif field.kind in ("code", "day"):
            shown = f'<dd dir="ltr">{_text("" if value is None else value)}</dd>'
        elif field.kind == "url" and value:
            link = _text(value)
            shown = (
                f'<dd dir="auto">{_image(value)}'
                f'<a href="{link}" rel="noopener noreferrer">{link}</a></dd>'
            )
        else:
            shown = f'<dd dir="auto">{_text("" if value is None else value)}</dd>'
        items.append(_item(field.name, language, shown))
    location = unit.get("unitLocation") or {}
    coordinates = location.get("coordinates") or ()
    where = ", ".join(_text(language.number(value)) for value in coordinates[:2])
    items.append(_item("unitLocation", language, f'<dd dir="ltr">{where}</dd>'))
    expense = unit.get("expense") or {}
    cost = (
        f"{_text(expense.get('name') or '')} {_text(language.number(expense.get('value')))}"
        if expense
        else ""
    )
    items.append(_item("expense", language, f'<dd dir="auto">{cost}</dd>'))
    gallery = "".join(
        f'<li>{_image(url)}<a href="{_text(url)}" rel="noopener noreferrer">{_text(url)}</a></li>'
        for url in unit.get("gallery") or ()
    )
    items.append(_item("gallery", language, f"<dd>{f'<ul>{gallery}</ul>' if gallery else ''}</dd>"))
    for text, name in (("Created", "createdAt"), ("Updated", "updatedAt")):
        items.append(
            f"<dt>{_text(language.t(text))}</dt><dd>{_text(language.time(unit.get(name)))}</dd>"
        )
    return Markup("".join(items))  # noqa: S704 - each value in it escaped above


def _image(url: str) -> str:
    """The picture at `url`, when the page may load it: https only (the Content-Security-Policy
    allows no other host's images over plain http)."""
    if not url.startswith("https://"):
        return ""
    return f'<img class="thumb" src="{_text(url)}" alt="" loading="lazy">'


def _item(name: str, language: Language, value: str) -> str:
    return f'<dt title="{_text(name)}">{_text(language.field(name))}</dt>{value}'


def nested_tables(unit: dict[str, Any], language: Language, names: Names) -> list[dict[str, Any]]:
    """The unit's lists of objects as tables, each with its head and its rows (a value with
    a display name by that name: a feature's type, a floor's view, a reading's service)."""
    shown = []
    for table in forms.unit_form().tables:
        items = unit.get(table.name) or []
        if not items:
            continue
        # Every value escaped in _cell; joined as plain text (Markup's own format and join
        # cost the page more than its template).
        body = Markup(  # noqa: S704 - each value in it escaped by _cell
            "".join(
                "<tr>"
                + "".join(
                    _cell(column, item.get(column.name), language, names)
                    for column in table.columns
                )
                + "</tr>"
                for item in items
            )
        )
        head = Markup(  # noqa: S704 - each name and label escaped here
            "".join(
                f'<th scope="col" title="{_text(column.name)}">'
                f"{_text(language.field(column.name))}</th>"
                for column in table.columns
            )
        )
        shown.append(
            {
                "name": table.name,
                "label": language.field(table.name),
                "head": head,
                "rows": body,
            }
        )
    return shown


def _cell(column: forms.Field, value: Any, language: Language, names: Names) -> str:
    """One cell's HTML, its value escaped."""
    if column.kind in ("number", "whole"):
        return f'<td class="num">{_text(language.number(value))}</td>'
    if column.kind == "bool":
        return f"<td>{_text(language.number(value))}</td>"
    if column.name in NAMED_FIELDS and isinstance(value, str):
        return f'<td dir="auto">{_text(names.display(column.name, value, language.code))}</td>'
    if column.kind == "url" and isinstance(value, str) and value:
        link = _text(value)
        return (
            f'<td dir="auto">{_image(value)}'
            f'<a href="{link}" rel="noopener noreferrer">{link}</a></td>'
        )
    return f'<td dir="auto">{_text("" if value is None else value)}</td>'


def _text(value: object) -> str:
    """A value as HTML text. `html.escape` returns a plain string; markupsafe's `escape` makes
    a Markup of each value, three times the cost on a page of hundreds of values."""
    return html.escape(value if isinstance(value, str) else str(value))
