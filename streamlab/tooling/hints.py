"""Hints on demand: ``nox -s hint -- 2.1`` shows the next tier of an exercise's hints.

Each exercise in ``course.toml`` has two or three hints, from a nudge (what to think about,
which API family) to an approach (the steps in words). They never hold the solution's code
(:mod:`streamlab.tooling.hint_leaks` keeps that standard, in the course's tests).

How many tiers a learner has seen is remembered in ``build/hints.json``; after the last one,
the command points to ``nox -s reveal`` (the answer, recorded as revealed) and to the solution
on the course site. ``--reset`` starts over.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import unicodedata
from pathlib import Path

from streamlab.course import registry
from streamlab.course.notebooks import read_cells
from streamlab.course.registry import find_exercise
from streamlab.paths import BUILD_DIR, REPO_ROOT

STATE_FILE = BUILD_DIR / "hints.json"
SITE_URL = "http://127.0.0.1:8000"
SITE_DIR = BUILD_DIR / "site"


def solution_link(lab: registry.Lab, exercise: registry.Exercise) -> tuple[str, Path]:
    """Where the exercise's solution is on the site: the served URL and the built page."""
    anchor = slugify(_heading(lab, exercise))
    page = f"labs/{lab.name}/"
    return f"{SITE_URL}/{page}#{anchor}", SITE_DIR / page / "index.html"


def slugify(text: str, separator: str = "-") -> str:
    """The anchor the site gives a heading: Python-Markdown's ``toc`` slug, without its import."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(rf"[{separator}\s]+", separator, text)


def _heading(lab: registry.Lab, exercise: registry.Exercise) -> str:
    """The exercise's heading as its page shows it (from the solution notebook)."""
    heading = re.compile(rf"^#+\s+(Exercise {re.escape(exercise.id)}\b.*)$", re.M)
    path = lab.notebook(REPO_ROOT / "solutions")
    cells = read_cells(path) if path.exists() else []
    for cell in cells:
        match = heading.search(cell["source"]) if cell.get("cell_type") == "markdown" else None
        if match:
            return match.group(1).strip()
    return f"Exercise {exercise.id} · {exercise.title}"


def _load(state_file: Path) -> dict[str, int]:
    try:
        data = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


def _save(state_file: Path, shown: dict[str, int]) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    partial = state_file.with_suffix(".tmp")
    partial.write_text(json.dumps(shown, indent=2, sort_keys=True) + "\n")
    partial.replace(state_file)


def next_hint(exercise_id: str, state_file: Path = STATE_FILE) -> str:
    """The text to show for the next hint of ``exercise_id``, and remember that it was shown."""
    lab, exercise = find_exercise(exercise_id)
    shown = _load(state_file)
    count = shown.get(exercise.id, 0)
    total = len(exercise.hints)
    if count >= total:
        url, built = solution_link(lab, exercise)
        anchor = url.partition("#")[2]
        reveal = (
            f"Still stuck? `nox -s reveal -- {exercise.id}` shows its answer: what the notebook "
            "explains after its check, its solution and a discussion. The grade then records "
            f"{exercise.id} as revealed, not passed, until your own code passes."
        )
        return "\n".join(
            [
                f"No more hints for exercise {exercise.id}: all {total} have been shown.",
                *textwrap.wrap(reveal, width=88),
                f"Once it passes (`nox -s check -- {lab.id}`), its solution and discussion also "
                "open on the course site, under the exercise:",
                f"  {url}  (while `nox -s serve` runs)",
                f"  {built.relative_to(REPO_ROOT)}#{anchor}  (after `nox -s site`)",
                f"`nox -s hint -- --reset {exercise.id}` starts its hints over.",
            ]
        )
    shown[exercise.id] = count + 1
    _save(state_file, shown)
    head = f"Exercise {exercise.id} · {exercise.title}: hint {count + 1} of {total}"
    more = (
        ""
        if count + 1 == total
        else f"\n\nStill stuck? `nox -s hint -- {exercise.id}` again shows hint {count + 2}."
    )
    return f"{head}\n\n{textwrap.fill(exercise.hints[count], width=88)}{more}"


def reset(exercise_id: str | None, state_file: Path = STATE_FILE) -> str:
    """Forget the hints shown for one exercise, or for every exercise when None."""
    if exercise_id is None:
        _save(state_file, {})
        return "Hints start over for every exercise."
    _, exercise = find_exercise(exercise_id)
    shown = _load(state_file)
    shown.pop(exercise.id, None)
    _save(state_file, shown)
    return f"Hints for exercise {exercise.id} start over at hint 1."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s hint --",
        description="Show the next hint of an exercise, one tier more each time you ask.",
    )
    parser.add_argument("exercise", nargs="?", help="the exercise id, e.g. 2.1")
    parser.add_argument(
        "--reset",
        action="store_true",
        help="start over: for the exercise given, or for every exercise",
    )
    args = parser.parse_args(argv)
    try:
        if args.reset:
            print(reset(args.exercise))
        elif args.exercise is None:
            print("Name the exercise, e.g. `nox -s hint -- 2.1`.", file=sys.stderr)
            return 2
        else:
            print(next_hint(args.exercise))
    except registry.RegistryError as error:
        print(f"{str(error)[0].upper()}{str(error)[1:]}.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
