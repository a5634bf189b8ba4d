"""A grading ends within the limit its verdict states, whatever the learner's code does.

The case: exercise 2.8's test waits on a stream that never ends (no ``availableNow``, then
``awaitTermination()``), and the check that runs it catches every exception its test raises.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import nbformat

from streamlab.course import registry
from streamlab.grading import supervisor, waiting
from streamlab.paths import REPO_ROOT

LAB02 = registry.lab("02")


def _lab02_with(folder: Path, exercise: str, change) -> Path:
    """Lab 02's solution with the source of ``exercise``'s cell passed through ``change``."""
    notebook = nbformat.read(LAB02.notebook(REPO_ROOT / "solutions"), as_version=4)
    cell = next(c for c in notebook.cells if f"exercise-{exercise}" in c.metadata.get("tags", []))
    cell.source = change(cell.source)
    target = LAB02.notebook(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def test_a_learner_test_that_waits_on_an_endless_stream_ends_within_the_limit(tmp_path):
    def endless(source: str) -> str:
        assert ".trigger(availableNow=True)" in source
        return source.replace(".trigger(availableNow=True)", "")

    _lab02_with(tmp_path / "nb", "2.8", endless)
    limit = 20
    seen: list[supervisor.Progress] = []
    printed = io.StringIO()
    terminal = waiting.TerminalProgress(printed)

    def on_progress(progress: supervisor.Progress) -> None:
        seen.append(progress)
        terminal(progress)

    outcome = supervisor.run(
        [LAB02],
        str(tmp_path / "nb"),
        exercises=["2.8"],
        max_check_seconds=limit,
        log_path=tmp_path / "grade.log",
        on_progress=on_progress,
    )
    (first, *others) = [r for r in outcome.results if r.exercise == "2.8"]
    assert first.verdict.status == "failed"
    assert f"did not finish within {limit} s" in first.verdict.message, first.verdict.message
    assert "availableNow" in first.verdict.hint  # aimed at the hang, not the exercise's tier 1
    # The exercise's other check would only wait on the same stream: it is not run.
    assert others == [], [(r.check, r.verdict.message) for r in others]
    # The time spent on 2.8 once its checks started: the limit, and a few seconds to stop.
    spent = sum(outcome.timings.get(p, 0.0) for p in ("checks", "teardown", "between", "end"))
    assert spent <= limit + 15, outcome.timings
    # Meanwhile the learner saw what it waited on: the grader starting, then the check, which
    # one of how many, and for how long, in lines (no spinner: this output is no tty).
    assert seen[0].doing == "start"
    waited = [p for p in seen if p.doing == "call" and p.seconds >= waiting.QUIET_FOR]
    assert waited and (waited[0].check, waited[0].checks) == (1, 2), seen[-5:]
    lines = printed.getvalue().splitlines()
    assert lines[0] == "Starting the grader ..."
    assert any(
        re.fullmatch(
            r"  \.\.\. check 1 of 2 \(2\.8, your test passes a right final counts\): 1\d s", line
        )
        for line in lines
    ), lines
    assert "\r" not in printed.getvalue()


def test_a_limit_caught_and_ignored_fires_again():
    import time

    from streamlab.grading.timeout import CheckTimeout, time_limit

    began, caught = time.monotonic(), 0
    with time_limit(0.2) as running:
        for _ in range(3):
            try:
                time.sleep(30)
            except Exception as error:  # a learner's catch-all: the limit comes back
                caught += isinstance(error, CheckTimeout)
    assert running.expired and caught == 3 and time.monotonic() - began < 5
