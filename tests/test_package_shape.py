"""The package and the checks stay readable: no function in ``streamlab/`` or in a lab's check
folder runs over 60 lines, and no check file over about 400."""

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


#: About how many lines a check file may hold: one exercise's checks, read in one sitting.
LONGEST_CHECK_FILE = 400


def lab_folders(root=REPO_ROOT / "checks") -> list:
    """The labs' check folders (``checks/lab_NN``): the layout the gates below hold."""
    return sorted(p for p in root.glob("lab_*") if p.is_dir())


def long_check_files(folders) -> list[str]:
    """``path (N lines)`` for every check file over :data:`LONGEST_CHECK_FILE` lines."""
    found = []
    for folder in folders:
        for path in sorted(folder.glob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > LONGEST_CHECK_FILE:
                found.append(f"{folder.name}/{path.name} ({lines} lines)")
    return found


def test_no_check_function_is_over_60_lines():
    found = [line for folder in lab_folders() for line in long_functions(folder)]
    assert found == [], "split these into named steps"


def test_no_check_file_is_over_400_lines():
    assert long_check_files(lab_folders()) == [], (
        "one file an exercise; what the lab's checks share goes in its story module"
    )


def test_the_check_gates_see_a_long_file_and_a_long_function(tmp_path):
    folder = tmp_path / "checks" / "lab_99"
    folder.mkdir(parents=True)
    body = "\n".join(f"    x{n} = {n}" for n in range(LONGEST))
    (folder / "test_9_1.py").write_text(f"def test_long():\n{body}\n")
    (folder / "test_9_2.py").write_text("X = 1\n" * (LONGEST_CHECK_FILE + 1))
    assert lab_folders(tmp_path / "checks") == [folder]
    assert [line.split(" ")[1] for line in long_functions(folder)] == ["test_long"]
    assert long_check_files([folder]) == [f"lab_99/test_9_2.py ({LONGEST_CHECK_FILE + 1} lines)"]
