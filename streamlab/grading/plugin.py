"""The pytest plugin behind ``nox -s check``.

Checks live in ``checks/lab_<ID>/``, one file an exercise (``lab_04/test_4_1.py``), and are plain
pytest tests marked with the exercise they grade::

    from streamlab.grading import exercise

    @exercise("0.1")
    def test_provider_is_rocksdb(nb):
        conf = nb.build_session_config(2)
        assert conf[...] == ..., "a sentence the learner can act on"

Fixtures: ``nb`` (the lab's graded cells, loaded by :mod:`streamlab.grading.loader` from
the folder given by ``--notebooks``), ``spark`` (the shared session; the test's queries are
stopped afterwards) and ``checkpoint_dir`` (a fresh folder per test).

The plugin runs inside the grading child (:mod:`streamlab.grading.child`): it tells the
supervisor, through :mod:`streamlab.grading.events`, which cell and which check is running
and each verdict as soon as it is known.

Each event and verdict names the check's ``lab`` and its ``unit``, what it graded: the lab
itself, unless a plugin answers ``pytest_grading_unit`` for the check with another notebook
of the lab (:mod:`streamlab.tooling.mutants_plugin`: a variant of its solution).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamlab.course import registry
from streamlab.grading import attempt, events
from streamlab.grading.events import EventKind
from streamlab.grading.loader import CellProblem, LoadedNotebook, NotebookUnreadable, load_notebook
from streamlab.grading.timeout import CELL_TIME_LIMIT, DEFAULT_TIMEOUT, time_limit
from streamlab.grading.verdict import FAILED, Attempt, CellFailed, CheckResult, verdict_for
from streamlab.paths import REPO_ROOT
from streamlab.spark_fixtures import checkpoint_dir, pytest_unconfigure, spark  # noqa: F401


def exercise(exercise_id: str, *, timeout: float = DEFAULT_TIMEOUT, hint: str = "", part: str = ""):
    """Mark a check as grading ``exercise_id``, with a time limit in seconds.

    ``hint`` is shown when this check fails, instead of the exercise's first hint: say what
    the failure usually means, never the solution's code. ``part`` names the part of an
    exercise the check grades when it has more than one: ``"diagnosis"`` for the check of a
    debug exercise's ``DIAGNOSIS_N_M`` (graded as an answer, like a prediction), ``"fix"`` for
    the checks of its fix.
    """
    return pytest.mark.exercise(exercise_id, timeout=timeout, hint=hint, part=part)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamlab", "course grading")
    group.addoption(
        "--notebooks",
        default="labs",
        help="folder whose notebooks are graded: labs (default) or solutions",
    )
    group.addoption(
        "--max-check-seconds",
        type=float,
        default=None,
        help="cap every check's time limit, and set every cell's (for testing the grader itself)",
    )
    group.addoption(
        "--exercise", action="append", default=[], help="grade only this exercise (repeatable)"
    )
    group.addoption(
        "--grading-plan",
        default=None,
        help="JSON: checks already graded and cells not to run again",
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_UnitHooks)


@dataclass(frozen=True)
class GradedUnit:
    """What a check grades when it is not its lab's notebook in ``--notebooks``.

    ``id`` names it in every event and verdict (a variant of the lab's solution: ``m12``);
    ``notebooks`` is the folder that holds the lab's notebook to grade.
    """

    id: str
    notebooks: Path


class _UnitHooks:
    """The hook through which another plugin has a check grade another notebook of its lab."""

    @pytest.hookspec(firstresult=True)
    def pytest_grading_unit(self, item: pytest.Item) -> GradedUnit | None:
        """What ``item`` grades, when not its lab (a plugin's copies of the checks)."""
        return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exercise(id, timeout): the exercise a check grades")
    config.stash[_results_key] = []
    config.stash[_notebooks_key] = {}
    config.stash[_out_of_time_key] = set()


_results_key = pytest.StashKey[list[CheckResult]]()
#: (unit, exercise) whose check ran out of time: its other checks would only wait as long.
_out_of_time_key = pytest.StashKey[set[tuple[str, str]]]()
_notebooks_key = pytest.StashKey[dict[str, LoadedNotebook | NotebookUnreadable]]()


def grading_plan(config: pytest.Config) -> dict:
    """What earlier children did: checks graded, exercises given up, cells not to run again,
    units with a failed check."""
    path = config.getoption("grading_plan")
    return json.loads(Path(path).read_text()) if path else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("exercise"))
    plan = grading_plan(config)
    done, given_up = set(plan.get("done", [])), set(plan.get("given_up", []))
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        exercise_id = exercise_of(item)
        skipped = (
            (wanted and exercise_id not in wanted)
            or item.nodeid in done
            or f"{unit_of(item)}:{exercise_id}" in given_up
        )
        (drop if skipped else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tell the supervisor which checks run, so that it can say which one of how many runs."""
    send_checks_by_value(session.items)
    events.emit(EventKind.COLLECTED, checks=[item.nodeid for item in session.items])


def send_checks_by_value(items: list[pytest.Item]) -> None:
    """Have Spark's Python workers, which cannot import a check file or a lab's story module,
    receive what such a module defines by value: every module loaded from a folder that holds
    a collected check."""
    from pyspark import cloudpickle

    folders = {Path(item.path).parent for item in items}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).parent in folders:
            cloudpickle.register_pickle_by_value(module)


def results(config: pytest.Config) -> list[CheckResult]:
    """Every check's verdict so far, in run order."""
    return config.stash[_results_key]


def lab_of(item: pytest.Item) -> str:
    lab = registry.lab_of_check(item.path)
    if lab is None:
        raise pytest.UsageError(
            f"{item.path.name}: a lab's checks are in checks/lab_<ID>/, one file an exercise"
        )
    return lab


def unit_of(item: pytest.Item) -> str:
    """What a check grades: its lab (``04``), or a variant of its solution (``m12``, nox -s mutants)."""
    unit = item.config.hook.pytest_grading_unit(item=item)
    return unit.id if unit else lab_of(item)


def exercise_of(item: pytest.Item) -> str:
    return _exercise_marker(item).args[0]


def _exercise_marker(item: pytest.Item) -> pytest.Mark:
    marker = item.get_closest_marker("exercise")
    if marker is None:
        raise pytest.UsageError(f"{item.nodeid} has no @exercise(...) marker")
    return marker


def notebooks_dir(config: pytest.Config) -> Path:
    folder = Path(config.getoption("notebooks"))
    return folder if folder.is_absolute() else REPO_ROOT / folder


def _cap(config: pytest.Config, limit: float) -> float:
    cap = config.getoption("max_check_seconds")
    return min(limit, cap) if cap else limit


def graded_notebook(item: pytest.Item) -> Path:
    """The notebook whose cells ``item`` grades: the lab's in --notebooks, or a variant's."""
    unit = item.config.hook.pytest_grading_unit(item=item)
    folder = unit.notebooks if unit else notebooks_dir(item.config)
    return registry.lab(lab_of(item)).notebook(folder)


def _notebook_for(item: pytest.Item) -> LoadedNotebook:
    lab = registry.lab(lab_of(item))
    unit = unit_of(item)
    cache = item.config.stash[_notebooks_key]
    if unit not in cache:
        if unit != lab.id:
            cache.clear()  # one variant at a time: the ones before it are graded
        known = grading_plan(item.config).get("cells", {}).get(unit, {})
        skip = {int(n): CellProblem(**fields) for n, fields in known.items()}

        def on_cell(exercise_id: str | None, number: int, line: str) -> None:
            events.emit(
                EventKind.CELL, lab=lab.id, unit=unit, exercise=exercise_id, cell=number, line=line
            )

        try:
            loaded = load_notebook(
                graded_notebook(item),
                expected=[e.id for e in lab.exercises],
                skip=skip,
                on_cell=on_cell,
                cell_time_limit=item.config.getoption("max_check_seconds") or CELL_TIME_LIMIT,
            )
        except NotebookUnreadable as error:
            cache[unit] = error
            events.emit(EventKind.LAB_ERROR, lab=lab.id, unit=unit, message=str(error))
        else:
            cache[unit] = loaded
            events.emit(
                EventKind.CELLS,
                lab=lab.id,
                unit=unit,
                cells=loaded.cells,
                first_lines=loaded.first_lines,
                fingerprint=loaded.fingerprint,
                uses=loaded.uses,
            )
    found = cache[unit]
    if isinstance(found, NotebookUnreadable):
        raise found
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a check whose cells did not run stops here, without starting Spark.
    exercise_id = exercise_of(item)
    if (unit_of(item), exercise_id) in item.config.stash[_out_of_time_key]:
        pytest.skip(f"another check of exercise {exercise_id} ran out of time")
    _emit_phase(item, "setup")
    problem = _notebook_for(item).problem_for(exercise_id)
    if problem:
        raise CellFailed(problem)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _emit_phase(item, "teardown")


def _emit_phase(item: pytest.Item, phase: str, **fields: float) -> None:
    """Tell the supervisor that ``phase`` (setup, call, teardown) of ``item`` starts."""
    events.emit(
        EventKind.PHASE,
        lab=lab_of(item),
        unit=unit_of(item),
        exercise=exercise_of(item),
        check=item.nodeid,
        phase=phase,
        **fields,
    )


@pytest.fixture
def nb(request: pytest.FixtureRequest) -> LoadedNotebook:
    """The graded cells of this check's lab notebook, loaded once per run."""
    return _notebook_for(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    marker = _exercise_marker(item)
    limit = _cap(item.config, marker.kwargs.get("timeout", DEFAULT_TIMEOUT))
    _emit_phase(item, "call", limit=limit)
    with time_limit(limit) as running:
        try:
            return (yield)
        except BaseException:
            if running.expired:
                item.config.stash[_out_of_time_key].add((unit_of(item), exercise_of(item)))
                # A library (py4j) caught the timeout and raised its own error instead.
                raise running.error() from None
            raise


def _attempt(item: pytest.Item, error: BaseException | None) -> Attempt:
    """What the check made of the learner's try (:mod:`streamlab.grading.attempt`)."""
    loaded = item.config.stash[_notebooks_key].get(unit_of(item))
    return attempt.judged(
        error,
        lab_of(item),
        exercise_of(item),
        _exercise_marker(item).kwargs.get("part", ""),
        loaded if isinstance(loaded, LoadedNotebook) else None,
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        return report  # not graded: the exercise's verdict is its other check's
    failed_setup = call.when == "setup" and call.excinfo is not None
    if call.when == "call" or failed_setup:
        error = call.excinfo.value if call.excinfo else None
        exercise_id = exercise_of(item)
        verdict = verdict_for(error, exercise_id, graded_notebook(item))
        check_hint = _exercise_marker(item).kwargs.get("hint", "")
        if verdict.status == FAILED and check_hint and not verdict.hint:
            verdict = dataclasses.replace(verdict, hint=check_hint)
        lab, unit = lab_of(item), unit_of(item)
        tried = _attempt(item, error)
        part = _exercise_marker(item).kwargs.get("part", "")
        results(item.config).append(
            CheckResult(lab, exercise_id, item.name, verdict, unit, part, attempt=tried)
        )
        events.emit(
            EventKind.RESULT,
            lab=lab,
            unit=unit,
            exercise=exercise_id,
            check=item.nodeid,
            status=verdict.status,
            message=verdict.message,
            expected=verdict.expected,
            actual=verdict.actual,
            hint=verdict.hint,
            diff=verdict.diff,
            hintless=verdict.hintless,
            cause=verdict.cause,
            part=part,
            attempt=dataclasses.asdict(tried),
        )
        if verdict.message:
            report.sections.append(("grade", verdict.message))
    return report
