"""The grade: a table per lab for the terminal and ``build/grade.json`` for any front end.

``build/grade.json`` (written atomically: first ``{"status": "in-progress"}``, then the
grade)::

    {"format_version": 1, "status": "graded", "notebooks": "labs", "complete": false,
     "earlier_labs": [...],  # other labs, as an earlier run graded them
     "labs": [{"id": "00", "title": "...", "status": "graded" | "error", "message": "",
               "fingerprint": "...",  # of the graded cells that ran (streamlab.notebooks)
               "exercises": [{"id": "0.1", "title": "...", "cell": 5, "cell_line": "def ...",
                              "status": "passed" | "failed" | "not-started",
                              "message": "...", "expected": "...", "actual": "...",
                              "diff": "...", "hint": "..."}]}],
     "progress": {"passed": 1, "failed": 1, "not-started": 1, "total": 3,
                  "course_passed": 4, "course_total": 44,
                  "labs": [{"id": "00", "passed": 1, "total": 3, "earlier": false}],
                  "next": {"lab": "00", "id": "0.2", "title": "...", "status": "failed"}},
     "unsaved": [{"lab": "00", "exercise": "0.3", "message": "... Did you save? ..."}]}

Nothing in it is cut: the sentence, expected, actual and the diff are whole (the table
shortens them). ``hint`` is set only for a failed exercise: the failed check's own hint, else
the exercise's first tier. ``next`` is within the labs of this run. With ``--exercise``, a lab
lists only the exercises graded. ``format_version`` changes when a field changes meaning or
goes away.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from streamlab.grading.verdict import (
    FAILED,
    NOT_STARTED,
    PASSED,
    CheckResult,
    Status,
    Verdict,
    combine,
)
from streamlab.notebooks import cell_name
from streamlab.paths import write_atomically
from streamlab.registry import Lab

#: The version of the format of ``build/grade.json``.
FORMAT_VERSION = 1


def grade(
    labs: list[Lab],
    results: list[CheckResult],
    *,
    lab_errors: Mapping[str, str] | None = None,
    cells: Mapping[str, Mapping[str, int]] | None = None,
    first_lines: Mapping[str, Mapping[str, str]] | None = None,
    fingerprints: Mapping[str, str] | None = None,
    exercises: set[str] | None = None,
    notebooks: str = "labs",
    earlier: dict | None = None,
) -> dict:
    """The grade in the shape of ``build/grade.json``.

    ``exercises`` limits the grade to those exercises (the others are left out);
    ``earlier`` is a previous grade whose other labs count towards the course's progress.
    """
    lab_errors, cells = lab_errors or {}, cells or {}
    by_exercise: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for result in results:
        by_exercise[(result.lab, result.exercise)].append(result.verdict)
    entries = []
    for lab in labs:
        error = lab_errors.get(lab.id, "")
        rows = []
        for e in lab.exercises:
            if exercises and e.id not in exercises:
                continue
            verdicts = by_exercise[(lab.id, e.id)]
            verdict = combine(verdicts)
            if error and (not verdicts or verdict.status != PASSED):
                # A lab that could not be graded says why once, for all its exercises.
                verdict = Verdict(FAILED, error)
            cell = cells.get(lab.id, {}).get(e.id)
            line = (first_lines or {}).get(lab.id, {}).get(e.id, "")
            if verdict.status == FAILED and cell and "cell" not in verdict.message.lower():
                # Say where the learner's code is, when the sentence does not.
                where = cell_name(e.id, line)
                verdict = dataclasses.replace(verdict, message=f"In {where}: {verdict.message}")
            rows.append(
                {
                    "id": e.id,
                    "title": e.title,
                    "cell": cell,
                    "cell_line": line,
                    **_fields(verdict),
                    # A hint only where the learner's own attempt failed (or when asked).
                    "hint": (verdict.hint or e.hint) if verdict.status == FAILED else "",
                }
            )
        entries.append(
            {
                "id": lab.id,
                "title": lab.title,
                "status": "error" if error else "graded",
                "message": error,
                "fingerprint": (fingerprints or {}).get(lab.id, ""),
                "exercises": rows,
            }
        )
    graded = {
        "format_version": FORMAT_VERSION,
        "status": "graded",
        "notebooks": notebooks,
        "labs": entries,
        "earlier_labs": _carried(entries, notebooks, earlier),
    }
    graded["progress"] = _progress(graded)
    graded["complete"] = all(e["status"] == PASSED for lab in entries for e in lab["exercises"])
    return graded


def _fields(verdict: Verdict) -> dict:
    return {
        "status": verdict.status,
        "message": verdict.message,
        "expected": verdict.expected,
        "actual": verdict.actual,
        "diff": verdict.diff,
    }


def _carried(entries: list[dict], notebooks: str, earlier: dict | None) -> list[dict]:
    """The labs of an earlier grade of the same notebooks that this run did not grade."""
    if not earlier or earlier.get("status") != "graded" or earlier.get("notebooks") != notebooks:
        return []
    this_run = {lab["id"] for lab in entries}
    carried: dict[str, dict] = {}
    for lab in [*earlier.get("labs", []), *earlier.get("earlier_labs", [])]:
        if isinstance(lab, dict) and lab.get("id") not in this_run:
            carried.setdefault(lab["id"], lab)
    return [carried[key] for key in sorted(carried)]


def _progress(graded: dict) -> dict:
    """The course-wide tally: this run's labs, plus the other labs of an earlier run."""
    tally = counts(graded)
    labs = [(lab, False) for lab in graded["labs"]]
    labs += [(lab, True) for lab in graded.get("earlier_labs", [])]
    labs.sort(key=lambda pair: pair[0]["id"])
    rows, upcoming = [], None
    for lab, old in labs:
        exercises = lab.get("exercises", [])
        rows.append(
            {
                "id": lab["id"],
                "earlier": old,
                "total": len(exercises),
                "passed": sum(e.get("status") == PASSED for e in exercises),
            }
        )
        if upcoming is None and not old:
            # Within the labs graded now: an earlier run's lab is not what this run is about.
            upcoming = next(
                (
                    {
                        "lab": lab["id"],
                        "id": e.get("id"),
                        "title": e.get("title", ""),
                        "status": e.get("status"),
                    }
                    for e in exercises
                    if e.get("status") != PASSED
                ),
                None,
            )
    return {
        **tally,
        "total": sum(tally.values()),
        "labs": rows,
        "next": upcoming,
        "course_passed": sum(r["passed"] for r in rows),
        "course_total": sum(r["total"] for r in rows),
    }


