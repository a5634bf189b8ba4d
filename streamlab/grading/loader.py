"""Load a notebook's graded cells into a fresh module, the way the grader sees them.

Only cells tagged ``exercise-N.M`` or ``graded-setup`` run, in notebook order, in a new
module: never the live kernel, so a name left over from an earlier run cannot make a
check pass. A cell that fails to compile, raises, calls ``sys.exit()`` or leaves a streaming
query running is recorded against its exercise and the remaining cells still run, so one
broken exercise does not hide the others. Two cells with the same exercise tag, or an
exercise with no tagged cell, are recorded too. A file that is not a notebook raises
:class:`NotebookUnreadable`: that is the file's fault, not the code's.
"""

from __future__ import annotations

import dataclasses
import linecache
import sys
import traceback
import types
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from streamlab.course.notebooks import (
    NOT_DONE,
    NOT_DONE_PATTERN,
    cell_name,
    clipped,
    exercise_id,
    fingerprint,
    first_line,
    is_graded,
)
from streamlab.grading import calls
from streamlab.grading.timeout import CELL_TIME_LIMIT, CheckTimeout, time_limit
from streamlab.paths import REPO_ROOT
from streamlab.spark_errors import explain


@dataclass(frozen=True)
class CellProblem:
    """A graded cell that did not run to the end."""

    exercise: str | None  # None for a graded-setup cell, which every exercise needs
    cell_number: int  # 1-based position in the notebook, markdown cells included; 0: none
    kind: str  # "syntax", "error", "exit", "query", "timeout", "crash", "duplicate",
    #            "missing-tag", "not-done" or "reference" (the course's reference is missing)
    detail: str
    #: The cell's first line that says something: with the tag, how a learner finds the cell
    #: in JupyterLab (which shows no cell numbers).
    first_line: str = ""

    @property
    def where(self) -> str:
        return cell_name(self.exercise, self.first_line)

    def sentence(self) -> str:
        if self.kind == "syntax":
            return f"{_capital(self.where)} has a syntax error: {self.detail}"
        if self.kind == "timeout":
            return (
                f"Running {self.where} {self.detail}: is there an endless loop at the top "
                "level of the cell?"
            )
        if self.kind == "not-done":
            return f"Exercise {self.exercise} is not done yet."
        if self.kind == "exit":
            return (
                f"Running {self.where} ended the program with {self.detail}: a cell must "
                "not call sys.exit() or exit(); remove the call."
            )
        if self.kind == "query":
            return (
                f"Running {self.where} left a streaming query running ({self.detail}): "
                "start queries inside your function and stop them (availableNow and "
                "awaitTermination(), or query.stop()) before it returns."
            )
        if self.kind == "crash":
            return f"Running {self.where} {self.detail}"
        if self.kind in ("duplicate", "missing-tag", "reference"):
            return self.detail
        return f"Running {self.where} failed: {self.detail}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


class NotebookUnreadable(Exception):
    """The notebook file cannot be read: not the learner's code, the file itself."""

    def __init__(self, path: Path, detail: str):
        self.path = path
        self.detail = " ".join(detail.split())[:200]
        super().__init__(
            f"{_shown(path)} is not a valid notebook ({self.detail}). Your code was not run: "
            f"restore the file with `git checkout -- {_shown(path)}` (or re-download it), or "
            "open it in a text editor and repair it."
        )


class NotebookMissing(NotebookUnreadable):
    """There is no notebook file where the lab's notebook should be."""

    def __init__(self, path: Path):
        self.path = path
        self.detail = "no such file"
        Exception.__init__(
            self,
            f"There is no notebook at {_shown(path)}: restore it with "
            f"`git checkout -- {_shown(path)}`, or grade another folder with --notebooks.",
        )


#: The course's reference notebooks, which some checks compare the learner's code with.
REFERENCE_DIR = REPO_ROOT / "solutions"


def missing_reference(
    error: BaseException | None, notebook: Path | None = None
) -> NotebookUnreadable | None:
    """The course's reference notebook that ``error`` (or what caused it) could not read.

    A reference notebook is one under ``solutions/`` other than ``notebook``, the one being
    graded (which may be a solution notebook itself, with ``--notebooks solutions``).
    """
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, NotebookUnreadable) and _is_reference(error.path, notebook):
            return error
        error = error.__cause__ or error.__context__
    return None


def _is_reference(path: Path, notebook: Path | None) -> bool:
    where = Path(path).resolve()
    if notebook is not None and where == Path(notebook).resolve():
        return False
    return where.is_relative_to(REFERENCE_DIR.resolve())


def reference_sentence(problem: NotebookUnreadable, whose: str) -> str:
    """What to do when the reference notebook of ``problem`` is missing or broken.

    ``whose`` names the checks: "Lab 10's checks", "The checks of exercise 9.7".
    """
    shown = _from_root(problem.path)
    if not isinstance(problem, NotebookMissing):
        what = f"{shown} is not a valid notebook ({problem.detail.rstrip('.')})"
    elif REFERENCE_DIR.is_dir():
        what = f"{shown} is missing"
    else:
        what = f"the folder solutions/ is missing (with {shown} in it)"
    return (
        f"{whose} compare your code with the course's reference notebooks in solutions/, and "
        f"{what}: restore it with `git checkout -- solutions/` (or download the course "
        "again), then grade again."
    )


