"""What each exercise's code calls of the exercises before it, read from the cells' source.

The loader records it for every notebook it loads, and :mod:`streamlab.grading.blame` uses it
to tell a check that failed because of an earlier exercise's code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

#: exercise -> earlier exercise -> the names of the earlier exercise's cell it reads.
Uses = dict[str, dict[str, list[str]]]


def uses(cells: Iterable[tuple[str | None, str]]) -> Uses:
    """What each exercise's cells read from the cells of the exercises before it.

    ``cells`` are (exercise or None, source) in notebook order; cells that do not parse are
    left out (their exercise fails for that already).
    """
    defined: dict[str, str] = {}  # name -> the exercise whose cell defines it last
    found: Uses = {}
    for exercise, source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        if exercise:
            read = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})
            for name in read:
                owner = defined.get(name)
                if owner and owner != exercise:
                    found.setdefault(exercise, {}).setdefault(owner, []).append(name)
        for name in _top_level_names(tree):
            if exercise:
                defined[name] = exercise
            else:
                defined.pop(name, None)  # a setup cell's name is nobody's exercise
    return found


def _top_level_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names
