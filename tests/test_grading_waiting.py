"""While a grading runs, the learner sees what it waits on: in the terminal and under %check."""

from __future__ import annotations

import io
import sys

from streamlab.grading import magic, waiting
from streamlab.grading.supervisor import Progress, check_in_words


def test_the_terminal_says_once_that_the_grader_starts_then_what_waits_long():
    out = io.StringIO()
    show = waiting.TerminalProgress(out)
    check = dict(check=3, checks=12, exercise="2.8", name="your test passes")
    for progress in [
        Progress("start", 0.0),
        Progress("start", 16.0),
        Progress("call", 1.0, **check),
        Progress("call", 14.0, **check),
        Progress("call", 15.2, **check),
        Progress("call", 30.0, **check),
        Progress("call", 45.3, **check),
        Progress("teardown", 2.0, **check),
    ]:
        show(progress)
    assert out.getvalue().splitlines() == [
        "Starting the grader ...",
        "  ... Starting the grader ... 16 s",
        "  ... check 3 of 12 (2.8, your test passes): 15 s",
        "  ... check 3 of 12 (2.8, your test passes): 45 s",
    ]
    assert check_in_words("checks/lab_02/test_2_8.py::test_your_test_passes_a_right[p1]") == (
        "your test passes a right"
    )


def test_check_shows_what_the_grader_waits_on_in_place():
    said = [
        Progress("start", 0.4),
        Progress("call", 16.0, 1, 2, "2.8", "your test passes a right final counts"),
    ]
    script = (
        "import time\n"
        "from streamlab.grading import waiting\n"
        "from streamlab.grading.supervisor import Progress\n"
        f"for p in {said!r}:\n"
        "    waiting.json_progress(p)\n"
        "    time.sleep(0.6)\n"
        "print('the table')\n"
    )
    shown: list[Progress] = []
    result = magic._grade([sys.executable, "-c", script], on_progress=shown.append)
    assert result.stdout == "the table\n"
    assert [p.line() for p in shown] == [
        "Starting the grader ... 0 s",
        "check 1 of 2 (2.8, your test passes a right final counts): 16 s",
    ]

    class Handle:
        def __init__(self) -> None:
            self.shown: list[str] = []

        def update(self, data: dict, raw: bool = False) -> None:
            self.shown.append(data["text/plain"])

    handle = Handle()
    for progress in shown:
        magic._shown_in(handle, "2.8")(progress)
    assert (
        handle.shown[-1]
        == "Checking 2.8: check 1 of 2 (2.8, your test passes a right final counts): 16 s"
    )


def test_a_checks_setup_goes_on_under_its_own_exercise_after_the_notebooks_cells_ran():
    # Preparing 0.2's check runs the notebook's cells, 0.3's last: once they are done, the
    # learner reads (and a setup that runs out of time blames) 0.2's check, not 0.3.
    from streamlab.grading import supervisor
    from streamlab.grading.events import EventKind

    seen: list[Progress] = []
    check = "checks/lab_00/test_0_2.py::test_run_once_reads_every_heartbeat"
    run = supervisor._Run(
        supervisor.Outcome(), supervisor._Plan(), cell_limit=60.0, cap=None, on_progress=seen.append
    )
    run.collected = [check]
    where = {"lab": "00", "unit": "00"}
    for event in [
        {"event": EventKind.PHASE, "phase": "setup", "exercise": "0.2", "check": check, **where},
        {"event": EventKind.CELL, "exercise": "0.1", "cell": 3, "line": "def ...", **where},
        {"event": EventKind.CELL, "exercise": "0.3", "cell": 9, "line": "PREDICTED ...", **where},
        {"event": EventKind.CELL, "cell": 0, **where},
    ]:
        supervisor._follow(event, run)
    run.tell_progress(starting=False)
    assert run.activity.exercise == "0.2"
    assert seen[-1].line().startswith("check 1 of 1 (0.2, ")
