"""The grade: a table per lab for the terminal and ``build/grade.json`` for any front end."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path

from streamlab.grading.plugin import CheckResult
from streamlab.grading.verdict import FAILED, NOT_STARTED, PASSED, Verdict, combine
from streamlab.registry import Lab

_SYMBOL = {PASSED: "✓", FAILED: "✗", NOT_STARTED: "○"}
_WORD = {PASSED: "passed", FAILED: "failed", NOT_STARTED: "not started"}


def grade(labs: list[Lab], results: list[CheckResult]) -> dict:
    """The grade in the shape of ``build/grade.json``."""
    by_exercise: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for result in results:
        by_exercise[(result.lab, result.exercise)].append(result.verdict)
    return {"labs": [
        {"id": lab.id, "title": lab.title, "exercises": [
            {"id": e.id, "title": e.title, **_fields(combine(by_exercise[(lab.id, e.id)])),
             "hint": e.hint}
            for e in lab.exercises
        ]}
        for lab in labs
    ]}


def _fields(verdict: Verdict) -> dict:
    return {"status": verdict.status, "message": verdict.message}


def counts(graded: dict) -> dict[str, int]:
    tally = {PASSED: 0, FAILED: 0, NOT_STARTED: 0}
    for lab in graded["labs"]:
        for exercise in lab["exercises"]:
            tally[exercise["status"]] += 1
    return tally


def render(graded: dict, width: int = 88) -> str:
    """The table a learner reads after ``nox -s check``."""
    lines: list[str] = []
    wrap = textwrap.TextWrapper(width=width, initial_indent=" " * 9, subsequent_indent=" " * 9)
    for lab in graded["labs"]:
        lines.append(f"Lab {lab['id']} · {lab['title']}")
        for exercise in lab["exercises"]:
            status = exercise["status"]
            head = f"  {_SYMBOL[status]} {exercise['id']:<5} {exercise['title']}"
            lines.append(f"{head:<{width - 12}} {_WORD[status]}")
            if status == FAILED:
                lines.extend(wrap.wrap(exercise["message"]))
                lines.extend(wrap.wrap(f"Hint: {exercise['hint']}"))
        lines.append("")
    upcoming = next((e for lab in graded["labs"] for e in lab["exercises"]
                     if e["status"] == NOT_STARTED), None)
    if upcoming:
        lines.append(f"Next up: exercise {upcoming['id']}, {upcoming['title'].lower()}.")
        lines.extend(textwrap.wrap(f"Hint: {upcoming['hint']}", width=width))
        lines.append("")
    tally = counts(graded)
    failed = tally[FAILED] + tally[NOT_STARTED]
    summary = f"{tally[PASSED]} passed, {failed} failed"
    if tally[NOT_STARTED]:
        summary += f" ({tally[NOT_STARTED]} of them not started)"
    lines.append(summary)
    return "\n".join(lines)


def write_json(graded: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(graded, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
