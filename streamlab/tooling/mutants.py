"""``nox -s mutants [-- LAB ...] [--exercise 4.2]``: do the checks catch wrong solutions?

Makes variants of each exercise's solution regions in ``solutions/`` (a comparison flipped,
a boundary moved, a constant changed, a statement dropped, a condition negated, ``and`` and
``or`` swapped), one change per variant, found by walking the code's syntax tree in order,
so the same solution always gives the same variants. Each variant is graded against its own
exercise's checks only, by the real grader (:mod:`streamlab.grading.supervisor`: a child
process, the checks' time limits), all of a lab's variants in one child so that Spark starts
once (:mod:`streamlab.tooling.mutants_plugin`, which the child loads, makes each variant a
unit of its own); checks without Spark run first, and a variant stops at its first failing
check. The unchanged solution is graded first: a variant is caught only if the solution
passes.

A variant no check fails is a survivor. Survivors that are likely equivalent to the solution
are marked, never dropped: a variant that compiles to the solution's own bytecode (not
graded: nothing can tell them apart), and one that changes only the text of an error the
solution raises. The score is caught / (variants - equivalent survivors).

Results go to ``build/mutants/LAB.json``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streamlab.course import registry
from streamlab.course.notebooks import clipped, exercise_id, is_graded, read_cells, solution_lines
from streamlab.paths import BUILD_DIR, REPO_ROOT

if TYPE_CHECKING:
    from streamlab.grading.supervisor import Outcome
    from streamlab.grading.verdict import CheckResult

RESULTS_DIR = BUILD_DIR / "mutants"
#: The share of non-equivalent variants a lab's checks must catch.
TARGET = 0.95

SAME_BYTECODE = "compiles to the solution's own bytecode"
ERROR_TEXT = "changes only the text of an error the solution raises"

_FLIPPED = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_DROPPABLE = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.Return,
    ast.Delete,
    ast.Raise,
    ast.Assert,
)


@dataclass(frozen=True)
class Mutant:
    """One variant of one exercise cell of a solution notebook."""

    number: int
    exercise: str
    cell: int  # the cell's position in the notebook, 1-based
    line: int  # the changed line, 1-based within the cell
    kind: str
    change: str
    source: str  # the whole cell, changed
    equivalent: str = ""  # why it is likely equivalent to the solution; "" if not known

    @property
    def unit(self) -> str:
        return f"m{self.number}"


# --- making variants ---------------------------------------------------------------------


def variants(lab: registry.Lab, exercises: list[str] | None = None) -> list[Mutant]:
    """Every variant of ``lab``'s solution regions (of ``exercises`` only, when given)."""
    cells = read_cells(lab.notebook(REPO_ROOT / "solutions"))
    found: list[Mutant] = []
    for position, cell in enumerate(cells, 1):
        exercise = exercise_id(cell) if cell.get("cell_type") == "code" else None
        if not exercise or (exercises and exercise not in exercises):
            continue
        for kind, line, change, changed in cell_variants(cell["source"]):
            found.append(
                Mutant(
                    number=len(found) + 1,
                    exercise=exercise,
                    cell=position,
                    line=line,
                    kind=kind,
                    change=change,
                    source=changed,
                    equivalent=_equivalent(cell["source"], changed, kind, line),
                )
            )
    return found


#: One change a variant makes: (kind, the node replaced, its new text, the change in words).
_Change = tuple[str, ast.AST, str, str]


def cell_variants(source: str) -> list[tuple[str, int, str, str]]:
    """(kind, line, change, changed source) for each variant of the solution regions of a cell."""
    spans = solution_lines(source)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    out: list[tuple[str, int, str, str]] = []
    seen = {source}

    def inside(node: ast.AST) -> bool:
        return any(first <= node.lineno and node.end_lineno <= last for first, last in spans)

    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    docstrings = _docstrings(tree)
    for node in _in_order(tree):
        if not hasattr(node, "lineno") or not inside(node):
            continue
        for kind, target, text, change in _changes(node, source, parents, docstrings, inside):
            changed = _replaced(lines, target, text)
            if changed not in seen:
                seen.add(changed)
                out.append((kind, target.lineno, change, changed))
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the tree's docstring constants: text no code runs, never changed."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }


