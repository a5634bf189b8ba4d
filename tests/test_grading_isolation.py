"""The grader survives whatever a learner's cell does.

Each test drives the real grader (``python -m streamlab.grading``) on lab 00's solved
notebook with mistakes put into its cells, and checks that the run ends in bounded time,
exits non-zero, replaces ``grade.json``, fails the exercise at fault with a sentence naming
its cell, and grades every other exercise as it should be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from grader_runs import run_grader

from streamlab.course import registry
from streamlab.course.notebooks import cell_name, first_line
from streamlab.grading import supervisor
from streamlab.paths import REPO_ROOT

LAB = registry.lab("00")
STALE = {
    "status": "graded",
    "labs": [{"id": "00", "exercises": [{"id": "0.1", "status": "passed"}]}],
}


def _notebook(folder: Path, **changes: str) -> Path:
    """Lab 00's solution with ``exercise_0_1="..."``-style cell sources appended or replaced."""
    notebook = nbformat.read(LAB.notebook(REPO_ROOT / "solutions"), as_version=4)
    for key, source in changes.items():
        tag = "exercise-" + key.removeprefix("exercise_").replace("_", ".")
        cell = next(c for c in notebook.cells if tag in c.metadata.get("tags", []))
        cell.source = source.replace("{solution}", cell.source)
    target = LAB.notebook(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def _named(path: Path, exercise: str) -> str:
    """The exercise's cell as a learner finds it in JupyterLab: by tag and first line."""
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if f"exercise-{exercise}" in c.metadata.get("tags", []))
    return cell_name(exercise, first_line(cell.source))


def _cell_of(path: Path, exercise: str) -> int:
    notebook = nbformat.read(path, as_version=4)
    return next(
        n
        for n, c in enumerate(notebook.cells, start=1)
        if f"exercise-{exercise}" in c.metadata.get("tags", [])
    )


def _grade(folder: Path, tmp_path: Path, limit: float) -> tuple[subprocess.CompletedProcess, dict]:
    grade_json = tmp_path / "build" / "grade.json"
    grade_json.parent.mkdir(exist_ok=True)
    grade_json.write_text(json.dumps(STALE))
    out = run_grader(
        folder, "00", json_path=grade_json, extra=("--max-check-seconds", str(limit)), timeout=300
    )
    graded = json.loads(grade_json.read_text())
    assert graded["status"] == "graded" and graded != STALE
    assert "Traceback" not in out.stdout + out.stderr
    return out, graded


def _exercises(graded: dict) -> dict[str, dict]:
    return {e["id"]: e for e in graded["labs"][0]["exercises"]}


def test_os_exit_in_a_cell_and_a_loop_inside_c_fail_only_their_exercises(tmp_path):
    path = _notebook(
        tmp_path / "nb",
        exercise_0_1="{solution}\n\nimport os\nos._exit(0)\n",
        exercise_0_3=(
            "import itertools\n\n\ndef summarise_progress(progress):\n"
            "    return str(sum(itertools.count()))\n"
        ),
    )
    out, graded = _grade(tmp_path / "nb", tmp_path, limit=15)
    exercises = _exercises(graded)
    assert out.returncode == 1, out.stdout
    crashed = exercises["0.1"]
    assert crashed["status"] == "failed"
    assert f"Running {_named(path, '0.1')} ended the process" in crashed["message"]
    assert "ended the process running your code (exit code 0)" in crashed["message"]
    assert "os._exit()" in crashed["message"]
    # The Spark exercise in between is graded as usual.
    assert exercises["0.2"]["status"] == "passed", exercises["0.2"]["message"]
    looped = exercises["0.3"]
    assert looped["status"] == "failed"
    assert "did not finish within 15 s and was stopped" in looped["message"]
    assert f"(your code is in {_named(path, '0.3')})" in looped["message"]


def test_a_grading_ends_with_its_last_verdict_not_with_its_child(tmp_path):
    # Once the checks have run, the child has only to stop Spark and exit: the grading reports
    # its verdicts at once and ends the child, even one whose exit would never come (here a
    # learner's exit hook that waits an hour).
    _notebook(
        tmp_path / "nb",
        exercise_0_1="{solution}\n\nimport atexit\nimport time\n\natexit.register(time.sleep, 3600)\n",
    )
    grade_json = tmp_path / "build" / "grade.json"
    grade_json.parent.mkdir()
    # Well within the grader's limit for a child that has said it is done (IDLE_LIMIT).
    out = run_grader(
        tmp_path / "nb",
        "00",
        json_path=grade_json,
        extra=("--exercise", "0.1"),
        timeout=supervisor.IDLE_LIMIT / 2,
    )
    graded = json.loads(grade_json.read_text())
    assert out.returncode == 0, out.stdout + out.stderr
    assert _exercises(graded)["0.1"]["status"] == "passed"
    assert graded["timings"]["children"] == 1


