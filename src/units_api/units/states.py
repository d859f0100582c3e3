"""The two state machines of a unit: publishing and availability.

Each is a transition table; `next_state` is consulted by the one function per machine that
writes the status (publishing.py, availability.py), under the row's lock.
"""

from __future__ import annotations

from units_api.errors import Conflict

PUBLISHING: dict[str, dict[str, str]] = {
    "draft": {"publish": "published", "schedule": "scheduled", "archive": "archived"},
    "scheduled": {
        "publish": "published",
        "schedule": "scheduled",
        "unpublish": "draft",
        "archive": "archived",
    },
    "published": {"publish": "published", "unpublish": "unpublished", "archive": "archived"},
    "unpublished": {"publish": "published", "schedule": "scheduled", "archive": "archived"},
    "archived": {"restore": "draft"},
}
PUBLISHING_ACTIONS = ("publish", "unpublish", "schedule", "archive", "restore")

AVAILABILITY: dict[str, dict[str, str]] = {
    "available": {"reserve": "reserved", "sell": "sold", "block": "blocked"},
    "reserved": {"reserve": "reserved", "release": "available", "sell": "sold"},
    "blocked": {"unblock": "available"},
    "sold": {},
}
AVAILABILITY_ACTIONS = ("reserve", "release", "sell", "block", "unblock")


def next_state(table: dict[str, dict[str, str]], current: str, action: str) -> str:
    """The state `action` leads to from `current`, or a 409 listing what is allowed."""
    allowed = table.get(current, {})
    if action not in allowed:
        raise Conflict(
            f"'{action}' is not allowed while the unit is {current}.",
            extra={"currentState": current, "allowedActions": list(allowed)},
        )
    return allowed[action]