def _changes(
    node: ast.AST,
    source: str,
    parents: dict[ast.AST, ast.AST],
    docstrings: set[int],
    inside: Callable[[ast.AST], bool],
) -> Iterator[_Change]:
    """Every change of ``node`` a variant makes, in order."""
    # One line, for the report: a segment may span lines.
    original = " ".join((ast.get_source_segment(source, node) or "").split())
    if isinstance(node, ast.Compare):
        yield from _compare_changes(node, original)
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        text = ast.unparse(ast.BoolOp(other, node.values))
        yield "and/or swapped", node, text, f"`{original}` -> `{text}`"
    elif isinstance(node, ast.Constant) and id(node) not in docstrings:
        # Never the literal text of an f-string.
        moved = None if isinstance(parents.get(node), ast.JoinedStr) else _moved(node.value)
        if moved is not None:
            text = repr(moved)
            yield "constant changed", node, text, f"`{original}` -> `{text}`"
    if (
        isinstance(node, (ast.If, ast.While, ast.IfExp))
        and inside(node.test)
        and not _flippable(node.test)
    ):
        test = ast.get_source_segment(source, node.test) or ""
        yield "condition negated", node.test, f"not ({test})", f"`{test}` -> `not ({test})`"
    if isinstance(node, _DROPPABLE) and id(getattr(node, "value", None)) not in docstrings:
        yield "statement dropped", node, "pass", f"`{clipped(original, 100)}` dropped"


def _compare_changes(node: ast.Compare, original: str) -> Iterator[_Change]:
    """Each comparison of ``node`` flipped, then moved over its boundary."""
    for index, op in enumerate(node.ops):
        for table, kind in ((_FLIPPED, "comparison flipped"), (_BOUNDARY, "boundary")):
            if type(op) in table:
                ops = list(node.ops)
                ops[index] = table[type(op)]()
                text = ast.unparse(ast.Compare(node.left, ops, node.comparators))
                yield kind, node, text, f"`{original}` -> `{text}`"


def _flippable(test: ast.AST) -> bool:
    """A single comparison: flipping it already gives the negated condition."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _FLIPPED


def _in_order(tree: ast.AST) -> list[ast.AST]:
    """The tree's nodes in source order (``ast.walk`` goes breadth first)."""
    nodes = [n for n in ast.walk(tree) if hasattr(n, "lineno")]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset, -n.end_lineno, -n.end_col_offset))


def _moved(value):
    """A constant moved: a number one up, a flag flipped, a string changed; None to leave it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return value + "x"
    return None


def _replaced(lines: list[str], node: ast.AST, text: str) -> str:
    """The source with ``node``'s span replaced by ``text``."""
    first, last = node.lineno - 1, node.end_lineno - 1
    head = _prefix(lines[first], node.col_offset)
    tail = _suffix(lines[last], node.end_col_offset)
    return "".join(lines[:first] + [head + text + tail] + lines[last + 1 :])


def _prefix(line: str, offset: int) -> str:
    # ast offsets count UTF-8 bytes.
    return line.encode()[:offset].decode()


def _suffix(line: str, offset: int) -> str:
    return line.encode()[offset:].decode()


def _equivalent(original: str, changed: str, kind: str, line: int) -> str:
    """Why a variant is likely equivalent to the solution ("" when there is no reason to think so)."""
    try:
        if _same_code(compile(original, "cell", "exec"), compile(changed, "cell", "exec")):
            return SAME_BYTECODE
    except SyntaxError:
        return ""
    if kind == "constant changed" and _in_raise(original, line):
        return ERROR_TEXT
    return ""


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    if a.co_code != b.co_code or a.co_names != b.co_names or a.co_varnames != b.co_varnames:
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _in_raise(source: str, line: int) -> bool:
    tree = ast.parse(source)
    return any(
        isinstance(node, ast.Raise) and node.lineno <= line <= node.end_lineno
        for node in ast.walk(tree)
    )


# --- grading them ------------------------------------------------------------------------


def _write_notebook(cells: list[dict], path: Path) -> None:
    """A notebook of the graded cells only: what the grader runs, nothing it does not."""
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "id": f"cell-{n}",
                "metadata": {"tags": cell.get("metadata", {}).get("tags", [])},
                "source": cell["source"],
                "outputs": [],
                "execution_count": None,
            }
            for n, cell in enumerate(cells)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook), encoding="utf-8")


