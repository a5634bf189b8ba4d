"""The closing lines of a grading count what was graded, against the whole course."""

from __future__ import annotations

from streamlab.course import registry
from streamlab.grading import report
from streamlab.grading.verdict import PASSED, CheckResult, Verdict

COURSE_TOTAL = sum(len(lab.exercises) for lab in registry.labs())


def _passed(lab: registry.Lab, *ids: str) -> list[CheckResult]:
    return [CheckResult(lab.id, e, "a", Verdict(PASSED, "")) for e in ids]


def test_a_single_exercise_graded_after_a_whole_lab_counts_against_its_own_lab():
    lab02, lab07 = registry.lab("02"), registry.lab("07")
    full = report.grade([lab02], _passed(lab02, *(e.id for e in lab02.exercises)))
    only = report.grade([lab07], _passed(lab07, "7.1"), exercises={"7.1"}, earlier=full)
    progress = only["progress"]
    rows = {row["id"]: (row["passed"], row["total"]) for row in progress["labs"]}
    assert rows == {
        "02": (len(lab02.exercises), len(lab02.exercises)),
        "07": (1, len(lab07.exercises)),
    }
    assert progress["course_passed"] == len(lab02.exercises) + 1
    assert progress["course_total"] == COURSE_TOTAL
    text = " ".join(report.render(only).split())
    assert (
        f"Course progress: {len(lab02.exercises) + 1} of {COURSE_TOTAL} exercises passed "
        f"(lab 02 {len(lab02.exercises)}/{len(lab02.exercises)}*, 07 1/{len(lab07.exercises)})."
    ) in text
    assert f"Next up: exercise 7.2, {lab07.exercise('7.2').title.lower()}." in text
    assert text.endswith("1 passed, 0 failed")


def test_a_lab_graded_alone_ends_with_the_course_tally_and_the_next_exercise():
    lab00, lab01 = registry.lab("00"), registry.lab("01")
    graded = report.grade([lab00], _passed(lab00, *(e.id for e in lab00.exercises)))
    lines = report.render(graded).splitlines()
    n = len(lab00.exercises)
    assert f"Course progress: {n} of {COURSE_TOTAL} exercises passed (lab 00 {n}/{n})." in lines
    first = lab01.exercises[0]
    assert f"Next up: exercise {first.id}, {first.title.lower()} (lab 01)." in lines
    assert graded["progress"]["next"]["id"] == first.id
    assert lines[-1] == f"{n} passed, 0 failed"
