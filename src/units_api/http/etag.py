"""Entity tags are the record version: `"<version>"`."""

from __future__ import annotations

import re

from starlette.datastructures import Headers

from units_api.errors import InvalidHeader, PreconditionFailed

# RFC 9110: If-Match = "*" / #entity-tag, entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE;
# a list may hold empty elements, and optional whitespace around its commas.
_ETAGC = r"[\x21\x23-\x7e\x80-\xff]"
_TAG = rf'(?:W/)?"{_ETAGC}*"'
_OWS = r"[ \t]*"
IF_MATCH_PATTERN = rf"^{_OWS}(?:\*|(?:,{_OWS})*{_TAG}(?:{_OWS},(?:{_OWS}{_TAG})?)*){_OWS}$"
ETAG_PATTERN = r'^"[0-9]+"$'
_IF_MATCH = re.compile(IF_MATCH_PATTERN)


def etag(version: int) -> str:
    return f'"{version}"'


def _tags(header: str) -> list[str]:
    return [part.strip().removeprefix("W/") for part in header.split(",") if part.strip()]


def matches(header: str | None, version: int) -> bool:
    if header is None:
        return False
    tags = _tags(header)
    return "*" in tags or etag(version) in tags


def matches_tag(header: str, tag: str) -> bool:
    """Whether an If-None-Match header names `tag` (weakly, as GET compares) or is `*`."""
    tags = _tags(header)
    return "*" in tags or tag in tags


def if_match(headers: Headers) -> str | None:
    """The If-Match header: absent is None; one that is not `*` or entity-tags is a 400."""
    header = headers.get("if-match")
    if header is not None and not _IF_MATCH.fullmatch(header):
        raise InvalidHeader("If-Match", 'must be * or a list of entity-tags such as "3"')
    return header


def check_if_match(header: str | None, version: int) -> None:
    """A stale If-Match is a 412; an absent one lets the write through."""
    if header is not None and not matches(header, version):
        raise PreconditionFailed(
            f"If-Match {header} does not match the current version {etag(version)}.",
            extra={"currentVersion": version},
        )
