"""A lab's code for the labs after it: the course's solution, or the learner's own.

- :func:`load_solution` is a lab's solution notebook's graded cells, loaded the way the grader
  loads them: the one source of the course's reference code (the monitor, the benchmarks and
  the checks use it; there is no second copy).
- :func:`learner_or_reference` is what a later lab runs: the learner's own graded cells of
  an earlier lab when the exercises it needs pass their checks, else the course's solution,
  with a sentence saying which and why.

"Passes its checks" is decided by the grader, never guessed: a grade counts only when it
was recorded for exactly the graded cells the notebook holds now (their fingerprint,
:func:`streamlab.course.notebooks.fingerprint`), in ``build/grade.json`` (``nox -s check``) or in
``build/downstream/``. Without one, the exercises are graded now, by the grader in a process
of its own (a few seconds for checks that need no Spark), and that grade is kept in
``build/downstream/`` for the next time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, fingerprint, is_stub, read_cells
from streamlab.paths import BUILD_DIR, REPO_ROOT

SOLUTIONS_DIR = REPO_ROOT / "solutions"
#: Where ``nox -s check`` writes its grade.
GRADE_FILE = BUILD_DIR / "grade.json"
#: Grades made by :func:`learner_or_reference`, one file per lab, in the grader's format.
DOWNSTREAM_DIR = BUILD_DIR / "downstream"


class SolutionBroken(RuntimeError):
    """A solution notebook's graded cells do not run: a bug in the course."""


def load_solution(lab_id: str) -> ModuleType:
    """Lab ``lab_id``'s graded cells from ``solutions/``, run as the grader runs them.

    Loaded once per process, as module ``streamlab_solution_labNN`` (registered for pickling
    by value, so Spark's Python workers receive its classes). ``"4"`` and ``"04"`` are one lab.
    """
    return _load_solution(registry.lab(lab_id).id)


@cache
def _load_solution(lab_id: str) -> ModuleType:
    from streamlab.grading.loader import load_notebook

    path = registry.lab(lab_id).notebook(SOLUTIONS_DIR)
    loaded = load_notebook(path, module_name=f"streamlab_solution_lab{lab_id}")
    if loaded.problems:
        raise SolutionBroken(
            f"Lab {lab_id}'s solution notebook does not load: {loaded.problems[0].sentence()}"
        )
    return loaded.module


def learner_or_reference(
    lab_id: str,
    *exercise_ids: str,
    notebooks: str | Path | None = None,
    uses: str = "code",
) -> tuple[ModuleType, str]:
    """Lab ``lab_id``'s graded cells: the learner's when ``exercise_ids`` all pass, else the course's.

    ``notebooks`` is the folder of lab notebooks to take the learner's from; by default the
    one the calling notebook sits in (a notebook in ``labs/05-*`` uses ``labs/04-*``).
    ``uses`` names what the caller takes from the module, for the sentence ("your
    LeanHeartbeatProcessor"). Returns the module and a sentence for the notebook to print.
    """
    lab = registry.lab(lab_id)
    wanted = list(exercise_ids) or [e.id for e in lab.exercises]
    for exercise in wanted:
        lab.exercise(exercise)
    folder, caller = _folder(notebooks)
    who = f"Lab {caller.id}" if caller else "This notebook"
    if folder.resolve() == SOLUTIONS_DIR.resolve():
        return load_solution(lab.id), (
            f"{who} runs the course's {uses} from lab {lab.id} (these are the solution notebooks)."
        )
    path = lab.notebook(folder)
    reason = _why_not(lab, path, wanted)
    module = None
    if reason is None:
        module, reason = _load_learner(lab, path, wanted)
    if module is not None:
        return module, f"{who} runs your {uses} from lab {lab.id} ({_passing(wanted)})."
    return load_solution(lab.id), (
        f"{who} runs the course's reference {uses} from lab {lab.id}, because {reason}."
    )


def _folder(notebooks: str | Path | None) -> tuple[Path, registry.Lab | None]:
    """The folder of lab notebooks to use, and the lab of the calling notebook if known."""
    here = Path.cwd()
    session = os.environ.get("JPY_SESSION_NAME", "")
    caller = None
    for lab in registry.labs():
        if lab.name in (here.name, Path(session).stem):
            caller = lab
    if notebooks is not None:
        folder = Path(notebooks)
        return (folder if folder.is_absolute() else REPO_ROOT / folder), caller
    if caller and here.name == caller.name:
        return here.parent, caller
    if caller and session:
        return Path(session).resolve().parent.parent, caller
    return REPO_ROOT / "labs", caller


def _passing(wanted: list[str]) -> str:
    if len(wanted) == 1:
        return f"exercise {wanted[0]} passes its checks"
    return f"exercises {_listed(wanted)} pass their checks"


