"""No module of the course imports one that imports it back, at import time or in a function.

Imports under ``if TYPE_CHECKING:`` are for type checkers only and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streamlab

PACKAGE = Path(streamlab.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _known() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import nodes inside ``if TYPE_CHECKING:`` blocks."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(inner) for child in node.body for inner in ast.walk(child)}
    return hidden


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the course modules it imports (anywhere in it, type-checking blocks aside)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hidden = _type_checking_only(tree)
        edges = set()
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    edges.add(submodule if submodule in known else node.module)
        graph[name] = {edge for edge in edges if edge in known and edge != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for edge in sorted(graph.get(node, ())):
            if edge not in index:
                visit(edge)
                low[node] = min(low[node], low[edge])
            elif edge in stack:
                low[node] = min(low[node], index[edge])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_one_that_imports_it_back():
    graph = imports(_known())
    assert "streamlab.grading.magic" not in graph["streamlab.grading.cell_history"]
    assert cycles(graph) == []
