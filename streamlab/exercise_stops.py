"""Where Run All stops in a lab: at the first exercise not written yet, under its own cell.

An exercise's stub in ``labs/`` raises "exercise N.M is not done yet" where its code goes,
often inside a function that only a later cell calls. In a notebook (``%load_ext streamlab``),
a cell that defines such a stub stops after its definitions, under itself, and any stop for
an unwritten exercise shows one sentence instead of a traceback.
"""

from __future__ import annotations

import ast
import re

#: The stub's message (``streamlab.course.notebooks.NOT_DONE``), here to stay free of tooling.
_NOT_DONE = re.compile(r"^exercise (\d+\.\d+) is not done yet")


class ExerciseNotDone(NotImplementedError):
    """Raised at the end of a cell whose functions still hold an exercise's stub."""

    def __init__(self, exercise: str) -> None:
        super().__init__(f"exercise {exercise} is not done yet")
        self.exercise = exercise


def _stubbed(node: ast.AST) -> str | None:
    """The exercise whose stub ``raise NotImplementedError("exercise N.M ...")`` is ``node``."""
    if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
        return None
    args = node.exc.args
    if getattr(node.exc.func, "id", None) != "NotImplementedError" or len(args) != 1:
        return None
    text = args[0].value if isinstance(args[0], ast.Constant) else None
    found = _NOT_DONE.match(text) if isinstance(text, str) else None
    return found.group(1) if found else None


class StopAtStubs(ast.NodeTransformer):
    """IPython AST transformer: a cell defining a function that still holds a stub ends by
    raising :class:`ExerciseNotDone`, after its definitions ran (later cells may use them)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        functions = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        exercises = [e for f in functions for n in ast.walk(f) if (e := _stubbed(n))]
        if exercises:
            stop = ast.parse(
                f"raise __import__('streamlab.exercise_stops', fromlist=['_'])"
                f".ExerciseNotDone({exercises[0]!r})"
            ).body
            node.body.extend(ast.fix_missing_locations(s) for s in stop)
        return node


def sentence(error: BaseException) -> str | None:
    """One sentence for a stop at an unwritten exercise, or None for any other error."""
    if isinstance(error, ExerciseNotDone):
        return (
            f"Exercise {error.exercise} is not done yet: write it in this cell, in place of the "
            f"line that raises NotImplementedError, run it, then `%check {error.exercise}`. "
            "Run All stops here on purpose: the cells below need it.\n"
        )
    found = _NOT_DONE.match(str(error)) if isinstance(error, NotImplementedError) else None
    if found is None:
        return None
    return (
        f"Exercise {found.group(1)} is not done yet: the cell tagged exercise-{found.group(1)} "
        "still raises NotImplementedError. Write it, run it, then run this cell again.\n"
    )


def install(shell) -> None:
    """Add the transformer to ``shell`` once."""
    if not any(isinstance(t, StopAtStubs) for t in shell.ast_transformers):
        shell.ast_transformers.append(StopAtStubs())
