"""The pytest plugin behind ``nox -s check``.

Checks live in ``checks/test_<ID>_<slug>.py`` (``test_04_transform_with_state.py``) and are plain pytest tests marked with the
exercise they grade::

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
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from streamlab.grading import events
from streamlab.grading.events import EventKind
from streamlab.grading.loader import CellProblem, LoadedNotebook, NotebookUnreadable, load_notebook
from streamlab.grading.timeout import CELL_TIME_LIMIT, DEFAULT_TIMEOUT, time_limit
from streamlab.grading.verdict import FAILED, PASSED, CellFailed, CheckResult, verdict_for
from streamlab.paths import REPO_ROOT
from streamlab.spark_fixtures import checkpoint_dir, pytest_unconfigure, spark  # noqa: F401
from streamlab.tooling import registry

_LAB_FILE = re.compile(r"test_(\d+)_\w+\.py$")


def exercise(exercise_id: str, *, timeout: float = DEFAULT_TIMEOUT, hint: str = ""):
    """Mark a check as grading ``exercise_id``, with a time limit in seconds.

    ``hint`` is shown when this check fails, instead of the exercise's first hint: say what
    the failure usually means, never the solution's code.
    """
    return pytest.mark.exercise(exercise_id, timeout=timeout, hint=hint)


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
    group.addoption(
        "--variants",
        default=None,
        help="JSON: variants of the lab's notebook to grade, each against its exercise's "
        "checks, fast checks first, stopping at a variant's first failing check "
        "(nox -s mutants)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exercise(id, timeout): the exercise a check grades")
    config.stash[_results_key] = []
    config.stash[_notebooks_key] = {}


_results_key = pytest.StashKey[list[CheckResult]]()
_caught_key = pytest.StashKey[set[str]]()
_notebooks_key = pytest.StashKey[dict[str, LoadedNotebook | NotebookUnreadable]]()


def _plan(config: pytest.Config) -> dict:
    """What earlier children did: checks graded, exercises given up, cells not to run again."""
    path = config.getoption("grading_plan")
    return json.loads(Path(path).read_text()) if path else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("exercise"))
    plan = _plan(config)
    done, given_up = set(plan.get("done", [])), set(plan.get("given_up", []))
    if config.getoption("variants"):
        items[:] = _variant_items(
            config, [i for i in items if not wanted or _exercise_of(i) in wanted]
        )
    keep, drop = [], []
    for item in items:
        exercise_id = _exercise_of(item)
        skipped = (
            (wanted and exercise_id not in wanted)
            or item.nodeid in done
            or f"{unit_of(item)}:{exercise_id}" in given_up
        )
        (drop if skipped else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


_unit_key = pytest.StashKey[dict]()


def _variant_items(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """A copy of each check of a variant's exercise, per variant, checks without Spark first."""
    variants = json.loads(Path(config.getoption("variants")).read_text())
    by_exercise: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_exercise.setdefault(_exercise_of(item), []).append(item)
    for checks in by_exercise.values():
        checks.sort(key=lambda item: "spark" in getattr(item, "fixturenames", ()))
    copies = []
    for variant in variants:
        for item in by_exercise.get(variant["exercise"], []):
            copy = pytest.Function.from_parent(
                item.parent,
                name=f"{item.name}@{variant['unit']}",
                callspec=getattr(item, "callspec", None),
                callobj=item.obj,
                fixtureinfo=item._fixtureinfo,
                originalname=item.originalname,
            )
            copy.stash[_unit_key] = variant
            copies.append(copy)
    return copies


def results(config: pytest.Config) -> list[CheckResult]:
    """Every check's verdict so far, in run order."""
    return config.stash[_results_key]


def lab_of(item: pytest.Item) -> str:
    match = _LAB_FILE.search(str(item.path))
    if not match:
        raise pytest.UsageError(f"{item.path.name}: check files are named test_<ID>_<slug>.py")
    return match.group(1)


def unit_of(item: pytest.Item) -> str:
    """What a check grades: its lab (``04``), or a variant of its solution (``m12``, nox -s mutants)."""
    variant = item.stash.get(_unit_key, None)
    return variant["unit"] if variant else lab_of(item)


def _exercise_of(item: pytest.Item) -> str:
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
    variant = item.stash.get(_unit_key, None)
    folder = Path(variant["folder"]) if variant else notebooks_dir(item.config)
    return registry.lab(lab_of(item)).notebook(folder)


