"""Generate the learner's notebooks in ``labs/`` from the solved ones in ``solutions/``.

A solution notebook marks its exercises in two ways:

- a code cell tagged ``exercise-4.2`` holds exercise 4.2 (tags are in the cell's metadata;
  JupyterLab shows them under the property inspector). A cell tagged ``graded-setup`` holds
  imports or constants that the exercise cells need; the grader runs it too.
- inside an exercise cell, the lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are
  the answer. In ``labs/`` they become a TODO comment naming the exercise, a pointer to
  ``nox -s hint`` and ``raise NotImplementedError("exercise 4.2 is not done yet")`` at the
  same indentation. The stub never carries a hint: hints are shown on demand.

A cell tagged ``answer-4.2`` (after 4.2's ``%check`` cell) explains or shows 4.2's answer. In
``labs/`` a markdown one becomes a one-line placeholder that says where the text opens (its tag
kept; a run of consecutive answer cells of one exercise shares one placeholder), and a code one
keeps its code behind a guard line that stops it, with a sentence, until 4.2 has been graded
once. ``%check 4.2`` shows them under the verdict once 4.2 passes or is revealed.

A **proof cell** shows a claim about Spark: its first comment line is ``# NBVAL_CHECK_OUTPUT``
and ``solutions/`` keeps its recorded output, which the test session (nbval) compares with a
fresh run, so a Spark upgrade that changes the behaviour fails CI. ``labs/`` never carries
outputs: a learner who is asked to predict sees Spark's answer only when they run the cell.

Run ``python -m streamlab.tooling.authoring`` (``nox -s author``) after editing a solution: it strips
outputs (but proof cells') from ``solutions/`` and rewrites ``labs/``. ``--record 02`` runs
lab 02's solution notebook and records its proof cells' outputs. ``--check`` changes nothing
and exits 1 when a notebook is stale, carries outputs, or has a proof cell with none.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat

from streamlab.course.notebooks import (
    ANSWER_CALL,
    ANSWER_PLACEHOLDER,
    BEGIN,
    NOT_DONE,
    SETUP_TAG,
    AuthoringError,
    answer_id,
    exercise_id,
    is_proof,
    split_regions,
    tags,
)
from streamlab.course.registry import Lab, labs
from streamlab.course.registry import lab as registry_lab
from streamlab.paths import REPO_ROOT

SOLUTIONS_DIR = REPO_ROOT / "solutions"
LABS_DIR = REPO_ROOT / "labs"

# Cell metadata that records a run, not the lesson.
_VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


def strip_outputs(
    notebook: nbformat.NotebookNode, *, keep_proofs: bool = False
) -> nbformat.NotebookNode:
    """A copy without outputs, execution counts or widget state.

    With ``keep_proofs``, proof cells keep their outputs. Their execution count is always 1:
    nbval skips a cell with outputs and no count ("unrun"), and a real count would change
    with every cell added above it.
    """
    clean = copy.deepcopy(notebook)
    clean.metadata.pop("widgets", None)
    for cell in clean.cells:
        for key in _VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.execution_count = None
            if keep_proofs and is_proof(cell) and cell.outputs:
                cell.execution_count = 1
                for output in cell.outputs:
                    if "execution_count" in output:
                        output.execution_count = 1
            else:
                cell.outputs = []
    return clean


def unrecorded_proofs(notebook: nbformat.NotebookNode) -> list[int]:
    """The 1-based positions of proof cells that have no recorded output."""
    return [n for n, cell in enumerate(notebook.cells, 1) if is_proof(cell) and not cell.outputs]


def stub_source(source: str, exercise: str, title: str, where: str) -> str:
    """Replace every solution region in ``source`` by a stub that raises "not done yet":
    a TODO comment with the exercise's title, where to ask for a hint, and the raise."""
    out: list[str] = []
    regions = 0
    for kind, text in split_regions(source, where):
        if kind == "code":
            out.extend(text)
            continue
        indent = BEGIN.match(text[0]).group("indent")
        out.append(f"{indent}# TODO: exercise {exercise}, {title[0].lower()}{title[1:]}.")
        out.append(
            f"{indent}# Stuck? `nox -s hint -- {exercise}` shows a hint, one more each time."
        )
        out.append(f'{indent}raise NotImplementedError("{NOT_DONE.format(id=exercise)}")')
        regions += 1
    if regions == 0:
        raise AuthoringError(f"{where}: exercise cell {exercise} has no '# BEGIN SOLUTION'")
    return "\n".join(out)


def make_lab_notebook(solution: nbformat.NotebookNode, lab: Lab) -> nbformat.NotebookNode:
    """The learner's notebook for ``lab``, built from its solution notebook."""
    notebook = strip_outputs(solution)
    found: set[str] = set()
    for index, cell in enumerate(notebook.cells):
        exercise = exercise_id(cell)
        if exercise is None:
            continue
        where = f"{lab.name} cell {index + 1}"
        if cell.cell_type != "code":
            raise AuthoringError(f"{where}: only code cells can be exercise cells")
        spec = lab.exercise(exercise)
        cell.source = stub_source(cell.source, exercise, spec.title, where)
        found.add(exercise)
    missing = [e.id for e in lab.exercises if e.id not in found]
    if missing:
        raise AuthoringError(
            f"{lab.name}: course.toml lists exercise(s) {', '.join(missing)} "
            "but no cell is tagged for them"
        )
    notebook.cells = closed_answers(notebook.cells, lab)
    return notebook