def _from_root(path: Path) -> str:
    """``path`` as the course's own files are named: relative to the course's folder."""
    try:
        return Path(path).resolve().relative_to(REPO_ROOT.resolve()).as_posix()
    except ValueError:
        return str(path)


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


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
    cells: dict[str, int] = field(default_factory=dict)  # exercise -> its (first) cell number
    first_lines: dict[str, str] = field(default_factory=dict)  # exercise -> its cell's first line
    #: :func:`streamlab.course.notebooks.fingerprint` of the graded cells that ran.
    fingerprint: str = ""
    #: exercise -> earlier exercise -> names of its cell that this exercise's cells read
    #: (:func:`streamlab.grading.calls.uses`).
    uses: dict[str, dict[str, list[str]]] = field(default_factory=dict)

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
    """``TypeError: ... (line 4: `code`)``, pointing at the innermost notebook line; for a Spark
    error the course teaches, what it means here and where the course shows it."""
    summary = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if f.filename.startswith(filename_prefix)
    ]
    if frames:
        frame = frames[-1]
        summary += f" (line {frame.lineno}: `{(frame.line or '').strip()}`)"
    explained = explain(error)
    return f"{summary}. {explained}" if explained else summary


def _register_source(filename: str, source: str) -> None:
    # Lets tracebacks and inspect.getsource show the notebook's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


#: Called with (exercise or None, cell number, its first line) before a graded cell runs,
#: and with (None, 0, "") after it; the grader's supervisor uses it to know which cell runs.
CellHook = Callable[[str | None, int, str], None]


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, or :class:`NotebookUnreadable` saying what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise NotebookMissing(path)
    try:
        return nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        raise NotebookUnreadable(
            path, "it is not complete JSON: cut short, or a merge or an edit by hand broke it"
        ) from None
    except Exception as error:  # UnicodeDecodeError, a schema error, ...
        raise NotebookUnreadable(path, f"{type(error).__name__}: {error}"[:160]) from None


def load_notebook(
    path: str | Path,
    module_name: str | None = None,
    *,
    expected: Collection[str] = (),
    skip: Mapping[int, CellProblem] | None = None,
    on_cell: CellHook | None = None,
    cell_time_limit: float | None = None,
) -> LoadedNotebook:
    """Run the graded cells of the notebook at ``path`` in a new module.

    ``expected`` names the exercises that should each have one tagged cell; ``skip`` maps
    cell numbers to a problem already known for them (the cell is not run again);
    ``on_cell`` is told which cell runs.
    """
    path = Path(path)
    notebook = read_notebook(path)
    module = _notebook_module(path, module_name)
    loaded = LoadedNotebook(path=path, module=module, fingerprint=fingerprint(notebook.cells))
    tagged: dict[str, list[str]] = {}
    graded: list[tuple[str | None, str]] = []
    for number, cell in enumerate(notebook.cells, start=1):
        if not is_graded(cell):
            continue
        exercise = exercise_id(cell)
        graded.append((exercise, cell.source))
        line = first_line(cell.source)
        if exercise:
            loaded.exercises.add(exercise)
            loaded.cells.setdefault(exercise, number)
            loaded.first_lines.setdefault(exercise, line)
            tagged.setdefault(exercise, []).append(line)
        if skip and number in skip:
            loaded.problems.append(skip[number])
            continue
        problem = _run_graded_cell(
            cell.source, loaded, exercise, number, on_cell, cell_time_limit or CELL_TIME_LIMIT
        )
        if problem:
            loaded.problems.append(dataclasses.replace(problem, first_line=line))
    # Tag problems come first: they explain whatever the cells themselves did.
    loaded.problems[:0] = _tag_problems(path, tagged, expected)
    loaded.uses = calls.uses(graded)
    return loaded


def _notebook_module(path: Path, module_name: str | None) -> types.ModuleType:
    """A new module for the notebook's graded cells, which Spark's workers receive by value."""
    name = module_name or f"notebook_{path.stem.replace('-', '_')}"
    module = types.ModuleType(name, f"Graded cells of {path.name}")
    module.__file__ = str(path)
    # Registered so that dataclasses and pickling find the module; pickled by value so that
    # Spark's Python workers, which cannot import a notebook, receive the code itself.
    sys.modules[name] = module
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return module


