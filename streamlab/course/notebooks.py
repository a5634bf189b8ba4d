"""The course's notebook conventions, on plain cell dicts: which cells are graded, and where.

- A code cell tagged ``exercise-4.2`` holds exercise 4.2; one tagged ``graded-setup`` holds
  what the exercise cells need. The grader runs both, and nothing else.
- In ``solutions/``, the lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` of an
  exercise cell are the answer; in ``labs/`` they are a stub that raises ``NOT_DONE``.
- A proof cell's first comment line is ``# NBVAL_CHECK_OUTPUT``.
- A cell tagged ``answer-4.2`` explains or shows exercise 4.2's answer (it follows the
  exercise's ``%check`` cell). In ``labs/`` a markdown one is a one-line placeholder
  (:data:`ANSWER_PLACEHOLDER`) and a code one holds only :data:`ANSWER_CALL`, which shows and runs
  the solved cell's code once 4.2 has been graded; ``%check 4.2`` shows them once 4.2 passes or is revealed.

The grader, ``%check``, the hint command and the authoring pipeline read these rules from
here. Nothing here imports nbformat (seconds to import): :func:`read_cells` reads a notebook
file as JSON, and every function takes a cell as a plain dict (an nbformat cell is one).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

EXERCISE_TAG = re.compile(r"^exercise-(\d+\.\d+)$")
SETUP_TAG = "graded-setup"
ANSWER_TAG = re.compile(r"^answer-(\d+\.\d+)$")
#: nbval's marker of a cell whose output is compared: the course's proof cells.
PROOF_MARKER = "NBVAL_CHECK_OUTPUT"

#: The message a stub raises; the grader reads "not started" from it.
NOT_DONE = "exercise {id} is not done yet"
NOT_DONE_PATTERN = re.compile(r"^exercise (\d+\.\d+) is not done yet")

#: What a markdown answer cell says in ``labs/`` until its exercise passes: one line.
ANSWER_PLACEHOLDER = (
    "*Exercise {id}'s answer, and why, opens when {id} passes: `%check {id}` shows it under "
    "the verdict. Stuck? `nox -s reveal -- {id}` shows it too, and the grade records {id} as "
    "revealed.*"
)
#: An answer code cell's whole source in ``labs/``: it stops the cell, with a sentence, until
#: its exercise has been graded once, then shows and runs the code of the solved notebook's
#: cell of the same id (:func:`streamlab.grading.answer_cell`).
ANSWER_CALL = 'from streamlab.grading import answer_cell; answer_cell("{id}", "{cell}")'

BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")

Cell = Mapping


class AuthoringError(ValueError):
    """A solution notebook does not follow the conventions above."""


def source(cell: Cell) -> str:
    """A cell's source as one string (a notebook file may store it as a list of lines)."""
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def tags(cell: Cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def exercise_id(cell: Cell) -> str | None:
    """The exercise a cell belongs to, from its ``exercise-N.M`` tag, or None."""
    for tag in tags(cell):
        match = EXERCISE_TAG.match(tag)
        if match:
            return match.group(1)
    return None


def answer_id(cell: Cell) -> str | None:
    """The exercise whose answer a cell explains or shows, from its ``answer-N.M`` tag, or None."""
    for tag in tags(cell):
        match = ANSWER_TAG.match(tag)
        if match:
            return match.group(1)
    return None


def is_graded(cell: Cell) -> bool:
    """True for the cells the grader runs: exercise cells and ``graded-setup`` cells."""
    if cell.get("cell_type") != "code":
        return False
    return exercise_id(cell) is not None or SETUP_TAG in tags(cell)


def is_proof(cell: Cell) -> bool:
    """True for a proof cell: a code cell with a ``# NBVAL_CHECK_OUTPUT`` comment line."""
    if cell.get("cell_type") != "code":
        return False
    return any(
        line.strip().startswith("#") and line.strip().lstrip("#").strip() == PROOF_MARKER
        for line in source(cell).splitlines()
    )


def is_stub(cell: Cell) -> bool:
    """True while an exercise cell still holds the stub that raises "not done yet"."""
    exercise = exercise_id(cell)
    return bool(exercise) and NOT_DONE.format(id=exercise) in source(cell)


def first_line(text: str) -> str:
    """The first line of a cell that says something: not blank, not a lone comment marker."""
    for line in text.splitlines():
        if line.strip() and line.strip() != "#":
            return line.strip()
    return ""


def clipped(line: str, width: int = 60) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def cell_name(exercise: str | None, line: str = "") -> str:
    """A graded cell as a learner finds it in JupyterLab (which shows no cell numbers):
    by its tag and its first line."""
    name = f"the cell tagged exercise-{exercise}" if exercise else "the graded-setup cell"
    return name + (f" (`{clipped(line)}`)" if line else "")


def read_cells(path: str | Path) -> list[dict]:
    """The cells of the notebook at ``path``, sources joined into strings.

    Raises ``OSError`` or ``ValueError`` when the file cannot be read as a notebook.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ValueError("not a notebook: no list of cells")
    cells = []
    for cell in data["cells"]:
        if isinstance(cell, dict):
            cells.append({**cell, "source": source(cell)})
    return cells


def fingerprint(cells: Iterable[Cell]) -> str:
    """A digest of the graded cells' tags and sources, in order: what the grader ran.

    A grade recorded with this digest holds for exactly this code; any change to a graded
    cell (an exercise's or the setup's) gives another digest.
    """
    digest = hashlib.sha256()
    for cell in cells:
        if is_graded(cell):
            for part in (",".join(sorted(tags(cell))), source(cell)):
                digest.update(part.encode())
                digest.update(b"\0")
    return digest.hexdigest()[:16]


def split_regions(text: str, where: str = "cell") -> list[tuple[str, list[str]]]:
    """``text`` as runs of ("code", lines) and ("solution", lines with both markers)."""
    parts: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not BEGIN.match(lines[i]):
            if END.match(lines[i]):
                raise AuthoringError(f"{where}: '# END SOLUTION' without a BEGIN")
            if not parts or parts[-1][0] != "code":
                parts.append(("code", []))
            parts[-1][1].append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if END.match(lines[j])), None)
        if end is None:
            raise AuthoringError(f"{where}: '# BEGIN SOLUTION' is never closed")
        parts.append(("solution", lines[i : end + 1]))
        i = end + 1
    return parts


def solution_regions(text: str, where: str = "cell") -> list[str]:
    """The code between each ``# BEGIN SOLUTION`` and ``# END SOLUTION`` of ``text``."""
    return [
        "\n".join(lines[1:-1]) for kind, lines in split_regions(text, where) if kind == "solution"
    ]


def solution_lines(text: str, where: str = "cell") -> list[tuple[int, int]]:
    """The 1-based line spans (first, last) of the code inside each solution region."""
    spans, line = [], 1
    for kind, lines in split_regions(text, where):
        if kind == "solution" and len(lines) > 2:
            spans.append((line + 1, line + len(lines) - 2))
        line += len(lines)
    return spans


def without_markers(text: str) -> str:
    """The solved code as a reader should see it: the region markers removed."""
    return "\n".join(
        line for line in text.splitlines() if not (BEGIN.match(line) or END.match(line))
    )
