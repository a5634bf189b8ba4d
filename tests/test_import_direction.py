"""The package's imports point one way: the course model at the bottom, the grader on it, the
check kit and the tooling above both, and the reference application above the lab helpers.

A wrong-way import ties a lower floor to a higher one: the grader, which runs in a learner's
kernel, would load the course's authoring tools; a lab helper would load the monitor it is a
part of. Imports inside functions count as much as those at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamlab.paths import REPO_ROOT

#: module (or package) -> the modules and packages it must never import.
NEVER = {
    "streamlab.course": ("streamlab",),
    "streamlab.grading": (
        "streamlab.tooling",
        "streamlab.solutions",
        "streamlab.kit",
        "streamlab.monitor",
    ),
    "streamlab.restart_trials": ("streamlab.monitor",),
}

#: What a module may import although a rule above would refuse it: the course model its own
#: modules and the repository's paths; the warm grader loads the kit before a learner's first
#: ``%check`` so that the check's imports are already done.
ALLOWED = {
    "streamlab.course": ("streamlab.course", "streamlab.paths"),
    "streamlab.grading.warm": ("streamlab.kit",),
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST) -> set[str]:
    """Every name an ``import`` or ``from ... import`` takes, anywhere in the module.

    ``from streamlab import paths`` takes ``streamlab.paths``, not all of ``streamlab``.
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def wrong_way(root: Path = REPO_ROOT / "streamlab") -> list[str]:
    """``module -> imported`` for every import that climbs against :data:`NEVER`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        for floor, never in NEVER.items():
            if not _within(name, (floor,)):
                continue
            for target in sorted(imported(ast.parse(path.read_text(encoding="utf-8")))):
                allowed = ALLOWED.get(floor, ()) + ALLOWED.get(name, ())
                if _within(target, never) and not _within(target, allowed):
                    found.append(f"{name} -> {target}")
    return sorted(set(found))


def test_no_import_points_the_wrong_way():
    assert wrong_way() == [], "these imports climb to a higher floor"


def test_the_rule_sees_an_import_inside_a_function(tmp_path):
    root = tmp_path / "streamlab"
    (root / "grading").mkdir(parents=True)
    (root / "course").mkdir()
    (root / "grading" / "ok.py").write_text("from streamlab.course import registry\n")
    (root / "grading" / "up.py").write_text("def f():\n    from streamlab.tooling import hints\n")
    (root / "course" / "up.py").write_text("from streamlab import session\n")
    assert wrong_way(root) == [
        "streamlab.course.up -> streamlab.session",
        "streamlab.grading.up -> streamlab.tooling.hints",
    ]
