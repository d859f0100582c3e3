"""The house's floors (CONVENTIONS.md, "Layout"): no module imports, at run time, one that
imports it back, however far round (a lazy import inside a function counts; one under
`TYPE_CHECKING` does not), and the ground floor and the lower packages (`http/`, `filters/`,
`search/`, `jobs/`, `job_kinds`) import nothing above them: no domain package, nor the
frame."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import units_api

SOURCE = Path(units_api.__file__).parent
PACKAGE = "units_api"
CONVENTIONS = Path(__file__).resolve().parent.parent / "CONVENTIONS.md"
# A heading of the layout's floors, and an entry: its modules and packages, then what they hold.
FLOOR_HEADING = re.compile(r"^  (ground floor|domains|the frame):", re.MULTILINE)
ENTRY = re.compile(r"^  ([a-z_]+(?:\.py|/)(?:, [a-z_]+(?:\.py|/))*)", re.MULTILINE)


def _layout() -> dict[str, list[str]]:
    """CONVENTIONS' layout: each floor's modules and packages, by name."""
    block = CONVENTIONS.read_text().split("## Layout", 1)[1].split("```")[1]
    parts = FLOOR_HEADING.split(block)[1:]
    return {
        floor: [
            name.rstrip("/").removesuffix(".py")
            for m in ENTRY.finditer(text)
            for name in m[1].split(", ")
        ]
        for floor, text in zip(parts[::2], parts[1::2], strict=True)
    }


# The layout's ground floor, with the lower packages (`http/`, `filters/`, `search/`, `jobs/`).
BELOW_THE_DOMAINS = tuple(_layout()["ground floor"])


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for path in SOURCE.rglob("*.py")
        if "migrations" not in path.relative_to(SOURCE).parts
    }


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at the top or inside a function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            yield from (n for each in node.orelse for n in _imports_in(each))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def _targets(statement: ast.Import | ast.ImportFrom, module: str, known: set[str]) -> set[str]:
    """The project's modules an import statement loads (a package's `__init__` aside)."""
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            anchor = module.split(".")[: -statement.level]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{alias.name}" for alias in statement.names] + [base]
    return {name for name in names if name in known and name.startswith(f"{PACKAGE}.")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = {t for s in _imports(tree) for t in _targets(s, name, known)}
        graph[name] = {t for t in edges if t != name and not _is_package(t, modules)}
    return graph


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _floor(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles(_graph()) == []


def test_the_ground_floor_and_the_lower_packages_import_nothing_above_them() -> None:
    graph = _graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _floor(module) in BELOW_THE_DOMAINS
        for target in targets
        if _floor(target) not in BELOW_THE_DOMAINS
    )
    assert wrong == []


def test_the_layout_names_every_module_and_package() -> None:
    """Each top-level module and package is named once, on its floor, and each name is one."""
    named = [name for names in _layout().values() for name in names]
    present = [path.name.removesuffix(".py") for path in SOURCE.iterdir()]
    present = [name for name in present if name.isidentifier() and not name.startswith("_")]
    assert sorted(named) == sorted(present)
    assert "errors" in BELOW_THE_DOMAINS and "jobs" in BELOW_THE_DOMAINS


def test_the_graph_sees_a_cycle_through_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from units_api import db\n"
        "def f():\n    from units_api import metrics\n"
    )
    known = {"units_api.db", "units_api.metrics", "units_api.config"}
    loaded = {t for s in _imports(tree) for t in _targets(s, "units_api.config", known)}
    assert loaded == {"units_api.metrics"}


def test_the_settings_load_no_database_layer() -> None:
    """A script may read the settings without loading SQLAlchemy or the database layer."""
    probe = (
        "import sys, units_api.config\n"
        "print(sorted(m for m in ('sqlalchemy', 'units_api.db', 'units_api.metrics')"
        " if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
