"""A valid unit body's fields at a fraction of the models' cost.

`schemas.UnitWrite` validates a body with pydantic: every error at once, each with its path,
but a valid unit of 3 KB costs about 30 us there, most of it in the nested models made and
taken apart again and in a call of a Python validator per value. Most bodies are valid. This
module reads them with msgspec instead (about 22 us, checks included), into structs made from
the models' own fields (their types, lengths and bounds), then checks what msgspec has no
constraint for (a URL's form, a code's list, a date, a non-integer number's size and places)
with the very functions the models use (`types.py`). A type or a constraint it does not know
stops the service at import: a model's new field is never read more widely here than there.

A body it does not pass, invalid or merely outside its narrower reading (a whole number sent
as 3.0, a NUL anywhere, even in an ignored field), gets None, and the models decide, with
every error. What it passes reads as the models read it: the tests compare both on generated
bodies (bench/README.md, "Single-unit operations", for what it saves a create). Its bodies
are plain data, as a request's JSON, an import's row and the sample data give them (dicts,
lists, texts, numbers, booleans, null): a text sent as a StrEnum's member would be kept as
that member (the models give its str), and a struct of this module's or a dict that reads its
keys otherwise than it holds them would be taken as they are.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from annotated_types import MaxLen, MinLen
from msgspec import Meta
from pydantic import AfterValidator, BaseModel, PlainValidator, StringConstraints
from pydantic.json_schema import WithJsonSchema
from pydantic.types import Strict

from units_api.units.schemas import EDITABLE_FIELDS, UnitWrite
from units_api.units.types import (
    NUMBER_MAX,
    NullAsEmpty,
    amount,
    exact_number,
    no_nul,
    whole_number,
)

Check = Callable[[Any], Any]
_asdict = msgspec.structs.asdict


def _number_sent(check: Check, sent: Any) -> Any:
    """A number not sent as an int, by the models' `check` of the value sent, which must be a
    Decimal or a float: msgspec also reads a text as a Decimal, and an int subclass (an
    IntEnum's member) as an int, where the models refuse both."""
    if type(sent) is not Decimal and type(sent) is not float:
        raise ValueError
    return check(sent)


class _Read:
    """What is left to do with a value msgspec passed: its part of the models' reading."""

    def read(self, value: Any, sent: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class _Text(_Read):
    check: Check  # the models' function: the value, or a ValueError

    def read(self, value: Any, sent: Any) -> Any:
        return self.check(value)


@dataclass(frozen=True, slots=True)
class _Number(_Read):
    check: Check  # for a number not read as a bounded integer (those the models take as is)

    def read(self, value: Any, sent: Any) -> Any:
        return value if type(sent) is int else _number_sent(self.check, sent)


@dataclass(frozen=True, slots=True)
class _List(_Read):
    item: _Read | None
    null_is_empty: bool  # null, or no list at all, is [] (`types.NullAsEmpty`)

    def read(self, value: Any, sent: Any) -> Any:
        if self.item is None or not value:
            return value
        read = self.item.read
        return [read(each, one) for each, one in zip(value, sent, strict=True)]


@dataclass(frozen=True, slots=True)
class _Object(_Read):
    """A model's fields with something left to do: numbers and texts checked in place (most
    numbers are sent as integers, which msgspec has bounded as the models do: no call), lists
    and objects read in turn."""

    numbers: tuple[tuple[str, Check], ...]
    texts: tuple[tuple[str, Check], ...]
    parts: tuple[tuple[str, _Read], ...]

    def read(self, value: Any, sent: Any) -> Any:
        values = _asdict(value)
        for name, check in self.numbers:
            if values[name] is not None and type(one := sent[name]) is not int:
                values[name] = _number_sent(check, one)
        for name, check in self.texts:
            found = values[name]
            if found is not None:
                check(found)
        for name, part in self.parts:
            found = values[name]
            if found is not None:
                values[name] = part.read(found, sent[name])
            elif type(part) is _List and part.null_is_empty:
                values[name] = []
        return values


# The numbers' types, by the models' function for them (`types.py`): a bounded integer, read
# as the function reads it, or any other number, which the function then reads.
_WHOLE = Annotated[int, Meta(ge=0, le=NUMBER_MAX)]
_NUMBERS: dict[Check, tuple[Any, _Read | None]] = {
    amount: (_WHOLE | Decimal, _Number(amount)),
    exact_number: (
        Annotated[int, Meta(ge=-NUMBER_MAX, le=NUMBER_MAX)] | Decimal,
        _Number(exact_number),
    ),
    # A whole number sent as 3.0 is not read here (the models read it); one sent as an int
    # subclass (an IntEnum's member), which msgspec reads as an int, is left to the models too.
    whole_number: (_WHOLE, _Number(whole_number)),
}


def _bounded(kind: Any, lengths: dict[str, int | None]) -> Any:
    """`kind` with the lengths the models give it (a text's, a list's)."""
    if not lengths:
        return kind
    meta = Meta(min_length=lengths.get("min_length"), max_length=lengths.get("max_length"))
    return Annotated[kind, meta]


def _joined(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def checked(value: Any) -> Any:
        for check in checks:
            check(value)
        return value

    return checked


def _text(metadata: tuple[Any, ...], where: str) -> tuple[Any, _Read | None]:
    lengths: dict[str, int | None] = {}
    checks: list[Check] = []
    for item in metadata:
        if isinstance(item, StringConstraints):
            settings = {k: v for k, v in vars(item).items() if v is not None}
            if set(settings) - {"min_length", "max_length"}:
                raise TypeError(f"{where}: no quick reading of {item}")
            lengths.update(settings)
        elif isinstance(item, AfterValidator):
            if len(inspect.signature(item.func).parameters) != 1:
                raise TypeError(f"{where}: no quick reading of {item}")
            if item.func is not no_nul:  # a NUL is found before, in the whole body at once
                checks.append(item.func)  # type: ignore[arg-type]
        elif not isinstance(item, WithJsonSchema):
            raise TypeError(f"{where}: no quick reading of {item}")
    return _bounded(str, lengths), _Text(_joined(checks)) if checks else None


def _field(annotation: Any, metadata: tuple[Any, ...], where: str) -> tuple[Any, _Read | None]:
    """msgspec's type for a model field's type and metadata, and what is left to do."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *more = get_args(annotation)
        return _field(base, (*more, *metadata), where)
    numbers = [item.func for item in metadata if isinstance(item, PlainValidator)]
    if numbers:
        if len(numbers) > 1 or numbers[0] not in _NUMBERS:
            raise TypeError(f"{where}: no quick reading of {numbers}")
        return _NUMBERS[numbers[0]]
    if origin in (Union, UnionType):
        options = [option for option in get_args(annotation) if option is not type(None)]
        if len(options) != 1 or len(get_args(annotation)) != 2:
            raise TypeError(f"{where}: no quick reading of {annotation}")
        reading, left = _field(options[0], metadata, where)
        return reading | None, left
    if annotation is Any or origin is Literal:
        return annotation, None
    if annotation is str:
        return _text(metadata, where)
    if annotation is bool:
        if any(not isinstance(item, Strict | WithJsonSchema) for item in metadata):
            raise TypeError(f"{where}: no quick reading of {metadata}")
        return bool, None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_struct(annotation)
    if origin is list:
        item, left = _field(get_args(annotation)[0], (), f"{where}[]")
        lengths: dict[str, int | None] = {}
        null_is_empty = False
        for meta in metadata:
            if isinstance(meta, MaxLen):
                lengths["max_length"] = meta.max_length
            elif isinstance(meta, MinLen):
                lengths["min_length"] = meta.min_length
            elif meta is NullAsEmpty:
                null_is_empty = True
            else:
                raise TypeError(f"{where}: no quick reading of {meta}")
        listed = _bounded(list.__class_getitem__(item), lengths)
        if null_is_empty:
            listed = listed | None
        if left is None and not null_is_empty:
            return listed, None
        return listed, _List(left, null_is_empty)
    raise TypeError(f"{where}: no quick reading of {annotation}")


def model_struct(model: type[BaseModel]) -> tuple[type[msgspec.Struct], _Object]:
    """A struct of the model's fields, in its order (a struct's dict keeps it, as a model's
    does), and what is left to do with each."""
    fields: list[Any] = []
    numbers: list[tuple[str, Check]] = []
    texts: list[tuple[str, Check]] = []
    parts: list[tuple[str, _Read]] = []
    for name, info in model.model_fields.items():
        where = f"{model.__name__}.{name}"
        reading, field = _field(info.annotation, tuple(info.metadata), where)
        if info.is_required():
            fields.append((name, reading))
        elif info.default is None or info.default_factory is list:
            fields.append((name, reading, None))  # a list's None is [] (`_List`)
        else:
            raise TypeError(f"{where}: no quick reading of its default")
        if isinstance(field, _Number):
            numbers.append((name, field.check))
        elif isinstance(field, _Text):
            texts.append((name, field.check))
        elif field is not None:
            parts.append((name, field))
    struct = msgspec.defstruct(model.__name__, fields, forbid_unknown_fields=True)
    return struct, _Object(tuple(numbers), tuple(texts), tuple(parts))


STRUCT, _UNIT = model_struct(UnitWrite)
# A NUL as msgspec writes it in JSON; a text holding a backslash then "u0000" matches too,
# and goes to the models, which take it.
_NUL = b"\\u0000"
_encode = msgspec.json.Encoder().encode


def unit_fields(body: dict[str, Any]) -> dict[str, Any] | None:
    """A valid unit body's editable fields, each present, as `validation._fields` gives them
    from the models; None when the models must decide."""
    try:
        # No text may hold a NUL: the models name where.
        if type(body) is not dict or _NUL in _encode(body):
            return None
        values = _UNIT.read(msgspec.convert(body, STRUCT), body)
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError, RecursionError):
        return None
    return {name: values[name] for name in EDITABLE_FIELDS}
