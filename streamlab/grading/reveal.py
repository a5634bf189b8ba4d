"""``nox -s reveal -- 2.4``: show an exercise's answer, and record that it was revealed.

For a learner who is stuck after the last hint: it prints what the notebook shows after the
exercise's check (its answer cells, :mod:`streamlab.grading.answers`), the exercise's code
from ``solutions/`` and its discussion from ``discussions.toml``. The learner's record
(:mod:`streamlab.grading.tries`) keeps the exercise as revealed, so every later grading says
``revealed`` (not passed) until the learner's own code passes; a prediction or diagnosis
revealed before any try counts as missed at the first try. ``build/grade.json`` says so at
once.
"""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
import tomllib
from pathlib import Path

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, read_cells, without_markers
from streamlab.course.registry import find_exercise
from streamlab.grading import answers, report, tries
from streamlab.grading.attempt import DIAGNOSIS, PREDICTION
from streamlab.grading.grade_file import GradeFileInvalid
from streamlab.paths import BUILD_DIR, REPO_ROOT


def answer_part(lab: registry.Lab, exercise: registry.Exercise) -> str:
    """``prediction``, ``diagnosis`` (a check of the lab's is marked ``part="diagnosis"`` for
    it) or ``""``: what a reveal before any try counts as missed."""
    if exercise.kind == "predict":
        return PREDICTION
    trees = []
    for check in lab.check_files:
        try:
            trees.append(ast.parse(check.read_text(encoding="utf-8")))
        except (OSError, SyntaxError):
            continue
    for node in (node for tree in trees for node in ast.walk(tree)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "exercise"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == exercise.id
            and any(
                k.arg == "part" and isinstance(k.value, ast.Constant) and k.value.value == DIAGNOSIS
                for k in node.keywords
            )
        ):
            return DIAGNOSIS
    return ""


def solution_code(lab: registry.Lab, exercise: str) -> str:
    """The exercise's cells in ``solutions/``, without the region markers."""
    try:
        cells = read_cells(lab.notebook(REPO_ROOT / "solutions"))
    except (OSError, ValueError):
        return ""
    return "\n\n".join(
        without_markers(c["source"]).strip() for c in cells if exercise_id(c) == exercise
    )


def discussion(exercise: str, path: Path | None = None) -> str:
    """The exercise's discussion in ``discussions.toml``, or ``""``."""
    try:
        with open(path or REPO_ROOT / "discussions.toml", "rb") as handle:
            entry = tomllib.load(handle).get(exercise)
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    text = entry.get("text") if isinstance(entry, dict) else None
    return textwrap.dedent(text).strip() if isinstance(text, str) else ""


def _section(title: str, body: str) -> list[str]:
    return ["", title, "-" * len(title), body] if body else []


def shown(lab: registry.Lab, exercise: registry.Exercise, first_try: dict | None = None) -> str:
    """What ``nox -s reveal`` prints for ``exercise``; ``first_try`` is its record's."""
    cells = answers.answer_cells(exercise.id)
    code = solution_code(lab, exercise.id)
    said = (
        f"The grade now says {exercise.id} is revealed, not passed; it counts as passed once "
        "your own code passes."
    )
    if first_try and first_try.get("revealed"):
        said += " Revealed before you answered, it counts as missed at the first try."
    lines = [f"Exercise {exercise.id} · {exercise.title}: revealed.", *textwrap.wrap(said, 88)]
    lines += _section(
        "What the notebook shows after its check", answers.as_text(exercise.id, cells)
    )
    lines += _section(f"Its solution ({lab.notebook(Path('solutions'))})", code)
    lines += _section("Discussion", discussion(exercise.id))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s reveal --", description=__doc__.split("\n")[0].split(": ", 1)[1]
    )
    parser.add_argument("exercise", help="the exercise id, e.g. 2.4")
    args = parser.parse_args(argv)
    try:
        lab, exercise = find_exercise(args.exercise)
    except registry.RegistryError as error:
        print(f"{str(error)[0].upper()}{str(error)[1:]}.", file=sys.stderr)
        return 2
    record = tries.reveal(exercise.id, answer_part(lab, exercise), BUILD_DIR / "first-tries.json")
    grade_file = BUILD_DIR / "grade.json"
    try:
        graded = report.read_json(grade_file)
    except GradeFileInvalid as refused:
        print(f"{refused}: grade again (nox -s check) to see the reveal in it.", file=sys.stderr)
        graded = None
    if (
        graded is not None
        and graded.get("status") == "graded"
        and not tries.is_course_solutions(str(graded.get("notebooks", "")))
    ):
        report.write_json(report.with_tries(graded, record), grade_file)
    print(shown(lab, exercise, record[exercise.id].get("first_try")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
