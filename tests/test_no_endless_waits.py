"""Nothing the course runs waits on a query for ever: every wait has a bound and a sentence.

``query.awaitTermination()`` and ``query.processAllAvailable()`` without a bound hang as long
as a stalled query does (a Spark fault once held lab 10's notebook for 2,000 s). The course's
own code waits through :mod:`streamlab.deadlines` or with a timeout; only a learner's answer
(the code inside a notebook's solution regions) may wait as production code does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamlab.course.notebooks import read_cells, split_regions
from streamlab.paths import REPO_ROOT

ENDLESS = re.compile(r"\.(awaitTermination|processAllAvailable|awaitAnyTermination)\(\s*\)")
#: Where the course's own Python lives.
CODE = ["streamlab", "checks", "tests", "bench", "noxfile.py"]
#: What may name the calls it replaces: the module that does so, and this test.
NAMING = {"streamlab/deadlines.py", "tests/test_no_endless_waits.py"}


def endless_waits_in(text: str) -> list[str]:
    """The lines of ``text`` that wait on a query without a bound."""
    return [line.strip() for line in text.splitlines() if ENDLESS.search(line)]


def course_code_outside_solutions(cell_source: str) -> str:
    """A notebook cell's code with its solution regions (the learner's answers) left out."""
    return "\n".join(
        line for kind, lines in split_regions(cell_source) if kind == "code" for line in lines
    )


def _python_files() -> list[Path]:
    files: list[Path] = []
    for place in CODE:
        path = REPO_ROOT / place
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return [f for f in files if f.relative_to(REPO_ROOT).as_posix() not in NAMING]


def _notebooks() -> list[Path]:
    return sorted((REPO_ROOT / "solutions").glob("*/*.ipynb")) + sorted(
        (REPO_ROOT / "labs").glob("*/*.ipynb")
    )


def test_the_rule_sees_an_endless_wait_and_lets_a_bounded_one_pass():
    assert endless_waits_in("query.awaitTermination()\nx = 1") == ["query.awaitTermination()"]
    assert endless_waits_in("q.start().processAllAvailable( )") == [
        "q.start().processAllAvailable( )"
    ]
    assert endless_waits_in("query.awaitTermination(120)\nfinish(query, within=60)") == []
    answer = "setup()\n# BEGIN SOLUTION\nquery.awaitTermination()\n# END SOLUTION\n"
    assert endless_waits_in(course_code_outside_solutions(answer)) == []
    assert endless_waits_in(course_code_outside_solutions("q.awaitTermination()\n")) != []


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_python_file_of_the_course_waits_on_a_query_without_a_bound(path: Path):
    assert endless_waits_in(path.read_text()) == [], (
        f"{path.relative_to(REPO_ROOT)} waits on a query without a bound; use "
        "streamlab.deadlines.finish or drain, which stop a stalled query and say so."
    )


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_notebook_cell_of_the_course_waits_on_a_query_without_a_bound(path: Path):
    found = []
    for index, cell in enumerate(read_cells(path)):
        if cell.get("cell_type") != "code":
            continue
        for line in endless_waits_in(course_code_outside_solutions(cell["source"])):
            found.append(f"cell {index}: {line}")
    assert found == [], (
        f"{path.relative_to(REPO_ROOT)} waits on a query without a bound outside a learner's "
        f"answer; use streamlab.deadlines.finish or drain: {found}"
    )
