"""The filter language's syntax tree: what the parser produces and the translators read."""

from __future__ import annotations

from dataclasses import dataclass

OPERATORS = {
    "==": "eq",
    "!=": "ne",
    "=lt=": "lt",
    "=le=": "le",
    "=gt=": "gt",
    "=ge=": "ge",
    "=in=": "in",
    "=out=": "out",
    "=null=": "null",
}
ALIASES = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


@dataclass(frozen=True, slots=True)
class Comparison:
    selector: str
    operator: str  # one of OPERATORS' values
    values: tuple[str, ...]
    position: int  # of the selector, from 1


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


Node = Comparison | And | Or
