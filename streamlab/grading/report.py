"""The grade: a table per lab for the terminal and ``build/grade.json`` for any front end.

``build/grade.json`` (written atomically: first ``{"status": "in-progress"}``, then the
grade)::

    {"format_version": 2, "status": "graded", "notebooks": "labs", "complete": false,
     "earlier_labs": [...],  # other labs, as an earlier run graded them
     "labs": [{"id": "00", "title": "...", "status": "graded" | "error", "message": "",
               "fingerprint": "...",  # of the graded cells that ran (streamlab.course.notebooks)
               "exercises": [{"id": "0.1", "title": "...", "cell": 5, "cell_line": "def ...",
                              "status": "passed" | "failed" | "not-started" | "not-graded"
                                        | "revealed",
                              "message": "...", "expected": "...", "actual": "...",
                              "diff": "...", "hint": "...", "earlier": false,
                              "revealed": true,  # only when its answer was revealed
                              "first_try": {"answer": "{...}", "right": false,
                                            "part": "prediction" | "diagnosis"}}],
               "earlier_exercises": [{..., "earlier": true, "fingerprint": "..."}]}],
     "first_tries": {"called": 3, "answered": 4},  # from the learner's record
     "progress": {"passed": 1, "failed": 1, "not-started": 1, "not-graded": 0, "total": 3,
                  "course_passed": 4, "course_total": 44,
                  "labs": [{"id": "00", "passed": 1, "total": 3, "earlier": false,
                            "kept": 0, "outdated": 0}],
                  "next": {"lab": "00", "id": "0.2", "title": "...", "status": "failed"}},
     "unsaved": [{"lab": "00", "exercise": "0.3", "message": "... Did you save? ..."}]}

Nothing in it is cut: the sentence, expected, actual and the diff are whole (the table
shortens them). ``hint`` is set only for a failed exercise: the failed check's own hint, else
the exercise's first tier. ``not-graded`` says the checks could not run for a reason that is
not the learner's code (the course's reference notebooks in ``solutions/`` are missing); it is
neither passed nor failed, and has no hint. ``next`` is within the labs of this run.

Every exercise in a lab's ``exercises`` holds for the graded cells of its ``fingerprint``.
With ``--exercise``, the exercises graded now (``"earlier": false``) join the lab's record
from the run before: an exercise that run graded on the same graded cells stays in
``exercises`` (``"earlier": true``); one it graded on other cells (the notebook changed since)
moves to ``earlier_exercises``, kept as it was, with the ``fingerprint`` it was graded on. The
progress counts both (``kept``: how many; ``outdated``: how many were graded on other cells);
the closing tally (``passed``, ``failed``, ...) counts what this run graded.
``revealed``: the learner asked for the exercise's answer (``nox -s reveal``) and its code has
not passed since; not passed, counted as passed by no tally. One that passed after a reveal is
``passed`` with ``"revealed": true``. ``first_try`` and ``first_tries`` come from the learner's
record of tries (:mod:`streamlab.grading.tries`), which every grading adds to and none rewrites.
``format_version`` changes when a field changes meaning or goes away. The file is written
from, and read back as, the records of :mod:`streamlab.grading.grade_file`, which refuse a
file of another shape with a sentence.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from streamlab.course import registry
from streamlab.course.notebooks import cell_name
from streamlab.course.registry import Exercise, Lab
from streamlab.grading import grade_file
from streamlab.grading import tries as first_tries
from streamlab.grading.grade_file import FORMAT_VERSION, Grade
from streamlab.grading.verdict import (
    FAILED,
    NOT_GRADED,
    NOT_STARTED,
    PASSED,
    REVEALED,
    CheckResult,
    Status,
    Verdict,
    by_parts,
    combine,
)


def grade(
    labs: list[Lab],
    results: list[CheckResult],
    *,
    lab_errors: Mapping[str, str] | None = None,
    not_graded: Collection[str] = (),
    cells: Mapping[str, Mapping[str, int]] | None = None,
    first_lines: Mapping[str, Mapping[str, str]] | None = None,
    fingerprints: Mapping[str, str] | None = None,
    exercises: set[str] | None = None,
    notebooks: str = "labs",
    earlier: dict | None = None,
    tries: Mapping[str, dict] | None = None,
) -> dict:
    """The grade in the shape of ``build/grade.json``.

    ``lab_errors`` say why a lab could not be graded: its exercises fail with that sentence,
    or are not graded when the lab is in ``not_graded``. ``exercises`` limits the grade to
    those exercises, the others of their lab kept as ``earlier`` graded them; ``earlier`` is
    a previous grade, whose other labs also count towards the course's progress. ``tries``
    is the learner's record (:mod:`streamlab.grading.tries`): its first tries go with their
    exercises, and a revealed exercise that does not pass is ``revealed``.
    """
    found = _Found(
        _verdicts_by_exercise(results),
        lab_errors or {},
        not_graded,
        cells or {},
        first_lines or {},
        fingerprints or {},
        tries or {},
    )
    if exercises:
        # A lab none of whose exercises is graded now stays as an earlier run graded it.
        labs = [lab for lab in labs if any(e.id in exercises for e in lab.exercises)]
    entries = []
    for lab in labs:
        entry = _lab_entry(lab, found, exercises)
        if exercises:
            _keep_earlier(entry, lab, _earlier_entry(lab.id, notebooks, earlier))
        entries.append(entry)
    graded = {
        "format_version": FORMAT_VERSION,
        "status": "graded",
        "notebooks": notebooks,
        "labs": entries,
        "earlier_labs": _carried(entries, notebooks, earlier),
    }
    if tries is not None:
        graded["first_tries"] = first_tries.called(tries)
    graded["progress"] = _progress(graded, {lab.id: len(lab.exercises) for lab in labs})
    graded["complete"] = all(e["status"] == PASSED for e in _graded_now(graded))
    return graded


@dataclass(frozen=True)
class _Found:
    """What the checks found, as :func:`grade` is given it."""

    verdicts: Mapping[tuple[str, str], list[Verdict]]  # (lab, exercise) -> its checks' verdicts
    lab_errors: Mapping[str, str]
    not_graded: Collection[str]
    cells: Mapping[str, Mapping[str, int]]
    first_lines: Mapping[str, Mapping[str, str]]
    fingerprints: Mapping[str, str]
    tries: Mapping[str, dict]


def _verdicts_by_exercise(results: list[CheckResult]) -> dict[tuple[str, str], list[Verdict]]:
    by_exercise: dict[tuple[str, str], list[CheckResult]] = defaultdict(list)
    for result in results:
        by_exercise[(result.lab, result.exercise)].append(result)
    return {key: by_parts(found) for key, found in by_exercise.items()}


def _lab_entry(lab: Lab, found: _Found, exercises: set[str] | None) -> dict:
    """A lab's record in ``build/grade.json``, with the exercises graded now."""
    error = found.lab_errors.get(lab.id, "")
    rows = [
        _exercise_row(lab, e, found, error)
        for e in lab.exercises
        if not exercises or e.id in exercises
    ]
    return {
        "id": lab.id,
        "title": lab.title,
        "status": "error" if error else "graded",
        "message": error,
        "fingerprint": found.fingerprints.get(lab.id, ""),
        "exercises": rows,
        "earlier_exercises": [],
    }


