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
    # Map search, on a location field (filters.geo).
    "=within=": "within",
    "=near=": "near",
    "=inside=": "inside",
}
# Operators that take a list in parentheses.
LISTS = ("in", "out", "within", "near", "inside")
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


def comparisons(node: Node) -> list[Comparison]:
    """Every comparison of a tree, in order."""
    if isinstance(node, Comparison):
        return [node]
    return [found for child in node.children for found in comparisons(child)]


def required(node: Node) -> list[Comparison]:
    """The comparisons every match satisfies: the tree's, joined to it by AND only."""
    if isinstance(node, Comparison):
        return [node]
    if isinstance(node, Or):
        return [] if len(node.children) > 1 else required(node.children[0])
    return [found for child in node.children for found in required(child)]
