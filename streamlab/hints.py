"""Hints on demand: ``nox -s hint -- 2.1`` shows the next tier of an exercise's hints.

Each exercise in ``course.toml`` has two or three hints, from a nudge (what to think about,
which API family) to an approach (the steps in words). They never hold the solution's code:
:func:`leaks` finds what a hint repeats of a solution region (a run of its code, a string
literal, a name of one of its helper variables) that the learner's notebook does not already
show, and the course's tests hold every hint to it.

How many tiers a learner has seen is remembered in ``build/hints.json``; after the last one,
the command points to the solution on the course site. ``--reset`` starts over.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import textwrap
import tokenize
from collections.abc import Sequence
from pathlib import Path

from markdown.extensions.toc import slugify

from streamlab import registry
from streamlab.paths import BUILD_DIR, REPO_ROOT

STATE_FILE = BUILD_DIR / "hints.json"
SITE_URL = "http://127.0.0.1:8000"
SITE_DIR = BUILD_DIR / "site"

#: The shortest run of solution code (whitespace ignored) that a hint may not repeat.
MIN_CODE_RUN = 12
# What makes a run code rather than words run together: a call, an index, an operator or a
# quote, or two attribute dots (``a.b.c``).
_CODE_MARK = re.compile(r"""[()\[\]{}=<>+*"]|\w\.\w.*\w\.\w""")
# A name that reads as code rather than as an English word.
_CODE_NAME = re.compile(r"_|[a-z][A-Z]")
_EXERCISE_ID = re.compile(r"^\d+\.\d+$")


# --- the standard a hint keeps -----------------------------------------------------------


def leaks(hint: str, solution: str | Sequence[str], visible: str = "") -> list[str]:
    """What ``hint`` repeats of the code in ``solution``, a solution region or several.

    Three things count, unless ``visible`` (the learner's notebook) already shows them:

    - a run of at least ``MIN_CODE_RUN`` characters of the solution's code (comments and
      whitespace ignored) that reads as code: a call chain, an index, an expression;
    - a string literal of the solution, quoted or in backticks, or bare when it reads as
      code (``a.b``, ``snake_case``, ``camelCase``);
    - a name the solution binds (a helper variable or function) that reads as code, or any
      such name in backticks.

    Plain English never matches: a run needs code punctuation, a name needs code shape.
    """
    regions = [solution] if isinstance(solution, str) else list(solution)
    # Each region on its own: regions of one cell may sit at different indentations.
    code = [_without_comments(region) for region in regions]
    seen = _compact(visible)
    found = [
        run
        for run in _shared_runs(_compact(hint), _compact("\n".join(code)))
        if _CODE_MARK.search(run) and run not in seen
    ]
    literals: set[str] = set()
    names: set[str] = set()
    for region in code:
        region_literals, region_names = _literals_and_names(region)
        literals |= region_literals
        names |= region_names
    quoted = hint.replace("'", '"')
    for literal in sorted(literals):
        if len(literal) < 2 or _compact(literal) in seen:
            continue
        reads_as_code = (len(literal) >= 6 and _CODE_NAME.search(literal)) or "." in literal
        bare = reads_as_code and re.search(rf"(?<![\w.]){re.escape(literal)}(?!\w)", hint)
        if bare or f'"{literal}"' in quoted or f"`{literal}`" in hint:
            found.append(f'"{literal}"')
    for name in sorted(names):
        if re.search(rf"\b{re.escape(name)}\b", visible):
            continue
        bare = _CODE_NAME.search(name) and re.search(rf"(?<![\w.]){re.escape(name)}\b", hint)
        if bare or f"`{name}`" in hint:
            found.append(name)
    return found


