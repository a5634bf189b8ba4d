"""What the learner has tried, kept across gradings: ``build/first-tries.json``.

``build/grade.json`` is rewritten by every grading; this record is not. Per exercise it keeps
whether it has been graded at least once (passed or failed: a stub not started, or a cell
that failed before any check ran, is not a try), whether its answer was revealed
(``nox -s reveal``), and, for a prediction or a graded diagnosis, the first graded answer and
whether it was right::

    {"format_version": 1,
     "exercises": {"2.2": {"graded": true, "revealed": false,
                           "first_try": {"answer": "{\\"total\\": 24}", "right": false}}}}

An answer code cell in ``labs/`` starts with :func:`require_graded`, which reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamlab.paths import BUILD_DIR

#: The record's file; read at every use, so a test may point it elsewhere.
RECORD = BUILD_DIR / "first-tries.json"
FORMAT_VERSION = 1


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
