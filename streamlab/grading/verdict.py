"""Turn what a check raised into a status and a sentence a learner can act on."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from streamlab.course.notebooks import NOT_DONE_PATTERN
from streamlab.grading.expect import CheckFailed
from streamlab.grading.timeout import CheckTimeout
from streamlab.spark_errors import deepest_cause, explain

if TYPE_CHECKING:
    from streamlab.grading.loader import CellProblem

# The loader (and with it nbformat, slow to import) is imported where it is needed, so that
# the supervising process, which only reads verdicts, starts quickly.


class Status(StrEnum):
    """An exercise's (or a check's) status, as ``build/grade.json`` spells it."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_STARTED = "not-started"
    #: The checks could not run for a reason that is not the learner's code (the course's
    #: reference notebooks are missing): neither passed nor failed.
    NOT_GRADED = "not-graded"
    #: The learner asked for the answer (``nox -s reveal``) and the code has not passed since:
    #: not passed. One that passes later is ``passed``, its row marked ``"revealed": true``.
    REVEALED = "revealed"

    @property
    def symbol(self) -> str:
        return {
            "passed": "✓",
            "failed": "✗",
            "not-started": "○",
            "not-graded": "–",
            "revealed": "◌",
        }[self.value]

    @property
    def word(self) -> str:
        return self.value.replace("-", " ")

    @property
    def colour(self) -> str:
        return {
            "passed": "#1a7f37",
            "failed": "#cf222e",
            "not-started": "#6e7781",
            "not-graded": "#9a6700",
            "revealed": "#8250df",
        }[self.value]


PASSED, FAILED, NOT_STARTED, NOT_GRADED, REVEALED = (
    Status.PASSED,
    Status.FAILED,
    Status.NOT_STARTED,
    Status.NOT_GRADED,
    Status.REVEALED,
)


class CellFailed(Exception):
    """An exercise cannot be checked because one of its cells did not run."""

    def __init__(self, problem: CellProblem):
        super().__init__(problem.sentence())
        self.problem = problem


@dataclass(frozen=True)
class Verdict:
    """A check's (or an exercise's) verdict: its status and what to read."""

    status: Status
    message: str
    #: What the failed check expected and what the code did, in full (``expect.CheckFailed``).
    expected: str = ""
    actual: str = ""
    #: The failed check's own hint, shown instead of the exercise's first tier.
    hint: str = ""
    #: Missing, extra and changed items when the check compared two lists.
    diff: str = ""
    #: A failure that says what to do first (finish an earlier exercise) and has nothing to do
    #: with this exercise's own code: no hint of this exercise goes with it.
    hintless: bool = False
    #: For a check that failed by an error its code raised: the deepest cause's error class
    #: (``STATE_STORE_COMMIT_VALIDATION_FAILED``) or exception (``TypeError``).
    cause: str = ""

    def __post_init__(self) -> None:
        # A verdict that came through an event (a string) gets its enum back, or fails here.
        object.__setattr__(self, "status", Status(self.status))