def lab_leaks(lab: registry.Lab) -> dict[str, list[str]]:
    """Every hint of ``lab`` that repeats its solution: ``"2.1 hint 2"`` to what it repeats.

    The solution is the exercise's solution regions in ``solutions/``; what the learner sees
    is the lab notebook generated from it (markdown, stubs and the code around them).
    """
    import nbformat

    from streamlab.authoring import exercise_id, make_lab_notebook, solution_regions

    solved = nbformat.read(lab.notebook(REPO_ROOT / "solutions"), as_version=4)
    visible = "\n".join(cell.source for cell in make_lab_notebook(solved, lab).cells)
    code: dict[str, list[str]] = {}
    for cell in solved.cells:
        exercise = exercise_id(cell)
        if exercise and cell.cell_type == "code":
            code.setdefault(exercise, []).extend(solution_regions(cell.source))
    found = {}
    for exercise in lab.exercises:
        if any(_parse(_without_comments(region)) is None for region in code.get(exercise.id, [])):
            found[f"{exercise.id} solution"] = ["a solution region that does not parse"]
        for tier, hint in enumerate(exercise.hints, 1):
            repeated = leaks(hint, code.get(exercise.id, []), visible)
            if repeated:
                found[f"{exercise.id} hint {tier}"] = repeated
    return found


def _compact(text: str) -> str:
    """``text`` without whitespace or backticks, every quote a double quote."""
    return re.sub(r"[\s`]+", "", text).replace("'", '"')


def _shared_runs(hint: str, code: str) -> list[str]:
    """The longest runs of ``hint``, left to right, that occur in ``code``."""
    runs, i = [], 0
    while i < len(hint):
        length = 0
        while i + length < len(hint) and hint[i : i + length + 1] in code:
            length += 1
        if length >= MIN_CODE_RUN:
            runs.append(hint[i : i + length])
            i += length
        else:
            i += 1
    return runs


def _parse(code: str) -> ast.Module | None:
    """A solution region parsed as the body of a function (it may ``return`` or ``yield``)."""
    body = textwrap.indent(textwrap.dedent(code), "    ") or "    pass"
    try:
        return ast.parse("def _region():\n" + body)
    except SyntaxError:
        return None


def _without_comments(code: str) -> str:
    lines = textwrap.dedent(code).splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    for token in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        row, col = token.start
        lines[row - 1] = lines[row - 1][:col].rstrip() + "\n"
    return "".join(lines)


def _literals_and_names(code: str) -> tuple[set[str], set[str]]:
    """The string literals of ``code`` and the names it binds."""
    tree = _parse(code)
    literals: set[str] = set()
    names: set[str] = set()
    if tree is None:
        return literals, names
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.strip():
                literals.add(node.value.strip())
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "_region":
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return literals, names


# --- showing hints one tier at a time ----------------------------------------------------


def find_exercise(exercise_id: str) -> tuple[registry.Lab, registry.Exercise]:
    """The lab and exercise of an id such as ``2.1``; a sentence when there is none."""
    if exercise_id.isdigit():
        lab = registry.lab(exercise_id)
        known = ", ".join(e.id for e in lab.exercises)
        raise registry.RegistryError(f"{exercise_id} is a lab; name one of its exercises: {known}")
    if not _EXERCISE_ID.match(exercise_id):
        raise registry.RegistryError(
            f"{exercise_id!r} is not an exercise id: give one such as 2.1 (lab 02, exercise 1)"
        )
    lab = registry.lab(exercise_id.partition(".")[0])
    return lab, lab.exercise(exercise_id)


def solution_link(lab: registry.Lab, exercise: registry.Exercise) -> tuple[str, Path]:
    """Where the exercise's solution is on the site: the served URL and the built page."""
    anchor = slugify(_heading(lab, exercise), "-")
    page = f"labs/{lab.name}/"
    return f"{SITE_URL}/{page}#{anchor}", SITE_DIR / page / "index.html"


def _heading(lab: registry.Lab, exercise: registry.Exercise) -> str:
    """The exercise's heading as its page shows it (from the solution notebook)."""
    heading = re.compile(rf"^#+\s+(Exercise {re.escape(exercise.id)}\b.*)$", re.M)
    path = lab.notebook(REPO_ROOT / "solutions")
    # Read as plain JSON: nbformat takes seconds to import, far longer than this lookup.
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"] if path.exists() else []
    for cell in cells:
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        match = heading.search(source) if cell["cell_type"] == "markdown" else None
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
        return "\n".join(
            [
                f"No more hints for exercise {exercise.id}: all {total} have been shown.",
                "Its solution is on the course site, collapsed under the exercise:",
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
