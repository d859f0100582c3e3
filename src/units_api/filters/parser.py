"""RSQL/FIQL parsing: text to a syntax tree, with the position of any error.

expression := or
or         := and (',' and)*
and        := term (';' term)*
term       := '(' or ')' | comparison
comparison := selector operator (value | '(' value (',' value)* ')')
value      := unquoted | '"' ... '"' | "'" ... "'"   (backslash escapes in quotes)
"""

from __future__ import annotations

import re

from units_api.errors import InvalidParameter
from units_api.filters.tree import ALIASES, LISTS, OPERATORS, And, Comparison, Node, Or

MAX_LENGTH = 32_000  # room for a polygon of filters.geo.MAX_VERTICES vertices
MAX_DEPTH = 32
MAX_COMPARISONS = 100
MAX_VALUES = 500  # of =in= and =out=; a map operator's numbers are counted by filters.geo
_SELECTOR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_OPERATOR = re.compile(r"==|!=|=[a-z]+=|<=|>=|<|>")
_RESERVED = set("\"'();,=!<> \t\r\n")


class _Parser:
    def __init__(self, text: str, parameter: str) -> None:
        self.text = text
        self.at = 0
        self.depth = 0
        self.comparisons = 0
        self.parameter = parameter

    def fail(self, message: str, at: int | None = None) -> InvalidParameter:
        position = (self.at if at is None else at) + 1
        error = InvalidParameter(self.parameter, f"{message} at position {position}")
        error.extra["position"] = position
        return error

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.at += 1

    def parse(self) -> Node:
        node = self.or_()
        self.skip_spaces()
        if self.at != len(self.text):
            raise self.fail(f"unexpected '{self.peek()}'")
        return node

    def or_(self) -> Node:
        children = [self.and_()]
        while self.peek() == ",":
            self.at += 1
            children.append(self.and_())
        return children[0] if len(children) == 1 else Or(tuple(children))

    def and_(self) -> Node:
        children = [self.term()]
        while self.peek() == ";":
            self.at += 1
            children.append(self.term())
        return children[0] if len(children) == 1 else And(tuple(children))

    def term(self) -> Node:
        self.skip_spaces()
        if self.peek() != "(":
            node: Node = self.comparison()
        else:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH}")
            self.at += 1
            node = self.or_()
            self.skip_spaces()
            if self.peek() != ")":
                raise self.fail("expected ')'")
            self.at += 1
            self.depth -= 1
        self.skip_spaces()
        return node

    def comparison(self) -> Comparison:
        start = self.at
        match = _SELECTOR.match(self.text, self.at)
        if not match:
            raise self.fail("expected a field name")
        self.at = match.end()
        self.skip_spaces()
        operator_match = _OPERATOR.match(self.text, self.at)
        if not operator_match:
            raise self.fail("expected an operator such as ==, !=, =lt=, =in=")
        symbol = operator_match.group()
        operator = OPERATORS.get(symbol) or ALIASES.get(symbol)
        if operator is None:
            raise self.fail(f"unknown operator '{symbol}'")
        self.at = operator_match.end()
        self.skip_spaces()
        values = self.arguments(operator)
        self.comparisons += 1
        if self.comparisons > MAX_COMPARISONS:
            raise self.fail(f"more than {MAX_COMPARISONS} comparisons", start)
        return Comparison(match.group(), operator, values, start + 1)

    def arguments(self, operator: str) -> tuple[str, ...]:
        if operator in LISTS:
            if self.peek() != "(":
                raise self.fail(f"={operator}= takes a list in parentheses")
            self.at += 1
            values = [self.value()]
            while self.peek() == ",":
                self.at += 1
                values.append(self.value())
            if self.peek() != ")":
                raise self.fail("expected ')' closing the list")
            self.at += 1
            if operator in ("in", "out") and len(values) > MAX_VALUES:
                raise self.fail(f"more than {MAX_VALUES} values in a list")
            return tuple(values)
        return (self.value(),)

    def value(self) -> str:
        self.skip_spaces()
        quote = self.peek()
        if quote in ("'", '"'):
            return self.quoted(quote)
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in _RESERVED:
            self.at += 1
        if self.at == start:
            raise self.fail("expected a value")
        value = self.text[start : self.at]
        self.skip_spaces()
        return value

    def quoted(self, quote: str) -> str:
        start = self.at
        self.at += 1
        chars: list[str] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == "\\" and self.at + 1 < len(self.text):
                chars.append(self.text[self.at + 1])
                self.at += 2
                continue
            if char == quote:
                self.at += 1
                self.skip_spaces()
                return "".join(chars)
            chars.append(char)
            self.at += 1
        raise self.fail("unterminated quoted value", start)


def quote(value: str) -> str:
    """`value` as a quoted value of a filter, read back exactly (`"a \\"b\\""`)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_filter(text: str, parameter: str = "p") -> Node:
    """Parse a filter expression; a syntax error is a 400 naming the parameter and position."""
    if not text.strip():
        raise InvalidParameter(parameter, "is empty")
    if len(text) > MAX_LENGTH:
        raise InvalidParameter(parameter, f"is longer than {MAX_LENGTH} characters")
    if "\x00" in text:
        raise InvalidParameter(parameter, "must not contain the NUL character")
    return _Parser(text, parameter).parse()
