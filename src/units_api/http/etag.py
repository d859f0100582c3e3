"""Entity tags are the record version: `"<version>"`."""

from __future__ import annotations

from units_api.errors import PreconditionFailed


def etag(version: int) -> str:
    return f'"{version}"'


def _tags(header: str) -> list[str]:
    return [part.strip().removeprefix("W/") for part in header.split(",") if part.strip()]


def matches(header: str | None, version: int) -> bool:
    if header is None:
        return False
    tags = _tags(header)
    return "*" in tags or etag(version) in tags


def check_if_match(header: str | None, version: int) -> None:
    """A stale If-Match is a 412; an absent one lets the write through."""
    if header is not None and not matches(header, version):
        raise PreconditionFailed(
            f"If-Match {header} does not match the current version {etag(version)}.",
            extra={"currentVersion": version},
        )
