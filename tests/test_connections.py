"""The connection rule (CONVENTIONS.md, "Connections and transactions"): a connection is
opened by an edge (a route, a CLI command, the app's start) or by a runner, which is given
the `Database` (its first parameter `db`, or the object it is a method of was built on one);
whatever is given an open `conn` never opens another."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import units_api

SOURCE = Path(units_api.__file__).parent
EDGES = frozenset({"router.py", "ops.py", "app.py", "cli.py"})
# `Database`'s ways to a connection (db.py), and the driver connections it hands out.
OPENERS = frozenset({"transaction", "read", "fast_read", "operation", "snapshot", "run_on_replica"})
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _opens(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    owner, name = call.func.value, call.func.attr
    if name == "acquire":  # the fast pool's connections
        return isinstance(owner, ast.Attribute) and owner.attr == "fast_pool"
    held = (isinstance(owner, ast.Name) and owner.id == "db") or (
        isinstance(owner, ast.Attribute) and owner.attr in ("db", "_db")
    )
    return held and (name in OPENERS or name == "raw_connection")


def _parameters(function: Function) -> list[str]:
    arguments = function.args
    return [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]


def _functions(tree: ast.Module) -> Iterator[tuple[Function, ast.ClassDef | None]]:
    """Each module-level function, and each method with its class (a nested function is
    judged with the one it is in)."""
    for node in tree.body:
        if isinstance(node, Function):
            yield node, None
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, Function):
                    yield item, node


def _built_on_database(cls: ast.ClassDef) -> bool:
    for item in cls.body:
        if isinstance(item, Function) and item.name == "__init__":
            return "db" in _parameters(item)
    return any(  # a dataclass
        isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and item.target.id == "db"
        for item in cls.body
    )


def _openers() -> Iterator[tuple[str, Function, ast.ClassDef | None]]:
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "db.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for function, cls in _functions(tree):
            if any(_opens(node) for node in ast.walk(function)):
                yield str(path.relative_to(SOURCE)), function, cls


def test_nothing_given_a_conn_opens_another() -> None:
    given = [
        f"{path}: {function.name}"
        for path, function, _ in _openers()
        for inner in ast.walk(function)
        if isinstance(inner, Function)
        and "conn" in _parameters(inner)
        and any(_opens(node) for node in ast.walk(inner))
    ]
    assert given == []


def test_only_edges_and_runners_given_the_database_open_connections() -> None:
    found = list(_openers())
    assert found  # the scan sees the service's own transactions
    others = [
        f"{path}: {function.name}"
        for path, function, cls in found
        if Path(path).name not in EDGES
        and not (
            _built_on_database(cls) if cls is not None else _parameters(function)[:1] == ["db"]
        )
    ]
    assert others == []
