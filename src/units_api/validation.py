"""Turning pydantic errors into the 422 problem's `errors`, with paths like `a[1].b`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from units_api.errors import ValidationFailed

_MESSAGES = {"missing": "is required", "extra_forbidden": "unknown field"}
_INTERNAL_LOCS = {"function-after", "function-plain", "function-before", "[key]"}
M = TypeVar("M", bound=BaseModel)


def format_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if part in _INTERNAL_LOCS:
            continue
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _message(error: Mapping[str, Any]) -> str:
    return _MESSAGES.get(error["type"]) or str(error["msg"]).removeprefix("Value error, ")


def pydantic_errors(exc: ValidationError) -> Iterator[tuple[str, str]]:
    for error in exc.errors(include_url=False):
        yield format_path(tuple(error["loc"])), _message(error)


def parse_model(model: type[M], value: Any) -> M:
    """Validate a parsed JSON body against a model, or raise one 422 listing every error."""
    if not isinstance(value, dict):
        raise ValidationFailed([("", "the body must be a JSON object")])
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ValidationFailed(pydantic_errors(exc)) from None
