"""nox -s mutants: variants of a solution, graded by the real grader against their exercise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from streamlab.paths import REPO_ROOT
from streamlab.tooling import mutants

SOLUTION = textwrap.dedent(
    """\
    def is_adult(age):
        # BEGIN SOLUTION
        if age < 0:
            raise ValueError("an age is never negative")
        return age >= 18
        # END SOLUTION
    """
)

CHECKS = textwrap.dedent(
    """\
    import pytest

    from streamlab.grading import exercise, expect_equal


    @exercise("0.1")
    def test_grown_ups_and_children(nb):
        expect_equal(nb.is_adult(30), True, "30 is an adult.")
        expect_equal(nb.is_adult(5), False, "5 is a child.")


    @exercise("0.1")
    def test_a_negative_age_is_refused(nb):
        with pytest.raises(ValueError):
            nb.is_adult(-1)
    """
)

COURSE = textwrap.dedent(
    """\
    format_version = 1

    [[labs]]
    id = "00"
    slug = "tiny"
    title = "Tiny"

    [[labs.exercises]]
    id = "0.1"
    title = "Tell an adult"
    hints = ["Compare with the age of majority.", "One comparison, returned."]
    """
)


def _tiny_course(root: Path) -> Path:
    """A course of one lab, one exercise, two checks, which miss the boundary at 18."""
    root.mkdir()
    (root / "course.toml").write_text(COURSE)
    (root / "checks").mkdir()
    for name in ("conftest.py", "pytest.ini"):
        (root / "checks" / name).write_text((REPO_ROOT / "checks" / name).read_text())
    (root / "checks" / "lab_00").mkdir()
    (root / "checks" / "lab_00" / "test_0_1.py").write_text(CHECKS)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(SOLUTION)
    cell.metadata["tags"] = ["exercise-0.1"]
    notebook.cells = [nbformat.v4.new_markdown_cell("# Tiny"), cell]
    path = root / "solutions" / "00-tiny" / "00-tiny.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return root


def test_variants_are_made_in_order_and_marked_when_equivalent():
    made = mutants.cell_variants(SOLUTION)
    changes = [(kind, line, change) for kind, line, change, _ in made]
    assert changes == [
        ("comparison flipped", 3, "`age < 0` -> `age >= 0`"),
        ("boundary", 3, "`age < 0` -> `age <= 0`"),
        ("constant changed", 3, "`0` -> `1`"),
        ("statement dropped", 4, '`raise ValueError("an age is never negative")` dropped'),
        ("constant changed", 4, "`\"an age is never negative\"` -> `'an age is never negativex'`"),
        ("statement dropped", 5, "`return age >= 18` dropped"),
        ("comparison flipped", 5, "`age >= 18` -> `age < 18`"),
        ("boundary", 5, "`age >= 18` -> `age > 18`"),
        ("constant changed", 5, "`18` -> `19`"),
    ]
    assert mutants._equivalent(SOLUTION, made[4][3], "constant changed", 4) == mutants.ERROR_TEXT
    assert mutants._equivalent(SOLUTION, made[7][3], "boundary", 5) == ""
    # Dropping a bare `return` at the end of a function changes nothing Python runs.
    source = "def f(x):\n    # BEGIN SOLUTION\n    print(x)\n    return\n    # END SOLUTION\n"
    dropped = next(s for kind, line, _, s in mutants.cell_variants(source) if line == 4)
    assert mutants._equivalent(source, dropped, "statement dropped", 4) == mutants.SAME_BYTECODE


def test_the_grader_catches_some_variants_and_names_the_survivors(tmp_path):
    root = _tiny_course(tmp_path / "course")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamlab.tooling.mutants",
            "00",
            "--results",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "STREAMLAB_ROOT": str(root)},
    )
    assert out.returncode == 1, out.stdout + out.stderr  # below 95 %: the checks miss 18
    result = json.loads((tmp_path / "out" / "00.json").read_text())
    rows = {(r["line"], r["change"]): r for r in result["variants"]}
    assert rows[(5, "`age >= 18` -> `age < 18`")]["caught"] is True
    assert "30 is an adult" in rows[(5, "`age >= 18` -> `age < 18`")]["by"]
    assert rows[(3, "`0` -> `1`")]["caught"] is False  # is_adult(0) is never asked
    survivors = {(r["line"], r["kind"]) for r in result["variants"] if not r["caught"]}
    assert survivors == {
        (3, "constant changed"),
        (3, "boundary"),
        (4, "constant changed"),
        (5, "boundary"),
        (5, "constant changed"),
    }
    assert (result["made"], result["caught"], result["survivors"], result["equivalent"]) == (
        9,
        4,
        5,
        1,
    )
    assert result["score"] == round(4 / 8, 4)
    assert "0.1 line 5: boundary: `age >= 18` -> `age > 18`" in out.stdout
    assert "[likely equivalent: " + mutants.ERROR_TEXT + "]" in out.stdout
    assert mutants.table(tmp_path / "out") == "| 00 | 9 | 4 | 5 | 1 | 50.0% |"


def test_lab_00s_checks_catch_the_course_standard_of_its_variants(tmp_path):
    # The course's standard, held in CI on its quickest lab (under a minute).
    out = subprocess.run(
        [sys.executable, "-m", "streamlab.tooling.mutants", "00", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    result = json.loads((tmp_path / "00.json").read_text())
    assert result["score"] >= mutants.TARGET, out.stdout + out.stderr
    assert out.returncode == 0 and result["made"] > 0
