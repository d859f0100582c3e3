"""Clocks and times as the API shows them: UTC, to the millisecond, RFC 3339 text."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, truncated to the millisecond the API shows."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    # "YYYY-MM-DDTHH:MM:SS.mmm" of "...+00:00"
    return value.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time (`Z` or an offset) as a UTC datetime; ValueError if it is not one."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("must be an RFC 3339 date-time") from None
    if parsed.tzinfo is None:
        raise ValueError("must carry a time zone (e.g. Z)")
    return parsed.astimezone(UTC)


def parse_future_time(value: str) -> datetime:
    """An RFC 3339 time that is still to come; ValueError saying what is wrong otherwise."""
    parsed = parse_time(value)
    assert parsed is not None
    if parsed <= datetime.now(UTC):
        raise ValueError("must be in the future")
    return parsed


_UNITS = ((3600, "hour", "h"), (60, "minute", "min"), (1, "second", "s"))


def duration_text(seconds: float, short: bool = False) -> str:
    """A duration as documentation writes it, in its largest whole unit up to hours: "24 hours",
    "1 minute", or with `short` "5 s", "30 min", "2 h" (seconds that no unit divides: "1.5 s")."""
    for size, name, abbreviation in _UNITS:
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            if short:
                return f"{count} {abbreviation}"
            return f"{count} {name}" + ("" if count == 1 else "s")
    return f"{seconds:g} s" if short else f"{seconds:g} seconds"
