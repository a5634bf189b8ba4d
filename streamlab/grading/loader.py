"""Load a notebook's graded cells into a fresh module, the way the grader sees them.

Only cells tagged ``exercise-N.M`` or ``graded-setup`` run, in notebook order, in a new
module: never the live kernel, so a name left over from an earlier run cannot make a
check pass. A cell that fails to compile or raises is recorded against its exercise and
the remaining cells still run, so one broken exercise does not hide the others.
"""

from __future__ import annotations

import linecache
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from streamlab.authoring import NOT_DONE, NOT_DONE_PATTERN, exercise_id, is_graded
from streamlab.grading.timeout import CheckTimeout, time_limit

#: How long one cell may take to define its functions and classes.
CELL_TIME_LIMIT = 30.0


@dataclass(frozen=True)
class CellProblem:
    """A graded cell that did not run to the end."""

    exercise: str | None  # None for a graded-setup cell, which every exercise needs
    cell_number: int  # 1-based position in the notebook, markdown cells included
    kind: str  # "syntax", "error", "timeout" or "not-done"
    detail: str

    @property
    def where(self) -> str:
        owner = f"exercise {self.exercise}" if self.exercise else "setup"
        return f"cell {self.cell_number} ({owner})"

    def sentence(self) -> str:
        if self.kind == "syntax":
            return f"Cell {self.cell_number} (exercise {self.exercise}) has a syntax error: {self.detail}"
        if self.kind == "timeout":
            return (f"Running {self.where} {self.detail}: is there an endless loop at the top "
                    "level of the cell?")
        if self.kind == "not-done":
            return f"Exercise {self.exercise} is not done yet."
        return f"Running {self.where} failed: {self.detail}"


class MissingName(AttributeError):
    """A check asked for a name that the notebook's graded cells do not define."""

    def __init__(self, name: str, notebook: Path):
        super().__init__(name)
        self.name = name
        self.notebook = notebook


@dataclass
class LoadedNotebook:
    """The graded cells of one notebook, executed. Attribute access reads their names."""

    path: Path
    module: types.ModuleType
    problems: list[CellProblem] = field(default_factory=list)
    exercises: set[str] = field(default_factory=set)

    def problem_for(self, exercise: str) -> CellProblem | None:
        """The first problem that stops ``exercise`` from being checked, if any."""
        for problem in self.problems:
            if problem.exercise in (None, exercise):
                return problem
        return None

    def __getattr__(self, name: str):
        try:
            return getattr(self.module, name)
        except AttributeError:
            raise MissingName(name, self.path) from None


def describe_error(error: BaseException, filename_prefix: str) -> str:
    """``TypeError: ... (line 4: `code`)``, pointing at the innermost notebook line."""
    summary = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.filename.startswith(filename_prefix)]
    if frames:
        frame = frames[-1]
        summary += f" (line {frame.lineno}: `{(frame.line or '').strip()}`)"
    return summary


def _register_source(filename: str, source: str) -> None:
    # Lets tracebacks and inspect.getsource show the notebook's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def load_notebook(path: str | Path, module_name: str | None = None) -> LoadedNotebook:
    """Run the graded cells of the notebook at ``path`` in a new module."""
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    name = module_name or f"notebook_{path.stem.replace('-', '_')}"
    module = types.ModuleType(name, f"Graded cells of {path.name}")
    module.__file__ = str(path)
    # Registered so that dataclasses and pickling find the module; pickled by value so that
    # Spark's Python workers, which cannot import a notebook, receive the code itself.
    sys.modules[name] = module
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    loaded = LoadedNotebook(path=path, module=module)
    for number, cell in enumerate(notebook.cells, start=1):
        if not is_graded(cell):
            continue
        exercise = exercise_id(cell)
        if exercise:
            loaded.exercises.add(exercise)
        filename = f"<{path.stem} cell {number}>"
        _register_source(filename, cell.source)
        problem = _run_cell(cell.source, filename, module, exercise, number)
        if problem is None and exercise and NOT_DONE.format(id=exercise) in cell.source:
            # The stub is still there: nothing of this exercise can pass yet, so say so
            # without running checks (some of which would start Spark for nothing).
            problem = CellProblem(exercise, number, "not-done", "the cell still raises")
        if problem:
            loaded.problems.append(problem)
    return loaded


def _run_cell(source: str, filename: str, module: types.ModuleType,
              exercise: str | None, number: int) -> CellProblem | None:
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        text = (error.text or "").strip()
        detail = f"line {error.lineno}: {error.msg}" + (f": `{text}`" if text else "")
        return CellProblem(exercise, number, "syntax", detail)
    try:
        with time_limit(CELL_TIME_LIMIT):
            exec(code, module.__dict__)
    except CheckTimeout as error:
        return CellProblem(exercise, number, "timeout", str(error))
    except NotImplementedError as error:
        if NOT_DONE_PATTERN.match(str(error)):
            return CellProblem(exercise, number, "not-done", str(error))
        return CellProblem(exercise, number, "error", describe_error(error, filename))
    except Exception as error:  # the learner's code may raise anything
        return CellProblem(exercise, number, "error", describe_error(error, "<"))
    return None