def _exercise_row(lab: Lab, exercise: Exercise, found: _Found, error: str) -> dict:
    """An exercise's record: its checks' verdicts combined, said where its code is."""
    verdicts = found.verdicts.get((lab.id, exercise.id), [])
    verdict = combine(verdicts)
    if error and (not verdicts or verdict.status != PASSED):
        # A lab that could not be graded says why once, for all its exercises.
        verdict = Verdict(NOT_GRADED if lab.id in found.not_graded else FAILED, error)
    cell = found.cells.get(lab.id, {}).get(exercise.id)
    line = found.first_lines.get(lab.id, {}).get(exercise.id, "")
    if verdict.status == FAILED and cell and "cell" not in verdict.message.lower():
        # Say where the learner's code is, when the sentence does not.
        where = cell_name(exercise.id, line)
        verdict = dataclasses.replace(verdict, message=f"In {where}: {verdict.message}")
    verdict, tried = _as_tried(verdict, found.tries.get(exercise.id, {}))
    return {
        "id": exercise.id,
        "title": exercise.title,
        "cell": cell,
        "cell_line": line,
        **_fields(verdict),
        **tried,
        # A hint only where the learner's own attempt failed (or when asked).
        "hint": (
            (verdict.hint or exercise.hint)
            if verdict.status == FAILED and not verdict.hintless
            else ""
        ),
        "earlier": False,
    }


