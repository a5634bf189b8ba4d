"""The standard a hint keeps: it never repeats the solution's code.

:func:`leaks` finds what a hint repeats of a solution region (a run of its code, a string
literal, a name of one of its helper variables) that the learner's notebook does not already
show; :func:`lab_leaks` applies it to every hint of a lab, and the course's tests hold every
hint to it. Author-side: the learner's ``nox -s hint`` (:mod:`streamlab.tooling.hints`) never
imports this.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Sequence

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, solution_regions
from streamlab.paths import REPO_ROOT

#: The shortest run of solution code (whitespace ignored) that a hint may not repeat.
MIN_CODE_RUN = 12
# What makes a run code rather than words run together: a call, an index, an operator or a
# quote, or two attribute dots (``a.b.c``).
_CODE_MARK = re.compile(r"""[()\[\]{}=<>+*"]|\w\.\w.*\w\.\w""")
# A name that reads as code rather than as an English word.
_CODE_NAME = re.compile(r"_|[a-z][A-Z]")


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

    from streamlab.tooling.authoring import make_lab_notebook

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