@dataclass(frozen=True)
class Attempt:
    """What one check made of the learner's try (:mod:`streamlab.grading.attempt`).

    ``tried``: the check ran on the learner's code and passed or failed it (a stub, or a cell
    that failed before the check ran, is no try). For the check of an answer (a prediction's,
    or ``part="diagnosis"``), ``part`` says which, ``answer`` is what the exercise's cells
    assigned, as JSON, and a failed comparison says in ``wrong`` which parts are not right,
    without the values expected (``hides`` true: its expected values are to be kept back).
    """

    tried: bool
    part: str = ""
    answer: str | None = None
    wrong: str = ""
    hides: bool = False


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check of one exercise.

    ``unit`` is what the check graded: the lab (the default), or under ``nox -s mutants`` a
    variant of the lab's solution (``m12``, or ``solution`` for the solution itself).
    """

    lab: str
    exercise: str
    check: str
    verdict: Verdict
    unit: str = ""
    #: The part of its exercise the check grades (``diagnosis``, ``fix``), or "".
    part: str = ""
    attempt: Attempt | None = None

    def __post_init__(self) -> None:
        if not self.unit:
            object.__setattr__(self, "unit", self.lab)


def _whole(text: str) -> str:
    # Never cut: build/grade.json keeps every word; the terminal table shortens on its own.
    return text.strip()


def _not_done(error: BaseException) -> str | None:
    """The exercise whose stub raised ``error``, if a stub did."""
    # A stub called inside a Spark job comes back wrapped in a PythonException whose text
    # holds the original message, so search the whole text, not only its start.
    for line in str(error).splitlines():
        match = NOT_DONE_PATTERN.match(line.split("NotImplementedError: ")[-1].strip())
        if match:
            return match.group(1)
    return None


def verdict_for(
    error: BaseException | None, exercise: str, notebook: Path | None = None
) -> Verdict:
    """The verdict for a check of ``exercise`` that raised ``error`` (None: it passed).

    ``notebook`` is the notebook graded: a notebook under ``solutions/`` that is missing or
    unreadable and is not that one is the course's reference, which the check needed.
    """
    from streamlab.grading.loader import missing_reference, reference_sentence

    if error is None:
        return Verdict(PASSED, "")
    reference = missing_reference(error, notebook)
    if reference is not None:
        return Verdict(
            NOT_GRADED, reference_sentence(reference, f"The checks of exercise {exercise}")
        )
    return (
        _not_run_verdict(error) or _stub_verdict(error, exercise) or _check_verdict(error, exercise)
    )


def _not_run_verdict(error: BaseException) -> Verdict | None:
    """The verdict when the code could not be checked: a cell or the notebook failed, or
    the code ended the program."""
    from streamlab.grading.loader import NotebookUnreadable, describe_error

    if isinstance(error, CellFailed):
        status = {"not-done": NOT_STARTED, "reference": NOT_GRADED}.get(error.problem.kind, FAILED)
        return Verdict(status, _whole(str(error)))
    if isinstance(error, NotebookUnreadable):
        return Verdict(FAILED, _whole(str(error)))
    if isinstance(error, SystemExit):
        where = describe_error(error, "<").partition(" (")[2].rstrip(")")
        return Verdict(
            FAILED,
            _whole(
                f"Your code called sys.exit({error.code!r})"
                + (f" ({where})" if where else "")
                + ": a function should return its result, not end the program."
            ),
        )
    return None


def _stub_verdict(error: BaseException, exercise: str) -> Verdict | None:
    """The verdict when an exercise's stub raised: this one's, or an earlier one's."""
    stub = _not_done(error)
    if stub == exercise:
        return Verdict(NOT_STARTED, f"Exercise {exercise} is not done yet.")
    if stub:
        return Verdict(
            FAILED,
            f"This check uses your code from exercise {stub}, which is not "
            f"done yet: finish exercise {stub} first.",
            hintless=True,
        )
    return None


def _check_verdict(error: BaseException, exercise: str) -> Verdict:
    """The verdict when the check ran and the code did not do what it asked."""
    from streamlab.grading.loader import MissingName

    if isinstance(error, MissingName):
        return Verdict(
            FAILED,
            (
                f"`{error.name}` is not defined in the notebook's exercise cells. Did you rename "
                f"it, or write it in a cell that is not tagged exercise-{exercise}?"
            ),
        )
    if isinstance(error, CheckFailed):
        message = error.message.strip()
        hint = error.hint or _aimed_hint(message)
        return Verdict(FAILED, message, error.expected, error.actual, hint, error.diff)
    if isinstance(error, CheckTimeout):
        return Verdict(
            FAILED,
            (
                f"The check {error}. Is there an endless loop, or a stream that never stops? "
                "(A stream that should end uses trigger(availableNow=True).)"
            ),
            hint=TIMEOUT_HINT,
        )
    if isinstance(error, AssertionError):
        # Checks phrase their own message; pytest appends its introspection after it.
        text = str(error).split("\nassert ")[0].strip() or "A check's assertion failed."
        return Verdict(FAILED, _whole(text))
    return _raised_verdict(error)


def _raised_verdict(error: BaseException) -> Verdict:
    """The verdict when the code raised: what it raised, unwrapped to its deepest cause."""
    from streamlab.grading.loader import describe_error

    cause = deepest_cause(error)
    said = describe_error(error, "<")
    if cause.name in (type(error).__name__, error_class(error)):
        return Verdict(FAILED, _whole(f"Your code raised {said}"), cause=cause.name)
    explained = explain(error)
    outer = f"{type(error).__name__}" + (f" [{error_class(error)}]" if error_class(error) else "")
    text = f"Your code raised {outer}, whose deepest cause is {cause}"
    return Verdict(
        FAILED,
        _whole(f"{text}. {explained}" if explained else f"{text}."),
        cause=cause.name,
    )