def _as_tried(verdict: Verdict, tried: Mapping) -> tuple[Verdict, dict]:
    """The verdict as the learner's record changes it (an exercise revealed and not passed
    is ``revealed``), and the fields the record adds to its row."""
    fields: dict = {}
    if tried.get("first_try"):
        fields["first_try"] = dict(tried["first_try"])
    if tried.get("revealed"):
        fields["revealed"] = True
        if verdict.status in (FAILED, NOT_STARTED):
            verdict = dataclasses.replace(verdict, status=REVEALED)
    return verdict, fields


def with_tries(graded: dict, tries: Mapping[str, dict]) -> dict:
    """``graded`` (a grade written earlier) as the learner's record now says: an exercise
    revealed since is ``revealed`` unless it passed, and the first tries go with their rows."""
    graded = json.loads(json.dumps(graded))
    for lab in [*graded.get("labs", []), *graded.get("earlier_labs", [])]:
        for row in [*lab.get("exercises", []), *lab.get("earlier_exercises", [])]:
            tried = tries.get(str(row.get("id")), {})
            if tried.get("revealed") and row.get("status") in (FAILED, NOT_STARTED):
                row["status"], row["hint"] = str(REVEALED), ""
            row.update(_as_tried(Verdict(Status(row.get("status")), ""), tried)[1])
    graded["first_tries"] = first_tries.called(tries)
    graded["progress"] = _progress(graded)
    graded["complete"] = all(e["status"] == PASSED for e in _graded_now(graded))
    return graded


def _graded_now(graded: dict) -> list[dict]:
    """The exercises this run graded (not those kept from an earlier run)."""
    return [e for lab in graded["labs"] for e in lab["exercises"] if not e.get("earlier")]


def _earlier_entry(lab_id: str, notebooks: str, earlier: dict | None) -> dict | None:
    """The lab's entry in an earlier grade of the same notebooks, if it has one."""
    if not earlier or earlier.get("status") != "graded" or earlier.get("notebooks") != notebooks:
        return None
    for entry in [*earlier.get("labs", []), *earlier.get("earlier_labs", [])]:
        if isinstance(entry, dict) and entry.get("id") == lab_id:
            return entry
    return None


def _keep_earlier(entry: dict, lab: Lab, previous: dict | None) -> None:
    """Add to ``entry`` the exercises of ``previous`` (the lab's earlier record) not graded now.

    One graded on the same graded cells as this run holds now as it did then: it joins
    ``exercises``. One graded on other cells (the notebook changed since) is kept as it was
    recorded, in ``earlier_exercises`` with its fingerprint: it is no claim about the code
    the notebook holds now.
    """
    if not previous:
        return
    order = {e.id: n for n, e in enumerate(lab.exercises)}
    now, current = {row["id"] for row in entry["exercises"]}, entry["fingerprint"]
    same: dict[str, dict] = {}
    other: dict[str, dict] = {}
    recorded = [(row, previous.get("fingerprint", "")) for row in previous.get("exercises", [])]
    recorded += [(row, row.get("fingerprint", "")) for row in previous.get("earlier_exercises", [])]
    for row, graded_on in recorded:
        if not isinstance(row, dict):
            continue
        exercise = row.get("id")
        if exercise not in order or exercise in now or exercise in same or exercise in other:
            continue
        if current and graded_on == current:
            same[exercise] = {
                **{k: v for k, v in row.items() if k != "fingerprint"},
                "earlier": True,
            }
        else:
            other[exercise] = {**row, "earlier": True, "fingerprint": graded_on}
    entry["exercises"] = sorted([*entry["exercises"], *same.values()], key=lambda r: order[r["id"]])
    entry["earlier_exercises"] = sorted(other.values(), key=lambda r: order[r["id"]])


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