def counts(graded: dict) -> dict[str, int]:
    tally = {str(status): 0 for status in Status}
    for lab in graded["labs"]:
        for exercise in lab["exercises"]:
            tally[exercise["status"]] += 1
    return tally


def summary(tally: Mapping[str, int]) -> str:
    """``2 passed, 1 failed, 3 not started``: the closing line."""
    line = f"{tally[PASSED]} passed, {tally[FAILED]} failed"
    if tally[NOT_STARTED]:
        line += f", {tally[NOT_STARTED]} not started"
    return line


def render(graded: dict, width: int = 88) -> str:
    """The table a learner reads after ``nox -s check``."""
    lines: list[str] = []
    wrap = textwrap.TextWrapper(width=width, initial_indent=" " * 9, subsequent_indent=" " * 9)
    for lab in graded["labs"]:
        lines.append(f"Lab {lab['id']} · {lab['title']}")
        if lab.get("status") == "error":
            lines.extend(wrap.wrap(f"Not graded: {lab['message']}"))
        for exercise in lab["exercises"]:
            status = Status(exercise["status"])
            head = f"  {status.symbol} {exercise['id']:<5} {exercise['title']}"
            lines.append(f"{head:<{width - 12}} {status.word}")
            if status == FAILED and exercise["message"] != lab.get("message"):
                lines.extend(wrap.wrap(_shortened(exercise["message"])))
                lines.extend(_compared(exercise))
                if exercise.get("hint"):
                    lines.extend(wrap.wrap(f"Hint: {exercise['hint']}"))
        lines.append("")
    for unsaved in graded.get("unsaved", []):
        lines.extend(textwrap.wrap(f"! {unsaved['message']}", width=width, subsequent_indent="  "))
        lines.append("")
    progress = graded.get("progress") or _progress(graded)
    if len(progress["labs"]) > 1:
        per_lab = ", ".join(
            f"{r['id']} {r['passed']}/{r['total']}" + ("*" if r["earlier"] else "")
            for r in progress["labs"]
        )
        lines.append(
            f"Course progress: {progress['course_passed']} of "
            f"{progress['course_total']} exercises passed (lab {per_lab})."
        )
        if any(r["earlier"] for r in progress["labs"]):
            lines.append("  * from an earlier run of `nox -s check`")
    upcoming = progress["next"]
    if upcoming:
        status = upcoming["status"]
        state = "" if status == NOT_STARTED else f" ({Status(status).word})"
        # The next exercise's name only: its hints are for when asked (nox -s hint).
        lines.append(f"Next up: exercise {upcoming['id']}, {upcoming['title'].lower()}{state}.")
    elif progress["labs"]:
        lines.append("Every exercise graded here has passed.")
    lines.append("")
    lines.append(summary(counts(graded)))
    return "\n".join(lines)


#: Lines of expected or actual output shown in the terminal; grade.json keeps them all.
SHOWN_LINES = 12
#: Characters of a failed check's sentence shown in the terminal; grade.json keeps them all.
SHOWN_CHARACTERS = 600


def _shortened(message: str) -> str:
    if len(message) <= SHOWN_CHARACTERS:
        return message
    cut = message[:SHOWN_CHARACTERS].rsplit(" ", 1)[0]
    return f"{cut} ... (the whole message is in build/grade.json)"


def _compared(exercise: dict) -> list[str]:
    """Expected against actual (or their diff), indented, cut to ``SHOWN_LINES`` lines each."""
    lines: list[str] = []
    diff = exercise.get("diff") or ""
    if diff:
        body = diff.splitlines()
        lines.append(f"{' ' * 9}expected against your code:")
        lines.extend(f"{' ' * 11}{line}" for line in body[: 2 * SHOWN_LINES])
        if len(body) > 2 * SHOWN_LINES:
            lines.append(
                f"{' ' * 11}... {len(body) - 2 * SHOWN_LINES} more lines in build/grade.json"
            )
        return lines
    for label, key in (("expected", "expected"), ("your code", "actual")):
        text = exercise.get(key) or ""
        if not text:
            continue
        body = text.splitlines() or [""]
        lines.append(f"{' ' * 9}{label}:")
        lines.extend(f"{' ' * 11}{line}" for line in body[:SHOWN_LINES])
        if len(body) > SHOWN_LINES:
            lines.append(f"{' ' * 11}... {len(body) - SHOWN_LINES} more lines in build/grade.json")
    return lines


def read_json(path: Path) -> dict | None:
    """A grade written earlier, or None when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(graded: dict, path: Path) -> None:
    """Replace ``path`` atomically: a reader sees the old file or the new one, never half."""
    write_atomically(
        path, lambda out: out.write(json.dumps(graded, indent=2, ensure_ascii=False) + "\n")
    )
