"""Path parameters: an id in a path is a canonical UUID, or the path names nothing.

So `/api/v2/units/query` is never read as the unit `query`: a method that path does not
allow is a 405 with `Allow`, and a segment that is no id is a 404 like any unknown path.
"""

from __future__ import annotations

import uuid

from starlette.convertors import Convertor, register_url_convertor

UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


class CanonicalUUID(Convertor[uuid.UUID]):
    """The 8-4-4-4-12 hexadecimal form, in either case (what OpenAPI's `format: uuid` is)."""

    regex = UUID_PATTERN

    def convert(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_string(self, value: uuid.UUID) -> str:
        return str(value)


class AnyText(Convertor[str]):
    """The rest of the path, slashes and line breaks included (Starlette's `path` stops at a
    line break): a value a handler checks itself, so a bad one is its 422, not a 404."""

    regex = "[\\s\\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("id", CanonicalUUID())
register_url_convertor("text", AnyText())
ID = "{id:id}"