def _all_exercises(lab: dict) -> list[dict]:
    """A lab's exercises, those graded on other cells included, in the lab's order."""
    rows = [*lab.get("exercises", []), *lab.get("earlier_exercises", [])]
    return sorted(rows, key=lambda row: _order(str(row.get("id", ""))))


def _order(exercise: str) -> tuple:
    try:
        return tuple(int(part) for part in exercise.split("."))
    except ValueError:
        return (float("inf"), exercise)


def _progress(graded: dict, totals: Mapping[str, int] | None = None) -> dict:
    """The course-wide tally: this run's labs, plus the other labs of an earlier run.

    ``totals``: how many exercises each lab graded now has (default: the registry's count).
    """
    totals = totals or {}
    tally = counts(graded)
    labs = [(lab, False) for lab in graded["labs"]]
    labs += [(lab, True) for lab in graded.get("earlier_labs", [])]
    labs.sort(key=lambda pair: pair[0]["id"])
    rows, upcoming = [], None
    for lab, old in labs:
        exercises = _all_exercises(lab)
        rows.append(
            {
                "id": lab["id"],
                "earlier": old,
                "total": totals.get(lab["id"]) or _lab_total(lab["id"], len(exercises)),
                "passed": sum(e.get("status") == PASSED for e in exercises),
                # Exercises this run did not grade, kept from an earlier run of the lab, and
                # how many of those were graded on other cells than the notebook holds now.
                "kept": 0 if old else sum(bool(e.get("earlier")) for e in exercises),
                "outdated": 0 if old else len(lab.get("earlier_exercises", [])),
            }
        )
        if upcoming is None and not old:
            # Within the labs graded now: an earlier run's lab is not what this run is about.
            # An exercise that could not be graded is not one to work on next.
            upcoming = next(
                (
                    {
                        "lab": lab["id"],
                        "id": e.get("id"),
                        "title": e.get("title", ""),
                        "status": e.get("status"),
                    }
                    for e in exercises
                    if e.get("status") not in (PASSED, NOT_GRADED)
                ),
                None,
            )
    return {
        **tally,
        "total": sum(tally.values()),
        "labs": rows,
        "next": upcoming or _next_in_course(graded),
        "course_passed": sum(r["passed"] for r in rows),
        "course_total": _course_total(rows),
    }


def _lab_total(lab_id: str, recorded: int) -> int:
    """How many exercises the lab has: the registry's count, whatever a record holds."""
    try:
        return len(registry.lab(lab_id).exercises)
    except registry.RegistryError:
        return recorded


def _course_total(rows: list[dict]) -> int:
    """How many exercises the course has, labs never graded included."""
    counted = {r["id"]: r["total"] for r in rows}
    rest = sum(len(lab.exercises) for lab in registry.labs() if lab.id not in counted)
    return rest + sum(counted.values())


def _next_in_course(graded: dict) -> dict | None:
    """When no exercise graded now is left to do: the first exercise not passed (nor graded
    yet) from the first lab graded now on, in course order, else in the labs before it."""
    passed = {
        e.get("id")
        for lab in [*graded["labs"], *graded.get("earlier_labs", [])]
        for e in _all_exercises(lab)
        if e.get("status") == PASSED
    }
    graded_now = {lab["id"] for lab in graded["labs"]}
    if not graded_now:
        return None
    first = min(graded_now)
    ordered = [lab for lab in registry.labs() if lab.id >= first]
    ordered += [lab for lab in registry.labs() if lab.id < first]
    for lab in ordered:
        for exercise in lab.exercises:
            if exercise.id not in passed:
                return {
                    "lab": lab.id,
                    "id": exercise.id,
                    "title": exercise.title,
                    "status": NOT_STARTED,
                    "elsewhere": lab.id not in graded_now,
                }
    return None


