"""A unit's history in words a manager reads: each change as "Price: 4,850,000 → 4,700,000
EGP", publishing and availability as sentences, lists of objects as a count, values with a
display name by that name; in the page's language. Every value is escaped (`_text`)."""

from __future__ import annotations

import html
from decimal import Decimal
from typing import Any

import orjson
from markupsafe import Markup

from units_api.console import forms
from units_api.console.i18n import Language
from units_api.names.service import Names
from units_api.names.values import FIELDS as NAMED_FIELDS

MONEY = frozenset({"price", "startingPrice", "maxPrice"})
SHORT = 160
# A list's items counted: English singular and plural, Arabic singular and plural.
COUNTED: dict[str, tuple[str, str, str, str]] = {
    "paymentPlans": ("payment plan", "payment plans", "خطة سداد", "خطط سداد"),
    "floorsPlan": ("floor", "floors", "دور", "أدوار"),
    "specs": ("feature", "features", "ميزة", "مزايا"),
    "options": ("option", "options", "خيار", "خيارات"),
    "readings": ("meter reading", "meter readings", "قراءة", "قراءات"),
    "gallery": ("picture", "pictures", "صورة", "صور"),
}
STATE_WORDS = {
    "draft": "Draft",
    "unpublished": "Unpublished",
    "archived": "Archived",
    "available": "Available",
    "sold": "Sold",
    "blocked": "Blocked",
}

# What a history entry's action did, in words (an action not named here is shown as it is).
ACTIONS = {
    "create": "Created",
    "replace": "Edited",
    "patch": "Edited",
    "bulk": "Bulk change",
    "import": "Imported",
    "channel-delete": "A channel was deleted",
    "delete": "Deleted",
    "publish": "Published",
    "schedule": "Scheduled",
    "unpublish": "Unpublished",
    "archive": "Archived",
    "restore": "Restored",
    "reserve": "Reserved",
    "release": "Released",
    "sell": "Sold",
    "block": "Blocked",
    "unblock": "Unblocked",
}


def action(name: str, language: Language) -> str:
    """A history entry's action in words."""
    return language.t(ACTIONS.get(name, name))


def _text(value: object) -> str:
    return html.escape(value if isinstance(value, str) else str(value))


def count(name: str, number: int, language: Language) -> str:
    """`number` items of the list `name` ("3 payment plans", "٣ خطط سداد")."""
    words = COUNTED.get(name)
    shown = language.number(number)
    if words is None:
        return shown
    if language.code == "ar":
        # Arabic counts 3 to 10 with the plural, 1 and 11 upwards with the singular.
        return f"{shown} {words[3] if 2 <= number <= 10 else words[2]}"
    return f"{shown} {words[0] if number == 1 else words[1]}"


def _channels(names: list[str], language: Language) -> str:
    return "، ".join(names) if language.code == "ar" else ", ".join(names)


def publishing(value: Any, language: Language) -> str:
    """A publishing state in words ("Published to website, app")."""
    if not isinstance(value, dict):
        return ""
    status = value.get("status")
    channels = _channels(list(value.get("channels") or ()), language)
    if status == "published":
        if not channels:
            return language.t("Published")
        return language.t("Published to {channels}").format(channels=channels)
    if status == "scheduled":
        at = language.time(value.get("scheduledAt"))
        words = language.t("Scheduled for {at} to {channels}")
        return words.format(at=at, channels=channels or language.t("none"))
    return language.t(STATE_WORDS.get(str(status), str(status)))


def availability(value: Any, language: Language) -> str:
    """An availability state in words ("Reserved until 2026-12-01 10:00 UTC")."""
    if not isinstance(value, dict):
        return ""
    status = value.get("status")
    if status == "reserved":
        until = value.get("reservedUntil")
        if not until:
            return language.t("Reserved")
        return language.t("Reserved until {until}").format(until=language.time(until))
    return language.t(STATE_WORDS.get(str(status), str(status)))


class Wording:
    """How one unit's history entries are written, on one page."""

    def __init__(self, language: Language, currency: str, names: Names) -> None:
        self.language = language
        self.currency = currency
        self.names = names
        form = forms.unit_form()
        self.kinds = {field.name: field.kind for field in form.scalars}

    def value(self, field: str, value: Any) -> str:
        """One value of `field` in words (without its currency)."""
        language = self.language
        if value is None or value == "" or value == []:
            return "—"
        if field == "publishing":
            return publishing(value, language)
        if field == "availability":
            return availability(value, language)
        if field in COUNTED and isinstance(value, list):
            return count(field, len(value), language)
        if field == "unitLocation" and isinstance(value, dict):
            points = (value.get("coordinates") or ())[:2]
            return ", ".join(language.number(point) for point in points)
        if field == "expense" and isinstance(value, dict):
            return f"{value.get('name') or ''} {language.number(value.get('value'))}".strip()
        kind = self.kinds.get(field)
        plain_number = isinstance(value, int | Decimal) and not isinstance(value, bool)
        if kind in ("number", "whole") or (kind is None and plain_number):
            return language.number(value)
        if kind == "choice" and isinstance(value, str):
            return language.choice(value)
        if field in NAMED_FIELDS and isinstance(value, str):
            return str(self.names.display(field, value, language.code))
        if kind == "date" and isinstance(value, str) and "T" in value:
            return language.time(value)
        return _short(value)

    def change(self, field: str, before: Any, after: Any, currency: str) -> str:
        """One change's line, HTML: its label (the field's name as its title), from → to."""
        # From the old value to the new, in the page's direction (an arrow is not mirrored).
        arrow = "←" if self.language.direction == "rtl" else "→"
        shown = f"{_text(self.value(field, before))} {arrow} {_text(self.value(field, after))}"
        if field in MONEY and not (before is None and after is None):
            shown += f" {_text(currency)}"
        label = _text(self.language.field(field))
        direction = self.language.direction
        return (
            f'<li><span title="{_text(field)}">{label}</span>: '
            f'<bdi dir="{direction}">{shown}</bdi></li>'
        )

    def changes(self, entry: dict[str, Any], currency: str) -> Markup:
        """An entry's changes as the items of a list, money in `currency` (the unit's then)."""
        changed: dict[str, Any] = entry.get("changes") or {}
        lines = (
            self.change(field, change.get("from"), change.get("to"), currency)
            for field, change in changed.items()
            if isinstance(change, dict)
        )
        return Markup("".join(lines))  # noqa: S704 - each value in it escaped by change()

    def entries(
        self, entries: list[dict[str, Any]], unit_currency: str | None
    ) -> list[tuple[dict[str, Any], Markup]]:
        """Each entry (newest first) with its changes, money in the currency the unit had
        after it: walking back from the unit's, an entry that changed the currency gives the
        older ones its `from`."""
        written = []
        currency = unit_currency or self.currency
        for entry in entries:
            changed = (entry.get("changes") or {}).get("currency")
            if isinstance(changed, dict) and entry.get("action") != "create":
                currency = changed.get("to") or self.currency
                written.append((entry, self.changes(entry, currency)))
                currency = changed.get("from") or self.currency
            else:
                written.append((entry, self.changes(entry, currency)))
        return written


def _short(value: Any) -> str:
    """Any other value: text as it is, anything else as JSON, cut short."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"
