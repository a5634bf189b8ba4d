"""The names notebooks use from ``streamlab`` are its public API, listed in one place.

Every ``streamlab`` name a notebook in ``labs/`` or ``solutions/`` uses must be in
``streamlab.notebook_api.NOTEBOOK_API``, every listed name must exist, and a listed function
or class must say what it does.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from streamlab.course.notebooks import read_cells
from streamlab.notebook_api import NOTEBOOK_API
from streamlab.paths import REPO_ROOT


def _is_module(dotted: str) -> bool:
    try:
        importlib.import_module(dotted)
    except ImportError:
        return False
    return True


def names_used(cells: list[str]) -> set[str]:
    """The ``streamlab`` objects the code of ``cells`` (in order) uses, as dotted names.

    Imports of modules carry over from cell to cell, as in a kernel: ``import streamlab``
    then ``streamlab.spark_session()`` in a later cell uses ``streamlab.spark_session``.
    """
    modules: dict[str, str] = {}
    used: set[str] = set()
    for source in cells:
        code = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
        )
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "streamlab":
                        local = alias.asname or alias.name.split(".")[0]
                        modules[local] = alias.name if alias.asname else "streamlab"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlab"):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    if _is_module(dotted):
                        modules[alias.asname or alias.name] = dotted
                    else:
                        used.add(dotted)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain, root = [], node
            while isinstance(root, ast.Attribute):
                chain.append(root.attr)
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                parts = modules[root.id].split(".") + chain[::-1]
                for end in range(len(parts), 0, -1):
                    if _is_module(".".join(parts[:end])):
                        if end < len(parts):
                            used.add(".".join(parts[: end + 1]))
                        break
    return used


def _notebooks() -> list[Path]:
    return sorted((REPO_ROOT / "solutions").glob("*/*.ipynb")) + sorted(
        (REPO_ROOT / "labs").glob("*/*.ipynb")
    )


def _resolve(dotted: str):
    parts = dotted.split(".")
    for end in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:end])
        if _is_module(module):
            value = importlib.import_module(module)
            for attribute in parts[end:]:
                value = getattr(value, attribute)
            return value
    raise ImportError(dotted)


def test_the_scanner_follows_imports_across_cells():
    cells = [
        "import streamlab\nfrom streamlab import deadlines\nfrom streamlab.hub import Hub",
        "%load_ext streamlab\nspark = streamlab.spark_session()\ndeadlines.finish(q)",
        "x = streamlab.session.ROCKSDB_PROVIDER",
    ]
    assert names_used(cells) == {
        "streamlab.hub.Hub",
        "streamlab.spark_session",
        "streamlab.deadlines.finish",
        "streamlab.session.ROCKSDB_PROVIDER",
    }


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_a_notebook_uses_only_the_listed_names(path: Path):
    cells = [c["source"] for c in read_cells(path) if c.get("cell_type") == "code"]
    unlisted = sorted(names_used(cells) - set(NOTEBOOK_API))
    assert unlisted == [], (
        f"{path.relative_to(REPO_ROOT)} uses {unlisted}, which streamlab/notebook_api.py does "
        "not list: a learner's saved notebook depends on every name it uses, so list it there "
        "(with an example) or use a listed one."
    )


@pytest.mark.parametrize("name", sorted(NOTEBOOK_API))
def test_every_listed_name_exists_and_says_what_it_does(name: str):
    try:
        value = _resolve(name)
    except (ImportError, AttributeError):
        pytest.fail(f"streamlab/notebook_api.py lists {name}, which the package no longer has")
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{name} has no docstring"
    assert NOTEBOOK_API[name].strip(), f"{name} has no example"


def test_the_notebook_api_holds_none_of_the_course_s_own_tooling():
    tooling = sorted(name for name in NOTEBOOK_API if name.startswith("streamlab.tooling"))
    assert tooling == [], (
        f"streamlab/notebook_api.py lists {tooling}: streamlab.tooling is the course's own "
        "tooling, which a notebook never imports."
    )


def test_the_top_level_holds_no_tooling_module():
    top = {path.stem for path in (REPO_ROOT / "streamlab").glob("*.py")}
    tooling = {path.stem for path in (REPO_ROOT / "streamlab" / "tooling").glob("*.py")}
    assert sorted(top & (tooling - {"__init__"})) == []