def counts(graded: dict) -> dict[str, int]:
    """How many exercises this run graded, by status."""
    tally = {str(status): 0 for status in Status}
    for exercise in _graded_now(graded):
        tally[exercise["status"]] += 1
    return tally


def summary(tally: Mapping[str, int]) -> str:
    """``2 passed, 1 failed, 3 not started, 1 not graded``: the closing line."""
    line = f"{tally[PASSED]} passed, {tally[FAILED]} failed"
    if tally[NOT_STARTED]:
        line += f", {tally[NOT_STARTED]} not started"
    if tally.get(NOT_GRADED):
        line += f", {tally[NOT_GRADED]} not graded"
    if tally.get(REVEALED):
        line += f", {tally[REVEALED]} revealed"
    return line


def render(graded: dict, width: int = 88) -> str:
    """The table a learner reads after ``nox -s check``."""
    lines: list[str] = []
    # Never a break inside a path or a command: a learner copies them from here.
    wrap = textwrap.TextWrapper(
        width=width,
        initial_indent=" " * 9,
        subsequent_indent=" " * 9,
        break_on_hyphens=False,
        break_long_words=False,
    )
    for lab in graded["labs"]:
        lines.extend(_lab_lines(lab, wrap, width))
        lines.append("")
    for unsaved in graded.get("unsaved", []):
        lines.extend(textwrap.wrap(f"! {unsaved['message']}", width=width, subsequent_indent="  "))
        lines.append("")
    progress = graded.get("progress") or _progress(graded)
    lines.extend(_course_lines(graded, progress, width))
    lines.extend(_next_lines(progress))
    if lines and lines[-1]:
        lines.append("")
    lines.extend(_first_try_lines(graded))
    lines.append(summary(counts(graded)))
    return "\n".join(lines)


def _lab_lines(lab: dict, wrap: textwrap.TextWrapper, width: int) -> list[str]:
    """A lab's rows of the table: each exercise graded now, with what to read when it did
    not pass."""
    lines = [f"Lab {lab['id']} · {lab['title']}"]
    if lab.get("status") == "error":
        lines.extend(wrap.wrap(f"Not graded: {lab['message']}"))
    first_said: dict[str, str] = {}  # a not-graded sentence -> the exercise it was said for
    for exercise in lab["exercises"]:
        if exercise.get("earlier"):
            continue  # not graded by this run: the course progress counts it
        status = Status(exercise["status"])
        head = f"  {status.symbol} {exercise['id']:<5} {exercise['title']}"
        lines.append(f"{head:<{width - 12}} {_word(status, exercise)}")
        message = exercise["message"]
        if status == FAILED and message != lab.get("message"):
            lines.extend(wrap.wrap(_shortened(message)))
            lines.extend(_compared(exercise))
            if exercise.get("hint"):
                lines.extend(wrap.wrap(f"Hint: {exercise['hint']}"))
        elif status == NOT_GRADED and message and message != lab.get("message"):
            # Not the learner's doing, and never with a hint; said once per lab.
            if message in first_said:
                lines.extend(wrap.wrap(f"For the same reason as {first_said[message]}."))
            else:
                first_said[message] = exercise["id"]
                lines.extend(wrap.wrap(_shortened(message)))
        elif status == REVEALED:
            if message:
                lines.extend(wrap.wrap(_shortened(message)))
            lines.extend(wrap.wrap(_revealed_line(exercise)))
    return lines


