"""An exercise's answer cells, opened once it passes or is revealed.

In a solution notebook, the cells tagged ``answer-N.M`` after exercise N.M's ``%check`` cell
explain or show its answer; in ``labs/`` they are closed (a placeholder, or a call of
:func:`streamlab.grading.answer_cell`). They are read from ``solutions/`` and shown:

- under the verdict of ``%check N.M`` once it passes or is revealed (:func:`as_html`);
- by ``nox -s check``, which writes each one that passed in its grading to
  ``build/answers/N.M.md`` and says so in a line (:func:`write_opened`);
- by ``nox -s reveal -- N.M`` (:mod:`streamlab.grading.reveal`, :func:`as_text`).

A markdown cell is shown as written; a code cell by its recorded output when it has one in
``solutions/`` (a proof cell's), else by a line saying that the cell under the check now runs.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from streamlab.course import registry
from streamlab.course.notebooks import answer_id, read_cells
from streamlab.paths import REPO_ROOT


@dataclass(frozen=True)
class AnswerCell:
    """One answer cell of a solution notebook: markdown, or code with its recorded output."""

    kind: str  # "markdown" or "code"
    source: str
    output: str = ""

    def runs_now(self, exercise: str) -> str:
        """What stands for a code cell without a recorded output."""
        return (
            f"The code cells tagged answer-{exercise} under this exercise's check now run: "
            "run them to see what Spark does."
        )


def answer_cells(exercise: str, root: Path | None = None) -> list[AnswerCell]:
    """Exercise ``exercise``'s answer cells in its lab's solution notebook, in order; none
    when the notebook or the lab is missing."""
    try:
        lab = registry.lab(exercise.partition(".")[0])
        cells = read_cells(lab.notebook((root or REPO_ROOT) / "solutions"))
    except (registry.RegistryError, OSError, ValueError):
        return []
    found = []
    for cell in cells:
        if answer_id(cell) != exercise:
            continue
        if cell.get("cell_type") == "markdown":
            found.append(AnswerCell("markdown", cell["source"]))
        elif cell.get("cell_type") == "code":
            found.append(AnswerCell("code", cell["source"], recorded_output(cell)))
    return found


def recorded_output(cell: dict) -> str:
    """The text a code cell's recorded outputs show: streams, and the plain text of results."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(_joined(output.get("text", "")))
        elif output.get("output_type") in ("execute_result", "display_data"):
            parts.append(_joined(output.get("data", {}).get("text/plain", "")))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
    return "\n".join(p.rstrip("\n") for p in parts if p.strip())


def _joined(text: str | list[str]) -> str:
    return text if isinstance(text, str) else "".join(text)


def _shown_cells(cells: Iterable[AnswerCell]) -> list[AnswerCell]:
    """The cells to show: a code cell without output only once (one line says they run)."""
    shown, said = [], False
    for cell in cells:
        if cell.kind == "code" and not cell.output:
            if said:
                continue
            said = True
        shown.append(cell)
    return shown


def as_text(exercise: str, cells: Iterable[AnswerCell]) -> str:
    """The answer cells as markdown: the text as written, outputs in fenced blocks."""
    parts = []
    for cell in _shown_cells(cells):
        if cell.kind == "markdown":
            parts.append(cell.source.strip())
        elif cell.output:
            parts.append(f"```text\n{cell.output}\n```")
        else:
            parts.append(f"*{cell.runs_now(exercise)}*")
    return "\n\n".join(parts)


def as_html(exercise: str, cells: Iterable[AnswerCell]) -> str:
    """The answer cells as HTML, for ``%check``: markdown rendered, outputs preformatted."""
    import markdown

    parts = []
    for cell in _shown_cells(cells):
        if cell.kind == "markdown":
            parts.append(markdown.markdown(cell.source, extensions=["fenced_code", "tables"]))
        elif cell.output:
            parts.append(f"<pre style='margin:2px 0'>{html.escape(cell.output)}</pre>")
        else:
            parts.append(f"<p><i>{html.escape(cell.runs_now(exercise))}</i></p>")
    return "".join(parts)


def write_opened(graded: dict, folder: Path, root: Path | None = None) -> list[str]:
    """Write the answer cells of every exercise that passed in ``graded`` (this grading, not
    an earlier one's) to ``folder/N.M.md``; one line that says where to read them, or none."""
    pages = []
    for lab in graded.get("labs", []):
        for row in lab.get("exercises", []):
            if row.get("earlier") or row.get("status") != "passed":
                continue
            cells = answer_cells(row["id"], root)
            if not cells:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            page = folder / f"{row['id']}.md"
            title = f"# Exercise {row['id']} · {row.get('title', '')}\n\n"
            page.write_text(title + as_text(row["id"], cells) + "\n", encoding="utf-8")
            pages.append(_shown(page))
    if not pages:
        return []
    return [f"Passed, with its answer explained: {', '.join(pages)}."]


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
