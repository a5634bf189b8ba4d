"""A grading's child started ahead of time (streamlab.grading.warm) grades as a cold one does,
and one that is stale is replaced, never used.

Each test runs the real grader (``python -m streamlab.grading``) with warm children on, in a
build folder of its own, so the keeper it talks to is the test's alone; every keeper a test
leaves is ended in its teardown.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from grader_runs import run_grader, warm_grader
from test_grading_isolation import _named, _notebook

from streamlab.deadlines import wait_for
from streamlab.paths import REPO_ROOT


@pytest.fixture
def warm_env(tmp_path):
    """Warm children on, a build folder and a ``sitecustomize`` of the test's own.

    Every Python the grader starts imports ``sitecustomize`` from ``PYTHONPATH``: a file the
    warm child imported before its grading came, as the course's own modules are.
    """
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("SEEN = 1\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        "STREAMLAB_WARM_GRADER": "1",
        "STREAMLAB_BUILD_DIR": str(tmp_path / "build"),
        "PYTHONPATH": path,
        # One child at a time, unless a test says otherwise: each costs a JVM's start.
        "STREAMLAB_WARM_CHILDREN": "1",
    }
    yield env
    warm_grader("stop()", env)


def _log(env) -> str:
    path = Path(env["STREAMLAB_BUILD_DIR"]) / "logs" / "warm-grader.log"
    return path.read_text() if path.exists() else ""


def _ready(env, count: int) -> None:
    """Wait until ``count`` warm children have said they are ready in the build folder."""
    wait_for(
        lambda: _log(env).count(" ready after ") >= count,
        within=300,
        what=f"warm grading child number {count} to be ready (log: {_log(env)[-500:]!r})",
    )


def _grade(env, notebooks, tmp_path, *extra) -> dict:
    grade_json = Path(env["STREAMLAB_BUILD_DIR"]) / "grade.json"
    out = run_grader(notebooks, "00", json_path=grade_json, extra=extra, env=env, timeout=600)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return json.loads(grade_json.read_text())


def _exercises(graded: dict) -> dict[str, dict]:
    return {e["id"]: e for e in graded["labs"][0]["exercises"]}


def test_a_warm_child_grades_as_a_cold_one_and_a_stale_one_is_replaced(warm_env, tmp_path):
    # One story, since every warm child costs a JVM's start: a warm child grades and dies of
    # the learner's os._exit(0); a file it imported changes; a setting differs.
    path = _notebook(tmp_path / "nb", exercise_0_1="{solution}\n\nimport os\nos._exit(0)\n")
    warm_grader("start()", warm_env)
    _ready(warm_env, 1)
    assert warm_grader("readiness()", warm_env) == "ready"
    graded = _grade(warm_env, tmp_path / "nb", tmp_path)
    exercises = _exercises(graded)
    # The warm child ran 0.1's cell and died of it: its keeper passed on the exit status, and
    # a child started from cold graded the rest, Spark's exercise included.
    assert graded["timings"]["warm"] == 1 and graded["timings"]["children"] == 2
    assert "ended the process running your code (exit code 0)" in exercises["0.1"]["message"]
    assert f"Running {_named(path, '0.1')} ended the process" in exercises["0.1"]["message"]
    assert [exercises[e]["status"] for e in ("0.2", "0.3")] == ["passed", "passed"]

    # The grading started the next child. A file it imported changes before it is used: the
    # grading starts its child from cold, and says why in the log.
    _ready(warm_env, 2)
    site = Path(warm_env["PYTHONPATH"].split(os.pathsep)[0]) / "sitecustomize.py"
    site.write_text("SEEN = 2\n")
    graded = _grade(warm_env, REPO_ROOT / "solutions", tmp_path, "--exercise", "0.1")
    assert graded["timings"]["warm"] == 0
    assert _exercises(graded)["0.1"]["status"] == "passed"
    assert f"{site} changed since the child started" in _log(warm_env)

    # The child that grading started is fresh, but a setting of the next grading differs.
    _ready(warm_env, 3)
    other = {**warm_env, "STREAMLAB_SETTING_FOR_A_TEST": "1"}
    graded = _grade(other, REPO_ROOT / "solutions", tmp_path, "--exercise", "0.1")
    assert graded["timings"]["warm"] == 0
    assert _exercises(graded)["0.1"]["status"] == "passed"
    assert "the grading's settings differ: STREAMLAB_SETTING_FOR_A_TEST" in _log(warm_env)


def test_a_grading_that_comes_while_the_child_warms_up_takes_it_at_the_next_step(
    warm_env, tmp_path
):
    # A regrade right after a verdict finds the next child still warming up, its keeper
    # perhaps not listening yet: it takes that child as it is, never behind one started from
    # cold, instead of waiting for its whole warm-up or starting a second JVM beside it.
    warm_grader("start()", warm_env)
    graded = _grade(warm_env, REPO_ROOT / "solutions", tmp_path, "--exercise", "0.2")
    assert graded["timings"]["warm"] == 1
    assert _exercises(graded)["0.2"]["status"] == "passed"
    taken = [line for line in _log(warm_env).splitlines() if "taken by a grading after" in line]
    assert len(taken) == 1 and ", skipping " in taken[0], _log(warm_env)
    assert "a transformWithState query" in taken[0]


def test_a_regrade_right_after_a_verdict_takes_the_child_that_was_ready(warm_env, tmp_path):
    # Two warm children, warmed one after the other: a grading takes a ready one, and the
    # regrade that comes at once, while the child that grading started warms up, takes the
    # other, ready too, instead of the one still warming up.
    env = {**warm_env, "STREAMLAB_WARM_CHILDREN": "2"}
    warm_grader("start()", env)
    _ready(env, 2)
    assert warm_grader("warming()", env) == "False"
    for _ in range(2):
        graded = _grade(env, REPO_ROOT / "solutions", tmp_path, "--exercise", "0.2")
        assert graded["timings"]["warm"] == 1
        assert _exercises(graded)["0.2"]["status"] == "passed"
        # The child the grading started is warming up as the next grading comes.
        assert warm_grader("warming()", env) == "True"
    assert "taken by a grading after" not in _log(env), _log(env)


def test_a_child_warming_up_waits_while_a_grading_runs_and_a_grading_takes_it_waiting(
    warm_env, tmp_path
):
    # A grading holds the course folder's grading lock while it runs: a child warming
    # up beside it waits before each step of its warm-up instead of taking half the two cores
    # from the grading the learner waits for.
    with open(warm_grader("grading_lock_path()", warm_env), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # as a running grading does
        warm_grader("start()", warm_env)
        wait_for(
            lambda: "waits for a grading to end before imports" in _log(warm_env),
            within=60,
            what=f"the warm child to wait for the grading (log: {_log(warm_env)[-500:]!r})",
        )
        # A grading that comes meanwhile takes the waiting child at once: it skips the whole
        # warm-up rather than wait for itself.
        graded = _grade(warm_env, REPO_ROOT / "solutions", tmp_path, "--exercise", "0.1")
        assert graded["timings"]["warm"] == 1
        assert _exercises(graded)["0.1"]["status"] == "passed"
        assert " ready after " not in _log(warm_env), _log(warm_env)
        taken = [s for s in _log(warm_env).splitlines() if "taken by a grading after" in s]
        assert len(taken) == 1 and "skipping imports, the Spark session" in taken[0]
        # The child that grading started waits too, until the grading lock is free.
        wait_for(
            lambda: _log(warm_env).count("waits for a grading to end before imports") == 2,
            within=60,
            what=f"the next warm child to wait (log: {_log(warm_env)[-500:]!r})",
        )
        assert warm_grader("readiness()", warm_env) == "warming"
    _ready(warm_env, 1)


def test_waiting_for_gradings_ends_when_a_job_comes_or_the_lock_is_free(tmp_path):
    from streamlab.grading import warm

    path = tmp_path / "grading.lock"
    assert not warm._wait_for_gradings(lambda timeout=0.0: False, "imports", path)
    polls = []

    def job_after_three_polls(timeout: float = 0.0) -> bool:
        polls.append(timeout)
        return len(polls) == 3

    with warm.grading(path), warm.grading(path):  # two gradings at once share the lock
        assert warm._wait_for_gradings(job_after_three_polls, "imports", path)
    # It waited on the job's socket, never spinning, and asked three times.
    assert len(polls) == 3 and all(t > 0 for t in polls)
    # Released with the gradings: nothing waits any more.
    assert not warm._wait_for_gradings(job_after_three_polls, "imports", path)
    assert len(polls) == 3


def test_a_grading_holds_the_lock_from_its_start_while_it_looks_for_a_child(tmp_path, monkeypatch):
    # A regrade that comes right after a verdict must not share the cores with the child the
    # last grading started: that child pauses from the moment the grading starts, before the
    # grading has found (or waited for) a child of its own.
    from streamlab.course import registry
    from streamlab.grading import supervisor, warm

    seen = []

    def claim(*args, **kwargs):
        with open(warm.grading_lock_path(), "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen.append("held")
            else:
                seen.append("free")
        return None  # the grading starts its child from cold

    monkeypatch.setattr(warm, "claim", claim)
    outcome = supervisor.run(
        [registry.lab("00")],
        str(REPO_ROOT / "solutions"),
        exercises=["0.1"],
        log_path=tmp_path / "grade.log",
    )
    assert {str(r.verdict.status) for r in outcome.results} == {"passed"}
    assert seen == ["held"]
    # And lets it go with its verdict.
    assert not warm._wait_for_gradings(lambda timeout=0.0: False, "imports")


def test_a_keeper_knows_when_another_took_its_socket_name(tmp_path):
    import socket

    from streamlab.grading import warm

    path = tmp_path / "keeper"
    first = socket.socket(socket.AF_UNIX)
    first.bind(str(path))
    inode = warm._identity(path)
    assert warm._owns(path, inode)
    # A second keeper started at the same moment unlinks the name and binds its own.
    path.unlink()
    second = socket.socket(socket.AF_UNIX)
    second.bind(str(path))
    assert not warm._owns(path, inode)
    # The first keeper, ending, leaves the second one's file alone.
    warm._unlink(path, inode)
    assert path.exists()
    first.close()
    second.close()


def test_stopping_right_after_starting_ends_the_keeper_before_it_listens(warm_env):
    # What the course's teardowns do: start() at the end of a grading, stop() at once.
    pid = warm_grader("start() or int(warm._pid_file(warm.socket_path()).read_text())", warm_env)
    # A JVM takes seconds to start: the child cannot be ready yet, and a grading would wait.
    assert warm_grader("readiness()", warm_env) == "warming"
    assert warm_grader("stop()", warm_env) == "True"

    def gone() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
        except FileNotFoundError:
            return True
        return state == "Z"  # ended, waiting to be reaped by init

    wait_for(gone, within=30, what=f"the keeper {pid} to end")
    assert warm_grader("readiness()", warm_env) == "none"
