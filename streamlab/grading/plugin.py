"""The pytest plugin behind ``nox -s check``.

Checks live in ``checks/test_lab<ID>.py`` and are plain pytest tests marked with the
exercise they grade::

    from streamlab.grading import exercise

    @exercise("0.1")
    def test_provider_is_rocksdb(nb):
        conf = nb.build_session_config(2)
        assert conf[...] == ..., "a sentence the learner can act on"

Fixtures: ``nb`` (the lab's graded cells, loaded by :mod:`streamlab.grading.loader` from
the folder given by ``--notebooks``), ``spark`` (the shared session; the test's queries are
stopped afterwards) and ``checkpoint_dir`` (a fresh folder per test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamlab import registry
from streamlab.grading.loader import LoadedNotebook, load_notebook
from streamlab.grading.timeout import time_limit
from streamlab.grading.verdict import CellFailed, Verdict, verdict_for
from streamlab.paths import REPO_ROOT
from streamlab.spark_fixtures import checkpoint_dir, pytest_unconfigure, spark  # noqa: F401

#: Time limit of one check unless its marker says otherwise.
DEFAULT_TIMEOUT = 30.0

_LAB_FILE = re.compile(r"test_lab(\d+)\.py$")


@dataclass(frozen=True)
class CheckResult:
    lab: str
    exercise: str
    check: str
    verdict: Verdict


def exercise(exercise_id: str, *, timeout: float = DEFAULT_TIMEOUT):
    """Mark a check as grading ``exercise_id``, with a time limit in seconds."""
    return pytest.mark.exercise(exercise_id, timeout=timeout)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamlab", "course grading")
    group.addoption("--notebooks", default="labs",
                    help="folder whose notebooks are graded: labs (default) or solutions")
    group.addoption("--max-check-seconds", type=float, default=None,
                    help="cap every check's time limit (for testing the grader itself)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exercise(id, timeout): the exercise a check grades")
    config.stash[_results_key] = []
    config.stash[_notebooks_key] = {}


_results_key = pytest.StashKey[list[CheckResult]]()
_notebooks_key = pytest.StashKey[dict[str, LoadedNotebook]]()


def results(config: pytest.Config) -> list[CheckResult]:
    """Every check's verdict so far, in run order."""
    return config.stash[_results_key]


def lab_of(item: pytest.Item) -> str:
    match = _LAB_FILE.search(str(item.path))
    if not match:
        raise pytest.UsageError(f"{item.path.name}: check files are named test_lab<ID>.py")
    return match.group(1)


def _exercise_marker(item: pytest.Item) -> pytest.Mark:
    marker = item.get_closest_marker("exercise")
    if marker is None:
        raise pytest.UsageError(f"{item.nodeid} has no @exercise(...) marker")
    return marker


def notebooks_dir(config: pytest.Config) -> Path:
    folder = Path(config.getoption("notebooks"))
    return folder if folder.is_absolute() else REPO_ROOT / folder


def _notebook_for(item: pytest.Item) -> LoadedNotebook:
    lab = registry.lab(lab_of(item))
    cache = item.config.stash[_notebooks_key]
    if lab.id not in cache:
        cache[lab.id] = load_notebook(lab.notebook(notebooks_dir(item.config)))
    return cache[lab.id]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a check whose cells did not run stops here, without starting Spark.
    problem = _notebook_for(item).problem_for(_exercise_marker(item).args[0])
    if problem:
        raise CellFailed(problem)


@pytest.fixture
def nb(request: pytest.FixtureRequest) -> LoadedNotebook:
    """The graded cells of this check's lab notebook, loaded once per run."""
    return _notebook_for(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    limit = _exercise_marker(item).kwargs.get("timeout", DEFAULT_TIMEOUT)
    cap = item.config.getoption("max_check_seconds")
    with time_limit(min(limit, cap) if cap else limit):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    failed_setup = call.when == "setup" and call.excinfo is not None
    if call.when == "call" or failed_setup:
        error = call.excinfo.value if call.excinfo else None
        exercise_id = _exercise_marker(item).args[0]
        verdict = verdict_for(error, exercise_id)
        results(item.config).append(CheckResult(lab_of(item), exercise_id, item.name, verdict))
        if verdict.message:
            report.sections.append(("grade", verdict.message))
    return report