def _notebook_for(item: pytest.Item) -> LoadedNotebook:
    lab = registry.lab(lab_of(item))
    unit = unit_of(item)
    variant = item.stash.get(_unit_key, None)
    cache = item.config.stash[_notebooks_key]
    if unit not in cache:
        if variant:
            cache.clear()  # one variant at a time: the ones before it are graded
        known = _plan(item.config).get("cells", {}).get(unit, {})
        skip = {int(n): CellProblem(**fields) for n, fields in known.items()}

        def on_cell(exercise_id: str | None, number: int, line: str) -> None:
            events.emit(EventKind.CELL, lab=unit, exercise=exercise_id, cell=number, line=line)

        try:
            cache[unit] = load_notebook(
                graded_notebook(item),
                expected=[e.id for e in lab.exercises],
                skip=skip,
                on_cell=on_cell,
                cell_time_limit=item.config.getoption("max_check_seconds") or CELL_TIME_LIMIT,
            )
        except NotebookUnreadable as error:
            cache[unit] = error
            events.emit(EventKind.LAB_ERROR, lab=unit, message=str(error))
        else:
            events.emit(
                EventKind.CELLS,
                lab=unit,
                cells=cache[unit].cells,
                first_lines=cache[unit].first_lines,
                fingerprint=cache[unit].fingerprint,
            )
    loaded = cache[unit]
    if isinstance(loaded, NotebookUnreadable):
        raise loaded
    return loaded


class _Caught(Exception):
    """A variant already failed one of its checks: its other checks need not run."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a check whose cells did not run stops here, without starting Spark.
    exercise_id = _exercise_of(item)
    if item.stash.get(_unit_key, None):
        caught = item.config.stash.setdefault(_caught_key, set())
        if unit_of(item) in caught | set(_plan(item.config).get("failed", [])):
            raise _Caught
    events.emit(
        EventKind.PHASE, lab=unit_of(item), exercise=exercise_id, check=item.nodeid, phase="setup"
    )
    problem = _notebook_for(item).problem_for(exercise_id)
    if problem:
        raise CellFailed(problem)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    events.emit(
        EventKind.PHASE,
        lab=unit_of(item),
        exercise=_exercise_of(item),
        check=item.nodeid,
        phase="teardown",
    )


@pytest.fixture
def nb(request: pytest.FixtureRequest) -> LoadedNotebook:
    """The graded cells of this check's lab notebook, loaded once per run."""
    return _notebook_for(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    marker = _exercise_marker(item)
    limit = _cap(item.config, marker.kwargs.get("timeout", DEFAULT_TIMEOUT))
    events.emit(
        EventKind.PHASE,
        lab=unit_of(item),
        exercise=marker.args[0],
        check=item.nodeid,
        phase="call",
        limit=limit,
    )
    with time_limit(limit) as running:
        try:
            return (yield)
        except BaseException:
            if running.expired:
                # A library (py4j) caught the timeout and raised its own error instead.
                raise running.error() from None
            raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    failed_setup = call.when == "setup" and call.excinfo is not None
    if failed_setup and call.excinfo.errisinstance(_Caught):
        return report
    if call.when == "call" or failed_setup:
        error = call.excinfo.value if call.excinfo else None
        exercise_id = _exercise_of(item)
        verdict = verdict_for(error, exercise_id, graded_notebook(item))
        check_hint = _exercise_marker(item).kwargs.get("hint", "")
        if verdict.status == FAILED and check_hint and not verdict.hint:
            verdict = dataclasses.replace(verdict, hint=check_hint)
        unit = unit_of(item)
        results(item.config).append(CheckResult(unit, exercise_id, item.name, verdict))
        if verdict.status != PASSED and item.stash.get(_unit_key, None):
            item.config.stash.setdefault(_caught_key, set()).add(unit)
        events.emit(
            EventKind.RESULT,
            lab=unit,
            exercise=exercise_id,
            check=item.nodeid,
            status=verdict.status,
            message=verdict.message,
            expected=verdict.expected,
            actual=verdict.actual,
            hint=verdict.hint,
            diff=verdict.diff,
        )
        if verdict.message:
            report.sections.append(("grade", verdict.message))
    return report