def test_an_exercise_whose_check_was_stopped_has_its_other_checks_skipped(tmp_path):
    # Both checks of 0.3 would loop in C: once one is stopped, the other is not run.
    _notebook(
        tmp_path / "nb",
        exercise_0_3=(
            "import itertools\n\n\ndef summarise_progress(progress):\n"
            "    return str(sum(itertools.count()))\n\n\n"
            "def __getattr__(name):\n"
            "    if name == 'AFTER_THE_CRASH':\n"
            "        return sum(itertools.count())\n"
            "    raise AttributeError(name)\n"
        ),
    )
    outcome = supervisor.run(
        [LAB],
        str(tmp_path / "nb"),
        exercises=["0.3"],
        max_check_seconds=10,
        log_path=tmp_path / "grade.log",
    )
    assert [(r.exercise, str(r.verdict.status)) for r in outcome.results] == [("0.3", "failed")]
    assert "did not finish within 10 s and was stopped" in outcome.results[0].verdict.message


def test_sys_exit_and_a_leftover_query_are_blamed_on_their_own_cells(tmp_path):
    path = _notebook(
        tmp_path / "nb",
        exercise_0_1="import sys\n{solution}\nsys.exit(1)\n",
        exercise_0_3=(
            "{solution}\n\nfrom streamlab.session import spark_session\n"
            "_spark = spark_session('local[2]', conf={'spark.sql.shuffle.partitions': '2'})\n"
            "_query = (_spark.readStream.format('rate').load().writeStream"
            ".format('memory').queryName('left_running').start())\n"
        ),
    )
    # Starting Spark inside a cell takes its time on a loaded machine: a generous limit.
    out, graded = _grade(tmp_path / "nb", tmp_path, limit=90)
    exercises = _exercises(graded)
    assert out.returncode == 1, out.stdout
    exited = exercises["0.1"]
    assert exited["status"] == "failed" and "sys.exit(1)" in exited["message"]
    assert exited["message"].startswith(f"Running {_named(path, '0.1')} ended the program")
    # The query started by 0.3's cell is stopped before 0.2 is checked, and blamed on 0.3.
    assert exercises["0.2"]["status"] == "passed", exercises["0.2"]["message"]
    leftover = exercises["0.3"]
    assert leftover["status"] == "failed"
    assert "left a streaming query running (query 'left_running')" in leftover["message"]
    assert leftover["message"].startswith(f"Running {_named(path, '0.3')} left a streaming")


def test_cell_level_loops_and_a_duplicated_tag(tmp_path):
    path = _notebook(
        tmp_path / "nb",
        exercise_0_1="{solution}\nwhile True:\n    pass\n",
        exercise_0_2="import itertools\n{solution}\nsum(itertools.count())\n",
    )
    # The learner copies 0.3's cell: two cells now carry its tag.
    notebook = nbformat.read(path, as_version=4)
    first = _cell_of(path, "0.3")
    copy = nbformat.v4.new_code_cell(
        'def summarise_progress(progress):\n    raise NotImplementedError("exercise 0.3 is not done yet")\n',
        metadata={"tags": ["exercise-0.3"]},
    )
    notebook.cells.insert(first + 1, copy)
    nbformat.write(notebook, path)
    out, graded = _grade(tmp_path / "nb", tmp_path, limit=3)
    exercises = _exercises(graded)
    assert out.returncode == 1, out.stdout
    python_loop = exercises["0.1"]["message"]
    assert exercises["0.1"]["status"] == "failed" and "did not finish within 3 s" in python_loop
    assert python_loop.startswith(f"Running {_named(path, '0.1')} did not finish")
    c_loop = exercises["0.2"]["message"]
    assert exercises["0.2"]["status"] == "failed"
    assert f"{_named(path, '0.2')} did not finish within 3 s" in c_loop
    duplicated = exercises["0.3"]
    assert duplicated["status"] == "failed"
    assert duplicated["message"].startswith(
        "Two cells are tagged exercise-0.3, starting "
        "`def summarise_progress(progress: dict) -> str:` and "
        "`def summarise_progress(progress):`; keep one"
    )


def test_a_truncated_notebook_is_the_files_fault(tmp_path):
    path = _notebook(tmp_path / "nb")
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    out, graded = _grade(tmp_path / "nb", tmp_path, limit=3)
    assert out.returncode == 1
    lab = graded["labs"][0]
    assert lab["status"] == "error"
    assert f"{path} is not a valid notebook" in lab["message"]
    assert "git checkout" in lab["message"] and "Your code was not run" in lab["message"]
    assert {e["status"] for e in lab["exercises"]} == {"failed"}
    assert "not complete JSON" in lab["message"]
    assert out.stdout.count("Not graded:") == 1 and out.stdout.count("Your code was not") == 1


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_stopping_the_grader_stops_the_learners_code(tmp_path):
    # A front end (watch mode, %check) that stops the grader must not leave the process
    # running the learner's code behind, nor its Spark.
    _notebook(
        tmp_path / "nb", exercise_0_1="import itertools\n{solution}\nsum(itertools.count())\n"
    )
    grader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab.grading",
            "00",
            "--notebooks",
            str(tmp_path / "nb"),
            "--json",
            str(tmp_path / "grade.json"),
            "--max-check-seconds",
            "120",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not _children(grader.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    [child] = _children(grader.pid)
    grader.terminate()
    assert grader.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "zombie" in status.read_text(), "the child outlived the grader"
    assert json.loads((tmp_path / "grade.json").read_text())["status"] == "in-progress"