def error_class(error: BaseException) -> str:
    """The error class Spark gave ``error`` itself, or ""."""
    own = getattr(error, "getCondition", None)
    try:
        return str(own() or "") if callable(own) else ""
    except Exception:  # a half-built Spark error
        return ""


#: The hint of a check that ran out of time, whatever its exercise.
TIMEOUT_HINT = (
    "A query started without trigger(availableNow=True) runs until something stops it, so "
    "awaitTermination() on it waits for ever; a loop whose condition never changes does too."
)

#: Failures every check says the same way, and the hint aimed at each when the check has none.
_AIMED_HINTS = (
    (
        re.compile(r"\bit returned NoneType\b"),
        "A function returns None when no `return` statement runs: is the value computed but "
        "not returned, or returned from an inner function only?",
    ),
)


def _aimed_hint(message: str) -> str:
    """A hint aimed at what ``message`` says went wrong, or "" (the exercise's first tier)."""
    for pattern, hint in _AIMED_HINTS:
        if pattern.search(message):
            return hint
    return ""


def combine(verdicts: list[Verdict]) -> Verdict:
    """One verdict for an exercise from the verdicts of its checks.

    A check that could not run (not graded) leaves the exercise not graded, unless another of
    its checks failed: then it failed, whatever the other check would have said.
    """
    if not verdicts:
        return Verdict(FAILED, "No check grades this exercise (a course bug: please report it).")
    unknown = [v for v in verdicts if v.status == NOT_GRADED]
    if unknown:
        failed = [v for v in verdicts if v.status == FAILED]
        return failed[0] if failed else unknown[0]
    if all(v.status == PASSED for v in verdicts):
        return Verdict(PASSED, "")
    if all(v.status == NOT_STARTED for v in verdicts):
        return verdicts[0]
    first = next(v for v in verdicts if v.status != PASSED)
    return dataclasses.replace(first, status=FAILED)


def by_parts(results: list[CheckResult]) -> list[Verdict]:
    """The verdicts of one exercise's checks, in the order :func:`combine` reads them, said
    by part when the exercise has a diagnosis and a fix.

    The diagnosis is judged first: while it is wrong, its own verdict is the exercise's. Once
    it is right, the fix's verdict is, said as such ("Diagnosis: right. The fix: ..."), and a
    fix not written yet is no failure to hint at.
    """
    diagnosis = [r.verdict for r in results if r.part == "diagnosis"]
    fix = [r.verdict for r in results if r.part != "diagnosis"]
    if not diagnosis or not fix:
        return [r.verdict for r in results]
    judged, fixed = combine(diagnosis), combine(fix)
    if judged.status != PASSED or fixed.status in (PASSED, NOT_GRADED):
        return diagnosis + fix
    if all(v.status in (PASSED, NOT_STARTED) for v in fix):
        return [Verdict(FAILED, "Diagnosis: right; the fix is not done yet.", hintless=True)]
    return [dataclasses.replace(fixed, message=f"Diagnosis: right. The fix: {fixed.message}")]


def query_cause(error: BaseException) -> str:
    """The line of a failed query's error that names its cause, e.g. the learner's exception.

    A failed query's error carries Spark's and Py4J's wrappers around the Python exception
    raised in the learner's code; the last Python exception line that is not a wrapper is
    the one a learner can act on. For a Spark error the course teaches, what it means here
    and where the course shows it follows in brackets.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    python = [
        line
        for line in lines
        if re.match(r"^[\w.]*(Error|Exception)\b.*:", line)
        and not line.startswith(("py4j", "pyspark.errors", "org.apache"))
    ]
    # Without a Python error in the text, Spark's own innermost cause (a state store's, under
    # STREAM_FAILED and "Exception thrown in awaitResult") is the line to act on.
    cause = (python[-1] if python else str(deepest_cause(error)))[:300]
    explained = explain(error)
    return f"{cause} ({explained})" if explained else cause