def _run_graded_cell(
    source: str,
    loaded: LoadedNotebook,
    exercise: str | None,
    number: int,
    on_cell: CellHook | None,
    limit: float,
) -> CellProblem | None:
    """Run one graded cell in the notebook's module, telling ``on_cell`` before and after."""
    filename = f"<{loaded.path.stem} cell {number}>"
    _register_source(filename, source)
    if on_cell:
        on_cell(exercise, number, first_line(source))
    problem = _run_cell(source, filename, loaded.module, exercise, number, limit, loaded.path)
    if on_cell:
        on_cell(None, 0, "")
    if problem is None and exercise and NOT_DONE.format(id=exercise) in source:
        if _diagnosis_name(exercise) in vars(loaded.module):
            # A debug exercise's diagnosis is written and its fix is not: the diagnosis is
            # graded on its own, the fix's checks say it is not done.
            return None
        # The stub is still there: nothing of this exercise can pass yet, so say so
        # without running checks (some of which would start Spark for nothing).
        return CellProblem(exercise, number, "not-done", "the cell still raises")
    return problem


def _diagnosis_name(exercise: str) -> str:
    """``DIAGNOSIS_2_5``: the name under which a debug exercise's diagnosis is written."""
    return "DIAGNOSIS_" + exercise.replace(".", "_")


def _tag_problems(
    path: Path, tagged: dict[str, list[str]], expected: Collection[str]
) -> list[CellProblem]:
    problems = []
    for exercise, lines in sorted(tagged.items()):
        if len(lines) > 1:
            count = {2: "Two", 3: "Three"}.get(len(lines), str(len(lines)))
            starts = ", ".join(f"`{clipped(line)}`" for line in lines[:-1])
            starts += f" and `{clipped(lines[-1])}`"
            problems.append(
                CellProblem(
                    exercise,
                    0,
                    "duplicate",
                    (
                        f"{count} cells are tagged exercise-{exercise}, starting {starts}; keep "
                        "one (delete the other cells, or remove their tag), so the grader knows "
                        "which is your answer."
                    ),
                )
            )
    for exercise in expected:
        if exercise not in tagged:
            problems.append(
                CellProblem(
                    exercise,
                    0,
                    "missing-tag",
                    (
                        f"No cell of {_shown(path)} is tagged exercise-{exercise}: put the tag back on "
                        "the cell with your code for it (JupyterLab: the cell's property inspector, "
                        "Cell Tags), or restore the cell from the lab."
                    ),
                )
            )
    return problems


def _run_cell(
    source: str,
    filename: str,
    module: types.ModuleType,
    exercise: str | None,
    number: int,
    limit: float,
    notebook: Path | None = None,
) -> CellProblem | None:
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        text = (error.text or "").strip()
        detail = f"line {error.lineno}: {error.msg}" + (f": `{text}`" if text else "")
        return CellProblem(exercise, number, "syntax", detail)
    running = None
    try:
        with time_limit(limit) as running:
            exec(code, module.__dict__)
    except CheckTimeout as error:
        return CellProblem(exercise, number, "timeout", str(error))
    except BaseException as error:
        if running is not None and running.expired:
            # A library (py4j) caught the timeout and raised its own error instead.
            return CellProblem(exercise, number, "timeout", str(running.error()))
        return _cell_error(error, filename, exercise, number, notebook)
    finally:
        leftover = _stop_leftover_queries()
    if leftover:
        return CellProblem(exercise, number, "query", leftover)
    return None


def _cell_error(
    error: BaseException,
    filename: str,
    exercise: str | None,
    number: int,
    notebook: Path | None = None,
) -> CellProblem:
    """The problem for a cell of ``notebook`` that raised ``error``."""
    if isinstance(error, KeyboardInterrupt):
        raise error
    reference = missing_reference(error, notebook)
    if reference is not None:
        # The course's cell loads the course's reference: not the learner's code.
        return CellProblem(
            exercise, number, "reference", reference_sentence(reference, "This lab's checks")
        )
    if isinstance(error, NotImplementedError) and NOT_DONE_PATTERN.match(str(error)):
        return CellProblem(exercise, number, "not-done", str(error))
    if isinstance(error, NotImplementedError):
        return CellProblem(exercise, number, "error", describe_error(error, filename))
    if isinstance(error, SystemExit):
        call = f"sys.exit({error.code!r})" if error.code is not None else "sys.exit()"
        where = describe_error(error, filename).partition(" (")[2].rstrip(")")
        return CellProblem(exercise, number, "exit", call + (f" ({where})" if where else ""))
    return CellProblem(exercise, number, "error", describe_error(error, "<"))


def _stop_leftover_queries() -> str:
    """Stop the streaming queries a cell left running; describe them ("" when none)."""
    if "pyspark" not in sys.modules:
        return ""
    from pyspark.sql import SparkSession

    try:
        # The public way, which also finds a Spark Connect session.
        session = SparkSession.getActiveSession()
        if session is None:
            return ""
        active = list(session.streams.active)
    except Exception:  # a session whose JVM is gone has no queries to stop
        return ""
    names = []
    for query in active:
        names.append(f"query {query.name!r}" if query.name else f"query {query.id}")
        try:
            query.stop()
        except Exception:  # already stopping; the check's fixture stops what is left
            pass
    return ", ".join(names)
