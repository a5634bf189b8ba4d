"""What the learner has tried, kept across gradings: ``build/first-tries.json``.

``build/grade.json`` is rewritten by every grading; this record is not. Per exercise it keeps
whether it has been graded at least once (passed or failed: a stub not started, or a cell
that failed before any check ran, is not a try), whether its answer was revealed
(``nox -s reveal``), and, for a prediction or a graded diagnosis, the first graded answer and
whether it was right::

    {"format_version": 1,
     "exercises": {"2.2": {"graded": true, "revealed": false,
                           "first_try": {"answer": "{\\"total\\": 24}", "right": false}}}}

An answer code cell in ``labs/`` holds only a call of :func:`answer_cell`, which reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from streamlab.paths import BUILD_DIR, REPO_ROOT

#: The record's file; read at every use, so a test may point it elsewhere.
RECORD = BUILD_DIR / "first-tries.json"
FORMAT_VERSION = 1


def is_course_solutions(notebooks: str | Path) -> bool:
    """Whether a grading's folder of notebooks is the course's own ``solutions/``: such a
    grading is no try of the learner's, and opens nothing."""
    folder = Path(notebooks)
    folder = folder if folder.is_absolute() else REPO_ROOT / folder
    try:
        return folder.resolve() == (REPO_ROOT / "solutions").resolve()
    except (OSError, ValueError):
        return False


def read(path: Path | None = None) -> dict[str, dict]:
    """Each exercise's entry in the record, by id; empty when there is none or it is unreadable."""
    try:
        data = json.loads((path or RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    exercises = data.get("exercises") if isinstance(data, dict) else None
    if not isinstance(exercises, dict):
        return {}
    return {k: v for k, v in exercises.items() if isinstance(v, dict)}


def opened(exercise: str, path: Path | None = None) -> bool:
    """Whether ``exercise`` has been graded at least once, or its answer revealed."""
    entry = read(path).get(exercise, {})
    return bool(entry.get("graded") or entry.get("revealed"))


class NotGradedYet(Exception):
    """An answer cell was run before its exercise was graded once; the message says what to do.

    In a notebook it shows as its one sentence, without a traceback, and stops Run All.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def require_graded(exercise: str) -> None:
    """Stop the cell, with one sentence, unless ``exercise`` has been graded at least once.

    The first line of a cell in ``labs/`` that runs Spark to show an exercise's answer: the
    learner commits to an answer (``%check``) before the cell shows what Spark does.
    """
    if not opened(exercise):
        raise NotGradedYet(
            f"This cell shows the answer to exercise {exercise}, so it runs once {exercise} has "
            f"been graded: write your answer and run `%check {exercise}` first (stuck: "
            f"`nox -s reveal -- {exercise}`)."
        )


class AnswerCellFailed(Exception):
    """The code an answer cell ran raised; IPython has shown its traceback already."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def answer_cell(exercise: str, cell_id: str, solutions: Path | None = None) -> None:
    """Show and run one of ``exercise``'s answer code cells, once ``exercise`` was graded.

    In ``labs/`` such a cell holds only this call, so the code that shows the answer (and
    its comments) cannot be read before the learner commits to one. The code is the solved
    notebook's cell with the same id (in ``solutions``, default the course's ``solutions/``);
    the cell shows it, then runs it in the notebook's namespace as if it were written there.
    """
    require_graded(exercise)
    code = _answer_code(exercise, cell_id, solutions or REPO_ROOT / "solutions")
    from IPython import get_ipython
    from IPython.display import display

    shell = get_ipython()
    if shell is None:
        import __main__

        exec(compile(code, f"<answer cell of {exercise}>", "exec"), vars(__main__))
        return
    said = f"What this cell runs, now that {exercise} was graded:"
    shown = {
        "text/markdown": f"*{said}*\n\n```python\n{code}\n```",
        "text/plain": f"{said}\n{code}",
    }
    display(shown, raw=True)
    if not shell.run_cell(code, store_history=False).success:
        raise AnswerCellFailed(f"The answer cell of exercise {exercise} failed: see above.")


def _answer_code(exercise: str, cell_id: str, solutions: Path) -> str:
    from streamlab.course import registry
    from streamlab.course.notebooks import answer_id, read_cells, source

    path = registry.lab(exercise.partition(".")[0]).notebook(solutions)
    try:
        cells = read_cells(path)
    except (OSError, ValueError):
        cells = []
    for cell in cells:
        if cell.get("id") == cell_id and answer_id(cell) == exercise:
            return source(cell)
    raise AnswerCellFailed(
        f"The answer cell {cell_id} of exercise {exercise} is not in {path}: restore the "
        f"course's solved notebook with `git checkout -- {path}`."
    )


def write(exercises: dict[str, dict], path: Path | None = None) -> None:
    """Replace the record atomically with ``exercises``."""
    from streamlab.paths import write_atomically

    def out(stream) -> None:
        data = {"format_version": FORMAT_VERSION, "exercises": exercises}
        stream.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    write_atomically(path or RECORD, out)


def update(results: list, path: Path) -> dict[str, dict]:
    """Add a grading's tries (its checks' :class:`~streamlab.grading.verdict.CheckResult`)
    to the record at ``path``: which exercises were graded, and the first graded answer of
    each prediction and diagnosis. Returns the record as it now is."""
    exercises = read(path)
    by_exercise: dict[str, list] = {}
    for result in results:
        if result.attempt is not None:
            by_exercise.setdefault(result.exercise, []).append(result)
    changed = False
    for exercise, checks in by_exercise.items():
        entry = exercises.setdefault(exercise, {})
        if any(r.attempt.tried for r in checks) and not entry.get("graded"):
            entry["graded"] = changed = True
        answering = [r for r in checks if r.attempt.part]
        if "first_try" in entry or not any(r.attempt.tried for r in answering):
            continue
        entry["first_try"] = {
            "answer": next((r.attempt.answer for r in answering if r.attempt.answer), None),
            "right": all(r.verdict.status == "passed" for r in answering),
            "part": answering[0].attempt.part,
        }
        changed = True
    exercises = {k: v for k, v in exercises.items() if v}
    if changed:
        write(exercises, path)
    return exercises


def reveal(exercise: str, part: str, path: Path | None = None) -> dict[str, dict]:
    """Record ``exercise`` as revealed; an answer (``part``: prediction or diagnosis) revealed
    before any try counts as a miss at the first try. Returns the record as it now is."""
    exercises = read(path)
    entry = exercises.setdefault(exercise, {})
    entry["revealed"] = True
    if part and "first_try" not in entry:
        entry["first_try"] = {"answer": None, "right": False, "part": part, "revealed": True}
    write(exercises, path)
    return exercises


def masked(results: list, exercises: Mapping[str, dict]) -> list:
    """``results`` with a failed answer's expected values kept back (the values Spark gave)
    until its exercise is revealed: its sentence says which parts are not right instead."""
    from dataclasses import replace

    shown = []
    for result in results:
        tried = result.attempt
        if (
            tried is not None
            and tried.hides
            and not exercises.get(result.exercise, {}).get("revealed")
        ):
            message = f"{result.verdict.message} {tried.wrong}".strip()
            verdict = replace(result.verdict, message=message, expected="", diff="")
            result = replace(result, verdict=verdict)
        shown.append(result)
    return shown


def called(exercises: Mapping[str, dict]) -> dict[str, int]:
    """How many predictions and diagnoses were right at the first try, of those answered."""
    tries = [e["first_try"] for e in exercises.values() if isinstance(e.get("first_try"), dict)]
    return {"called": sum(bool(t.get("right")) for t in tries), "answered": len(tries)}