def _listed(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + f" and {ids[-1]}"


def _why_not(lab: registry.Lab, path: Path, wanted: list[str]) -> str | None:
    """Why the learner's cells cannot be used (None: they pass every exercise wanted)."""
    try:
        cells = read_cells(path)
    except (OSError, ValueError):
        return f"{_shown(path)} cannot be read as a notebook"
    by_exercise = {exercise_id(cell): cell for cell in cells if exercise_id(cell)}
    for exercise in wanted:
        cell = by_exercise.get(exercise)
        if cell is None:
            return f"no cell of {path.name} is tagged exercise-{exercise}"
        if is_stub(cell):
            return f"exercise {exercise} is not done yet"
    current = fingerprint(cells)
    grade = _recorded(lab, path, current, wanted) or _grade_now(lab, path, wanted) or {}
    statuses = {e.get("id"): e for e in grade.get("exercises", [])}
    for exercise in wanted:
        entry = statuses.get(exercise)
        if entry is None:
            return f"exercise {exercise} could not be graded ({_first(grade)})"
        if entry.get("status") == "not-started":
            return f"exercise {exercise} is not done yet"
        if entry.get("status") == "not-graded":
            return f"exercise {exercise} could not be graded ({_first(entry)})"
        if entry.get("status") != "passed":
            return f"exercise {exercise} failed: {_first(entry)}"
    if grade.get("fingerprint") != current:
        return (
            f"{path.name} changed while exercise {_listed(wanted)} was graded; run this cell again"
        )
    return None


def _first(entry: dict) -> str:
    """The first line of a grade's sentence, without the cell it names (the exercise says it)."""
    lines = (entry.get("message") or "no reason given").strip().splitlines()
    first = lines[0].rstrip(".") if lines else "no reason given"
    return re.sub(r"^In the cell tagged exercise-[\d.]+( \(`.*?`\))?: ", "", first)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _recorded(lab: registry.Lab, path: Path, current: str, wanted: list[str]) -> dict | None:
    """A recorded grade of ``wanted`` for exactly these graded cells, if there is one."""
    for grade_file in (GRADE_FILE, DOWNSTREAM_DIR / f"{lab.id}.json"):
        entry = _lab_entry(grade_file, lab, path)
        graded = {e.get("id") for e in (entry or {}).get("exercises", [])}
        if entry and entry.get("fingerprint") == current and graded >= set(wanted):
            return entry
    return None


def _lab_entry(grade_file: Path, lab: registry.Lab, path: Path) -> dict | None:
    try:
        graded = json.loads(grade_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(graded, dict) or graded.get("status") != "graded":
        return None
    folder = Path(str(graded.get("notebooks", "")))
    folder = folder if folder.is_absolute() else REPO_ROOT / folder
    if lab.notebook(folder).resolve() != path.resolve():
        return None
    for entry in [*graded.get("labs", []), *graded.get("earlier_labs", [])]:
        if isinstance(entry, dict) and entry.get("id") == lab.id:
            return entry
    return None


#: How long grading a few of the learner's earlier exercises may take (each check has its own
#: limit; this bounds the grader as a whole).
GRADE_WITHIN = 10 * 60.0


def _grade_now(lab: registry.Lab, path: Path, wanted: list[str]) -> dict | None:
    """Grade ``wanted`` with the grader, in a process of its own; keep the grade."""
    grade_file = DOWNSTREAM_DIR / f"{lab.id}.json"
    grade_file.parent.mkdir(parents=True, exist_ok=True)
    print(f"Grading exercise {_listed(wanted)} of your lab {lab.id} ...", flush=True)
    command = [sys.executable, "-m", "streamlab.grading", lab.id, "--notebooks"]
    command += [str(path.parent.parent), "--json", str(grade_file)]
    command += [arg for exercise in wanted for arg in ("--exercise", exercise)]
    try:
        subprocess.run(
            command,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=GRADE_WITHIN,
        )
    except subprocess.TimeoutExpired:
        return {"message": f"the grader was stopped after {GRADE_WITHIN / 60:g} minutes"}
    return _lab_entry(grade_file, lab, path)


def _load_learner(
    lab: registry.Lab, path: Path, wanted: list[str]
) -> tuple[ModuleType | None, str]:
    from streamlab.grading.loader import NotebookUnreadable, load_notebook

    try:
        loaded = load_notebook(path, module_name=f"streamlab_learner_lab{lab.id}")
    except NotebookUnreadable as error:
        return None, str(error).rstrip(".")
    for exercise in wanted:
        problem = loaded.problem_for(exercise)
        if problem:
            return None, f"exercise {exercise}'s cells do not run here: {problem.sentence()}"
    return loaded.module, ""
