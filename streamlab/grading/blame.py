"""A check that fails because of an earlier exercise's code says so, and names that exercise.

A later exercise's code often calls an earlier one's (7.8's ``samples_writer`` hands 7.7's
``once_per_batch`` to ``foreachBatch``). When the earlier function is broken, the later check
fails with an error the later exercise did not cause, often one that Spark raises in the JVM
after the Python function has returned (a state store whose commit the earlier function
skipped): no Python frame of the earlier cell is in the traceback to point at it.

So the grader goes by what calls what, which the loader knows before any check runs: the
names each exercise's cell reads that another exercise's cell defines
(:func:`streamlab.grading.calls.uses`). A check
that failed by an error (not by a wrong result: an error the check's code raised, whose
deepest cause is in ``Verdict.cause``) is blamed on an earlier exercise whose code it uses when
that exercise fails its own checks in the same grading (:func:`blamed`). When the earlier
exercise is not graded in the run (``%check 7.8`` alone), the grader grades it as well, apart,
only to know (:func:`unchecked`); its verdicts are not shown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from streamlab.grading.calls import Uses
from streamlab.grading.verdict import FAILED, CheckResult


def _failed_by_error(result: CheckResult) -> bool:
    return result.verdict.status == FAILED and bool(result.verdict.cause)


def _failing(results: Sequence[CheckResult]) -> set[tuple[str, str]]:
    """(unit, exercise) with a check that failed."""
    return {(r.unit, r.exercise) for r in results if r.verdict.status == FAILED}


def unchecked(
    results: Sequence[CheckResult], used: Mapping[str, Uses], graded: Iterable[str]
) -> list[str]:
    """Earlier exercises whose code a check that failed by an error uses, and that this run
    did not grade (``graded``): grading them tells whether they are the cause."""
    done = set(graded)
    wanted: list[str] = []
    for result in results:
        if not _failed_by_error(result):
            continue
        for earlier in used.get(result.unit, {}).get(result.exercise, {}):
            if earlier not in done and earlier not in wanted:
                wanted.append(earlier)
    return wanted


def blamed(
    results: Sequence[CheckResult],
    used: Mapping[str, Uses],
    evidence: Sequence[CheckResult] = (),
) -> list[CheckResult]:
    """``results``, with a check that failed by an error because an earlier exercise's code
    is broken said so: that exercise named, the deepest cause's error class, no hint.

    ``evidence`` holds verdicts of earlier exercises graded only to know (see
    :func:`unchecked`).
    """
    failing = _failing([*results, *evidence])
    out = []
    for result in results:
        culprit = _culprit(result, used, failing) if _failed_by_error(result) else None
        if culprit is None:
            out.append(result)
            continue
        earlier, names = culprit
        verdict = dataclasses.replace(
            result.verdict,
            message=sentence(result.exercise, earlier, names, result.verdict.cause),
            expected="",
            actual="",
            diff="",
            hint="",
            hintless=True,
        )
        out.append(dataclasses.replace(result, verdict=verdict))
    return out


def _culprit(
    result: CheckResult, used: Mapping[str, Uses], failing: set[tuple[str, str]]
) -> tuple[str, list[str]] | None:
    for earlier, names in used.get(result.unit, {}).get(result.exercise, {}).items():
        if (result.unit, earlier) in failing:
            return earlier, names
    return None


def sentence(exercise: str, earlier: str, names: Sequence[str], cause: str) -> str:
    """What the learner reads about a check that failed because of ``earlier``'s code."""
    code = ", ".join(f"`{name}`" for name in names)
    return (
        f"This check of exercise {exercise} runs your {code} from exercise {earlier}, which "
        f"fails its own checks, and it failed with {cause}. Fix exercise {earlier} first "
        f"(`%check {earlier}`), then grade {exercise} again: your code for {exercise} is not "
        "judged by this failure."
    )
