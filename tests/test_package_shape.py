"""The package stays readable: no function in ``streamlab/`` runs over 60 lines."""

from __future__ import annotations

import ast

from streamlab.paths import REPO_ROOT

LONGEST = 60


def long_functions(root=REPO_ROOT / "streamlab") -> list[str]:
    """``path:line name (N lines)`` for every function longer than ``LONGEST`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    where = path.relative_to(root.parent).as_posix()
                    found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_the_package_is_over_60_lines():
    assert long_functions() == [], "split these into named steps"


def test_the_rule_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{n} = {n}" for n in range(LONGEST))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    (tmp_path / "short.py").write_text("def short():\n    return 1\n")
    assert [line.split(" ")[1] for line in long_functions(tmp_path)] == ["long"]