def _write_variants(
    lab: registry.Lab, made: list[Mutant], scratch: Path, cells: list[dict]
) -> tuple[list[Mutant], list[str], Path]:
    """Write the solution's and each variant's notebook under ``scratch``, and the list the
    grader's mutants plugin reads; (the variants to grade, their exercises, the list)."""
    graded_cells = [(n, c) for n, c in enumerate(cells, 1) if is_graded(c)]
    to_grade = [m for m in made if m.equivalent != SAME_BYTECODE]
    exercises = sorted({m.exercise for m in made}, key=_exercise_order)
    units = [
        {"unit": "solution", "exercise": e, "folder": str(scratch / "solution")} for e in exercises
    ]
    _write_notebook([c for _, c in graded_cells], lab.notebook(scratch / "solution"))
    for mutant in to_grade:
        folder = scratch / mutant.unit
        changed = [
            {**c, "source": mutant.source} if n == mutant.cell else c for n, c in graded_cells
        ]
        _write_notebook(changed, lab.notebook(folder))
        units.append({"unit": mutant.unit, "exercise": mutant.exercise, "folder": str(folder)})
    plan = scratch / "variants.json"
    plan.write_text(json.dumps(units))
    return to_grade, exercises, plan


def grade(
    lab: registry.Lab,
    made: list[Mutant],
    *,
    scratch: Path,
    max_check_seconds: float | None = None,
    echo: Callable[..., None] = print,
) -> dict:
    """Grade ``made`` (and the solution, first) with the grader; the lab's result as a dict."""
    from streamlab.grading import supervisor

    started = time.monotonic()
    cells = read_cells(lab.notebook(REPO_ROOT / "solutions"))
    to_grade, exercises, plan = _write_variants(lab, made, scratch, cells)
    echo(
        f"Lab {lab.id}: grading the solution and {len(to_grade)} of {len(made)} variants "
        f"({len(made) - len(to_grade)} compile to the solution's own bytecode) ...",
        flush=True,
    )
    outcome = supervisor.run(
        [lab],
        str(scratch / "solution"),
        exercises=exercises,
        max_check_seconds=max_check_seconds,
        log_path=scratch / "grade.log",
        child_args=["-p", "streamlab.tooling.mutants_plugin", "--variants", str(plan)],
        on_result=_progress(len(to_grade), echo),
    )
    caught_by = _caught_by(lab, outcome)
    hints = _hints_shown(lab, outcome)
    rows = [
        {
            **{k: v for k, v in asdict(mutant).items() if k != "source"},
            "caught": mutant.unit in caught_by,
            "by": caught_by.get(mutant.unit, ""),
            "hint": hints.get(mutant.unit, ""),
            "original": _line(cells[mutant.cell - 1]["source"], mutant.line),
        }
        for mutant in made
    ]
    return summarise(lab, rows, seconds=time.monotonic() - started)


