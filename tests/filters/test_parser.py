"""The RSQL grammar: structure, quoting, and errors with their positions."""

from __future__ import annotations

import pytest

from units_api.errors import InvalidParameter
from units_api.filters.parser import MAX_LENGTH, parse_filter
from units_api.filters.tree import And, Comparison, Or


def test_and_binds_tighter_than_or_and_parentheses_group() -> None:
    tree = parse_filter("a==1;b==2,c==3")
    assert isinstance(tree, Or) and isinstance(tree.children[0], And)
    grouped = parse_filter("a==1;(b==2,c==3)")
    assert isinstance(grouped, And) and isinstance(grouped.children[1], Or)


def test_operators_lists_and_quotes() -> None:
    tree = parse_filter("""type=in=(villa,"twin house",'it\\'s');price=le=10;x=null=true""")
    assert isinstance(tree, And)
    first, second, third = tree.children
    assert first == Comparison("type", "in", ("villa", "twin house", "it's"), 1)
    assert second == Comparison("price", "le", ("10",), 38)
    assert isinstance(third, Comparison) and third.operator == "null"
    assert parse_filter("price>=5") == Comparison("price", "ge", ("5",), 1)


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("city==", 7),
        ("city=xx=1", 5),
        ("(a==1", 6),
        ("a==1)", 5),
        ("=1", 1),
        ("a=='x", 4),
        ("a=in=1", 6),
        ("a==1;", 6),
    ],
)
def test_errors_carry_their_position(text: str, position: int) -> None:
    with pytest.raises(InvalidParameter) as caught:
        parse_filter(text)
    assert caught.value.extra["position"] == position
    assert f"position {position}" in caught.value.detail


def test_limits_on_size_and_depth() -> None:
    with pytest.raises(InvalidParameter):
        parse_filter("(" * 33 + "a==1" + ")" * 33)
    with pytest.raises(InvalidParameter):
        parse_filter(";".join(["a==1"] * 101))
    with pytest.raises(InvalidParameter):
        parse_filter("a==" + "x" * MAX_LENGTH)