def _word(status: Status, exercise: dict) -> str:
    """How the table names an exercise's status: ``passed (revealed)`` for one that passed
    after its answer was revealed."""
    return (
        f"{status.word} (revealed)"
        if status == PASSED and exercise.get("revealed")
        else status.word
    )


def _revealed_line(exercise: dict) -> str:
    """What the table says under a revealed exercise, after what its code does now."""
    return (
        f"Revealed with `nox -s reveal -- {exercise['id']}`: it counts as passed once your "
        "own code passes."
    )


def _first_try_lines(graded: dict) -> list[str]:
    """How many predictions and diagnoses the learner called at the first try."""
    tally = graded.get("first_tries") or {}
    if not tally.get("answered"):
        return []
    return [
        f"Called at the first try: {tally['called']} of {tally['answered']} predictions and "
        "diagnoses answered so far."
    ]


def _course_lines(graded: dict, progress: dict, width: int) -> list[str]:
    """The course's progress by lab, with its footnotes, when more than one lab counts."""
    kept = [r for r in progress["labs"] if r.get("kept")]
    if not progress["labs"]:
        return []
    per_lab = ", ".join(
        f"{r['id']} {r['passed']}/{r['total']}"
        + ("*" if r["earlier"] else "")
        + ("+" if r.get("kept") else "")
        for r in progress["labs"]
    )
    lines = [
        f"Course progress: {progress['course_passed']} of "
        f"{progress['course_total']} exercises passed (lab {per_lab})."
    ]
    if any(r["earlier"] for r in progress["labs"]):
        lines.append("  * from an earlier run of `nox -s check`")
    entries = {lab["id"]: lab for lab in graded["labs"]}
    for r in kept:
        lines.extend(
            textwrap.wrap(
                _kept(r, entries.get(r["id"])),
                width=width,
                initial_indent="  ",
                subsequent_indent="    ",
            )
        )
    return lines


def _next_lines(progress: dict) -> list[str]:
    """The exercise to work on next, or that every exercise graded has passed."""
    upcoming = progress["next"]
    if upcoming:
        status = upcoming["status"]
        state = "" if status == NOT_STARTED else f" ({Status(status).word})"
        if upcoming.get("elsewhere"):
            state = f" (lab {upcoming['lab']})"
        # The next exercise's name only: its hints are for when asked (nox -s hint).
        return [f"Next up: exercise {upcoming['id']}, {upcoming['title'].lower()}{state}."]
    if progress["labs"] and not progress.get(NOT_GRADED):
        return ["Every exercise graded here has passed."]
    if progress.get(PASSED):
        return ["Every other exercise graded here has passed."]
    return []


def _kept(row: dict, lab: dict | None) -> str:
    """The footnote of a lab whose exercises this run did not all grade."""
    kept, outdated = row["kept"], row.get("outdated", 0)
    them = "it" if kept == 1 else "them"
    some = (
        f"{kept} exercise not graded in this run counts"
        if kept == 1
        else (f"{kept} exercises not graded in this run count")
    )
    head = f"+ lab {row['id']}: {some} as an earlier run graded {them}"
    if not outdated:
        return f"{head}, on the same code."
    which = "" if outdated == kept else f" ({outdated} of them)"
    if lab is not None and not lab.get("fingerprint"):
        # This run could not read the graded cells (the lab could not be graded).
        why = "this run could not tell whether the code has changed since"
    else:
        why = "the notebook's graded cells have changed since"
    again = "it" if outdated == 1 else "them"
    return f"{head}; {why}{which}: `nox -s check -- {row['id']}` grades {again} again."


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
    """A grade written earlier, or None when there is none; a file that is not a grade raises
    :class:`~streamlab.grading.grade_file.GradeFileInvalid` with a sentence saying why."""
    grade = grade_file.read(path)
    return None if grade is None else grade.as_json()


def write_json(graded: dict, path: Path) -> None:
    """Replace ``path`` atomically with the grade, checked as records on the way."""
    grade_file.write(Grade.from_json(graded), path)