def _progress(variants: int, echo: Callable[..., None]) -> Callable[[CheckResult], None]:
    """Told each verdict: says every so many graded variants how far the grading is."""
    graded: set[str] = set()
    every = max(10, variants // 10)

    def progress(result: CheckResult) -> None:
        # A variant is done at its first failing check, or after its last one.
        graded.add(result.unit)
        if len(graded) % every == 0:
            echo(f"  {len(graded) - 1} of {variants} variants graded ...", flush=True)

    return progress


def _caught_by(lab: registry.Lab, outcome: Outcome) -> dict[str, str]:
    """Each caught variant's unit -> the sentence of the first check it did not pass (or why
    its notebook could not be read); exits when the solution itself does not pass."""
    from streamlab.grading.verdict import PASSED

    caught: dict[str, str] = {}
    for result in outcome.results:
        if result.verdict.status != PASSED:
            caught.setdefault(result.unit, result.verdict.message)
    solution_failures = {
        r.exercise: r.verdict.message
        for r in outcome.results
        if r.unit == "solution" and r.verdict.status != PASSED
    }
    if solution_failures:
        raise SystemExit(
            f"Lab {lab.id}'s solution fails its own checks ({solution_failures}); "
            "mutation testing needs a solution that passes."
        )
    for unit, message in outcome.unit_errors.items():
        caught.setdefault(unit, message)
    return caught


def _hints_shown(lab: registry.Lab, outcome: Outcome) -> dict[str, str]:
    """Each caught variant's unit -> the hint a learner would read under its first failed
    check: the check's own, else its exercise's first tier ("" when the failure has none)."""
    from streamlab.grading.verdict import FAILED

    shown: dict[str, str] = {}
    for result in outcome.results:
        if result.verdict.status != FAILED or result.unit in shown:
            continue
        own = result.verdict.hint or lab.exercise(result.exercise).hint
        shown[result.unit] = "" if result.verdict.hintless else own
    return shown


def _line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _exercise_order(exercise: str) -> tuple[int, int]:
    lab, _, number = exercise.partition(".")
    return int(lab), int(number)


def summarise(lab: registry.Lab, rows: list[dict], *, seconds: float = 0.0) -> dict:
    """Per exercise and for the lab: made, caught, survivors, equivalent, and the score."""

    def tally(subset: list[dict]) -> dict:
        survivors = [r for r in subset if not r["caught"]]
        equivalent = [r for r in survivors if r["equivalent"]]
        counted = len(subset) - len(equivalent)
        caught = len(subset) - len(survivors)
        return {
            "made": len(subset),
            "caught": caught,
            "survivors": len(survivors),
            "equivalent": len(equivalent),
            "score": round(caught / counted, 4) if counted else 1.0,
        }

    exercises = sorted({r["exercise"] for r in rows}, key=_exercise_order)
    return {
        "lab": lab.id,
        "seconds": round(seconds, 1),
        **tally(rows),
        "exercises": {e: tally([r for r in rows if r["exercise"] == e]) for e in exercises},
        "variants": rows,
    }


def render(result: dict) -> str:
    """The lab's figures and its survivors, for the terminal."""
    out = [
        f"Lab {result['lab']}: {result['made']} variants, {result['caught']} caught, "
        f"{result['survivors']} survived ({result['equivalent']} likely equivalent): "
        f"{result['score']:.1%} of the non-equivalent variants caught"
        + ("" if result["score"] >= TARGET else f" (below {TARGET:.0%})")
        + f", in {result['seconds']:.0f} s."
    ]
    for exercise, figures in result["exercises"].items():
        out.append(
            f"  {exercise:<5} {figures['made']:>3} made, {figures['caught']:>3} caught, "
            f"{figures['survivors']:>2} survived ({figures['equivalent']} likely equivalent)"
        )
    survivors = [r for r in result["variants"] if not r["caught"]]
    if survivors:
        out.append("Survivors (exercise, line of its cell, the change):")
    for row in survivors:
        mark = f"  [likely equivalent: {row['equivalent']}]" if row["equivalent"] else ""
        out.append(f"  {row['exercise']} line {row['line']}: {row['kind']}: {row['change']}{mark}")
    return "\n".join(out)


def table(results_dir: Path) -> str:
    """The figures of every lab in ``results_dir``, as rows of the authoring page's table."""
    rows = []
    for path in sorted(results_dir.glob("[0-9][0-9].json")):
        result = json.loads(path.read_text())
        rows.append(
            f"| {result['lab']} | {result['made']} | {result['caught']} | {result['survivors']} "
            f"| {result['equivalent']} | {result['score']:.1%} |"
        )
    return "\n".join(rows)


def run_lab(
    lab: registry.Lab,
    exercises: list[str] | None = None,
    *,
    results_dir: Path = RESULTS_DIR,
    max_check_seconds: float | None = None,
    echo=print,
) -> dict:
    made = variants(lab, exercises)
    with tempfile.TemporaryDirectory(prefix="streamlab-mutants-") as scratch:
        result = grade(
            lab, made, scratch=Path(scratch), max_check_seconds=max_check_seconds, echo=echo
        )
    results_dir.mkdir(parents=True, exist_ok=True)
    name = lab.id if not exercises else f"{lab.id}-{'-'.join(exercises)}"
    (results_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s mutants --", description=__doc__.split("\n")[0])
    parser.add_argument("labs", nargs="*", help="lab ids, e.g. 04 (default: every lab)")
    parser.add_argument(
        "--exercise", action="append", default=[], metavar="ID", help="only this exercise"
    )
    parser.add_argument("--max-check-seconds", type=float, default=None)
    parser.add_argument("--results", default=str(RESULTS_DIR), help="where LAB.json goes")
    parser.add_argument(
        "--table",
        action="store_true",
        help="grade nothing: print the results already in --results as the authoring page's table",
    )
    args = parser.parse_args(argv)
    if args.table:
        print(table(Path(args.results)))
        return 0
    try:
        chosen = [registry.lab(i) for i in args.labs]
        for exercise in args.exercise:
            lab = registry.lab(exercise.partition(".")[0])
            lab.exercise(exercise)
            if lab not in chosen:
                chosen.append(lab)
    except registry.RegistryError as error:
        print(f"{str(error)[:1].upper()}{str(error)[1:]}.", file=sys.stderr)
        return 2
    below = []
    for lab in chosen or registry.labs():
        wanted = [e for e in args.exercise if e.startswith(f"{int(lab.id)}.")] or None
        result = run_lab(
            lab, wanted, results_dir=Path(args.results), max_check_seconds=args.max_check_seconds
        )
        print(render(result), flush=True)
        print()
        if result["score"] < TARGET:
            below.append(lab.id)
    if below:
        print(f"Below {TARGET:.0%}: lab {', '.join(below)}.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
