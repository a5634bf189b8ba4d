"""What a check made of the learner's try, sent to the supervisor with its verdict.

Runs in the grading child, where the learner's cells ran. Every check says whether it was a
try (it ran on the learner's code, and passed or failed it). The check of an answer (every
check of a predict exercise, and a check marked ``@exercise(..., part="diagnosis")``) also
says what the exercise's cells assigned (the answer, as JSON text), and, when it compared the
answer with Spark's and they differ, which parts of the answer are not right, in words that
do not give Spark's values: a wrong prediction is not answered with the right one.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, read_cells
from streamlab.grading.expect import CheckFailed
from streamlab.grading.verdict import Attempt

PREDICTION, DIAGNOSIS = "prediction", "diagnosis"


def judged(error: BaseException | None, lab: str, exercise: str, part: str, notebook) -> Attempt:
    """What the check of ``exercise`` (marked with ``part``) that raised ``error`` (None: it
    passed) made of the try; ``notebook`` is the loaded notebook (None: it did not load)."""
    # A check's comparison fails with an AssertionError (CheckFailed is one); anything else
    # (a cell that did not run, a stub, a missing name, a time limit) means no answer was judged.
    tried = error is None or isinstance(error, AssertionError)
    answer_part = answer_part_of(lab, exercise, part)
    if not answer_part:
        return Attempt(tried)
    if not tried or notebook is None:
        return Attempt(False, answer_part)
    answer = _answer(notebook, exercise, answer_part)
    if not isinstance(error, CheckFailed) or error.of_shape:
        return Attempt(True, answer_part, answer)
    expected, actual = error.values
    return Attempt(True, answer_part, answer, wrong_parts(expected, actual), hides=True)


def answer_part_of(lab: str, exercise: str, part: str) -> str:
    """``prediction`` or ``diagnosis`` for a check of an answer, else ``""``."""
    if part == DIAGNOSIS:
        return DIAGNOSIS
    try:
        kind = registry.lab(lab).exercise(exercise).kind
    except (registry.RegistryError, ValueError):
        return ""
    return PREDICTION if kind == "predict" else ""


def _answer(notebook, exercise: str, part: str) -> str | None:
    """The names the exercise's cells assign at their top level, with their values, as JSON;
    for a diagnosis only ``DIAGNOSIS_N_M``."""
    try:
        cells = [c for c in read_cells(notebook.path) if exercise_id(c) == exercise]
    except (OSError, ValueError):
        return None
    names: list[str] = []
    for cell in cells:
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError:
            continue
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    if part == DIAGNOSIS:
        names = [n for n in names if n == f"DIAGNOSIS_{exercise.replace('.', '_')}"]
    module = notebook.module
    values = {n: plain(getattr(module, n)) for n in names if hasattr(module, n)}
    return json.dumps(values, ensure_ascii=False) if values else None


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it: tuples as lists, keys as text, anything else as repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {
            k if isinstance(k, str | int | float | bool) else repr(k): plain(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return [plain(v) for v in sorted(value, key=repr)]
    return repr(value)


def wrong_parts(expected: Any, actual: Any) -> str:
    """Which parts of ``actual`` (the learner's answer) differ from ``expected``, in a
    sentence that holds none of the expected values."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        right = [k for k in actual if k in expected and actual[k] == expected[k]]
        wrong = [
            repr(k) + _items_right(expected.get(k), actual[k], " ({} of your {} items right)")
            for k in actual
            if k not in right
        ]
        said = f"Not right yet: {_listed(wrong)}." if wrong else ""
        if right:
            said = f"Right: {_listed([repr(k) for k in right])}. {said}".strip()
        return said
    return _items_right(expected, actual, "{} of your {} items are right.")


def _items_right(expected: Any, actual: Any, said: str) -> str:
    """How many items of the list ``actual`` are in the list ``expected``, in ``said``
    ({} for the count right, {} for the count given); ``""`` unless both are lists."""
    if not (isinstance(expected, list | tuple) and isinstance(actual, list | tuple)):
        return ""
    remaining = list(expected)
    matched = 0
    for item in actual:
        if item in remaining:
            remaining.remove(item)
            matched += 1
    return said.format(matched, len(actual))


def _listed(shown: list[str]) -> str:
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + f" and {shown[-1]}"
