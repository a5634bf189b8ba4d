"""No module of ``streamlab`` imports one that imports it back, however indirectly.

Every import counts: at the top of a module, inside a function (run later, but a cycle all
the same for a reader and a type checker) and under ``TYPE_CHECKING``. ``from package import
name`` counts as an import of the submodule when ``name`` is one, else of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamlab.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "streamlab"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``streamlab`` that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {module for module in found if module in known and module != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(group) for group in found)


def test_the_walk_sees_every_kind_of_import():
    edges = graph()
    # A top-level, a relative, an in-function and a `from package import submodule` import.
    assert "streamlab.processes" in edges["streamlab.cluster"]
    assert "streamlab.hub.frames" in edges["streamlab.hub.session"]
    assert "streamlab.fleet" in edges["streamlab.demo"]  # imported inside Demo.__enter__
    assert "streamlab.processes" in edges["streamlab.monitor"]
    # %check's recorder only records; the magic reads it (registered lazily by streamlab).
    assert "streamlab.grading.cell_history" in edges["streamlab.grading.magic"]
    assert "streamlab.grading.magic" not in edges["streamlab.grading.cell_history"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