def closed_answers(cells: list, lab: Lab) -> list:
    """``cells`` with every answer cell closed: a run of consecutive answer cells of one
    exercise keeps its code cells, each reduced to the call that runs it once the exercise
    was graded, and its first markdown cell, as the placeholder; its other markdown cells go."""
    closed: list = []
    run: str | None = None  # the exercise of the run of answer cells the last cell was in
    placed = False  # whether that run has its placeholder
    for index, cell in enumerate(cells):
        exercise = answer_id(cell)
        if exercise is None:
            run = None
            closed.append(cell)
            continue
        where = f"{lab.name} cell {index + 1}"
        if exercise not in {e.id for e in lab.exercises}:
            raise AuthoringError(
                f"{where}: tagged answer-{exercise}, but lab {lab.id} has no exercise {exercise}"
            )
        if exercise_id(cell) or SETUP_TAG in tags(cell):
            raise AuthoringError(f"{where}: a graded cell cannot be an answer cell too")
        if exercise != run:
            run, placed = exercise, False
        if cell.cell_type == "code":
            cell.source = ANSWER_CALL.format(id=exercise, cell=cell.get("id", ""))
            closed.append(cell)
        elif not placed:
            cell.source = ANSWER_PLACEHOLDER.format(id=exercise)
            cell.pop("attachments", None)
            closed.append(cell)
            placed = True
    return closed


def _text(notebook: nbformat.NotebookNode) -> str:
    return nbformat.writes(notebook) + "\n"


def sync(check: bool, root: Path = REPO_ROOT) -> list[str]:
    """Bring ``labs/`` up to date with ``solutions/``; return what was (or would be) changed."""
    problems: list[str] = []
    for lab in labs():
        source_path = lab.notebook(root / "solutions")
        if not source_path.exists():
            raise AuthoringError(
                f"course.toml lists lab {lab.id}, but "
                f"{source_path.relative_to(root)} does not exist"
            )
        solution = nbformat.read(source_path, as_version=4)
        clean = _text(strip_outputs(solution, keep_proofs=True))
        if source_path.read_text(encoding="utf-8") != clean:
            problems.append(f"{source_path.relative_to(root)} has outputs or run metadata")
            if not check:
                source_path.write_text(clean, encoding="utf-8")
        target = lab.notebook(root / "labs")
        generated = _text(make_lab_notebook(solution, lab))
        if not target.exists() or target.read_text(encoding="utf-8") != generated:
            problems.append(f"{target.relative_to(root)} is stale")
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(generated, encoding="utf-8")
    return problems


def record(path: Path, *, echo=print) -> int:
    """Run the notebook at ``path`` top to bottom and keep its proof cells' outputs.

    Every other output is dropped, as :func:`sync` would. Returns the number of proof cells.
    """
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    done = 0

    def executed(cell, cell_index, execute_reply) -> None:
        nonlocal done
        done += 1
        if done % 5 == 0 or done == len(code):
            echo(f"  {path.name}: {done} of {len(code)} code cells run")

    client = NotebookClient(
        notebook,
        timeout=1200,
        kernel_name=notebook.metadata.get("kernelspec", {}).get("name", "python3"),
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=executed,
    )
    client.execute()
    path.write_text(_text(strip_outputs(notebook, keep_proofs=True)), encoding="utf-8")
    return sum(is_proof(cell) for cell in notebook.cells)


def unrecorded(root: Path = REPO_ROOT) -> list[str]:
    """A sentence per solution notebook that has proof cells without a recorded output."""
    found = []
    for lab in labs():
        path = lab.notebook(root / "solutions")
        cells = unrecorded_proofs(nbformat.read(path, as_version=4))
        if cells:
            found.append(
                f"{path.relative_to(root)}: proof cell(s) {', '.join(map(str, cells))} have no "
                f"recorded output; run `nox -s author -- --record {lab.id}`"
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.tooling.authoring",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if labs/ is stale or solutions/ has outputs",
    )
    parser.add_argument(
        "--record",
        nargs="+",
        metavar="LAB",
        help="run these labs' solution notebooks and record their proof cells' outputs",
    )
    args = parser.parse_args(argv)
    try:
        for lab_id in args.record or []:
            lab = registry_lab(lab_id)
            print(f"recording lab {lab.id}'s proof cells (runs the whole notebook)...")
            proofs = record(lab.notebook(SOLUTIONS_DIR))
            print(f"lab {lab.id}: {proofs} proof cell(s) recorded")
        problems = sync(check=args.check)
    except AuthoringError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    missing = unrecorded()
    if args.check and problems:
        for problem in problems:
            print(f"  {problem}")
        print("Run `nox -s author` to regenerate labs/ from solutions/.")
    else:
        for problem in problems:
            print(f"updated: {problem}")
        print("labs/ is up to date with solutions/.")
    for problem in missing:
        print(f"  {problem}")
    return 1 if missing or (args.check and problems) else 0


if __name__ == "__main__":
    sys.exit(main())
