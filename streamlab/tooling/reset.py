"""``nox -s reset -- 4.2`` (or ``-- 04``): put an exercise's stub (or a whole lab) back.

The learner's notebook is copied first, whole, beside itself
(``04-transform-with-state.before-reset-4.2-20261124-101500.ipynb``), and the command says
where: nothing is ever lost. Only the exercise's cell changes (its source becomes the stub
again, its outputs go); resetting a lab writes the notebook as shipped. A notebook that a
running JupyterLab has open is refused: JupyterLab would write its own copy back over the
reset on its next save.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from datetime import datetime
from pathlib import Path

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id
from streamlab.paths import REPO_ROOT, write_atomically


class ResetRefused(Exception):
    """Nothing was changed; the message says why and what to do."""


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT.resolve()))
    except ValueError:
        return str(path)


def _targets(word: str) -> tuple[registry.Lab, str | None]:
    if "." in word:
        lab = registry.lab(word.partition(".")[0])
        return lab, lab.exercise(word).id
    return registry.lab(word), None


def _shipped(lab: registry.Lab):
    """The lab's notebook as the course ships it, generated from its solution."""
    import nbformat

    from streamlab.tooling.authoring import SOLUTIONS_DIR, make_lab_notebook

    return make_lab_notebook(nbformat.read(lab.notebook(SOLUTIONS_DIR), as_version=4), lab)


def _refuse_if_open(path: Path) -> None:
    from streamlab.grading.unsaved import open_notebooks

    if path.resolve() in open_notebooks():
        raise ResetRefused(
            f"{_shown(path)} is open in JupyterLab, which would save its copy over the reset: "
            "close it first (File > Close and Shut Down Notebook, after saving), then run this "
            "again. Nothing was changed."
        )


def _keep(path: Path, what: str) -> Path:
    """Copy the learner's notebook beside itself before anything changes it."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    kept = path.with_name(f"{path.stem}.before-reset-{what}-{stamp}{path.suffix}")
    n = 2
    while kept.exists():
        kept = path.with_name(f"{path.stem}.before-reset-{what}-{stamp}-{n}{path.suffix}")
        n += 1
    shutil.copy2(path, kept)
    return kept


def _write(notebook, path: Path) -> None:
    """Replace ``path`` atomically: never half a notebook."""
    import nbformat

    write_atomically(path, lambda out: nbformat.write(notebook, out))


def reset(word: str, notebooks: Path) -> str:
    """Reset the exercise or lab named by ``word`` in ``notebooks``; a sentence saying what."""
    import nbformat

    lab, exercise = _targets(word)
    path = lab.notebook(notebooks)
    shipped = _shipped(lab)
    if not path.exists():
        if exercise:
            raise ResetRefused(
                f"There is no {_shown(path)}: `nox -s reset -- {lab.id}` puts the lab back."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(shipped, path)
        return f"Lab {lab.id} is back as shipped in {_shown(path)}."
    _refuse_if_open(path)
    if exercise is None:
        if path.read_text(encoding="utf-8") == nbformat.writes(shipped) + "\n":
            return f"{_shown(path)} is already as shipped: nothing to reset."
        kept = _keep(path, lab.id)
        _write(shipped, path)
        return (
            f"Lab {lab.id} is back as shipped in {_shown(path)}. Your version is kept in "
            f"{_shown(kept)}: open it in JupyterLab to copy from it."
        )
    try:
        mine = nbformat.read(path, as_version=4)
    except Exception:  # not a notebook any more: only the whole lab can be put back
        raise ResetRefused(
            f"{_shown(path)} cannot be read as a notebook: `nox -s reset -- {lab.id}` puts "
            "the whole lab back (and keeps your file beside it)."
        ) from None
    stub = next(c for c in shipped.cells if exercise_id(c) == exercise)
    cells = [c for c in mine.cells if exercise_id(c) == exercise]
    if not cells:
        raise ResetRefused(
            f"No cell of {_shown(path)} is tagged exercise-{exercise}, so there is no cell to "
            f"reset: `nox -s reset -- {lab.id}` puts the whole lab back (and keeps yours)."
        )
    if all(c.source == stub.source for c in cells):
        return f"Exercise {exercise}'s cell is already the stub: nothing to reset."
    kept = _keep(path, exercise)
    for cell in cells:
        cell.source = stub.source
        cell.outputs = []
        cell.execution_count = None
    _write(mine, path)
    return (
        f"Exercise {exercise}'s cell is the stub again in {_shown(path)}. Your version is kept "
        f"in {_shown(kept)}: open it in JupyterLab to copy from it."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s reset --",
        description="Put an exercise's stub, or a whole lab, back; your version is kept beside it.",
    )
    parser.add_argument("target", help="an exercise (4.2) or a lab (04)")
    parser.add_argument("--notebooks", default="labs", help="folder of notebooks (default: labs)")
    args = parser.parse_args(argv)
    folder = Path(args.notebooks)
    folder = folder if folder.is_absolute() else REPO_ROOT / folder
    try:
        print(reset(args.target, folder))
    except registry.RegistryError as error:
        text = str(error).rstrip(".")
        print(f"{text[:1].upper()}{text[1:]}.", file=sys.stderr)
        return 2
    except ResetRefused as refused:
        print(refused, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
