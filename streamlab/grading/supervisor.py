"""Runs the checks in a child process and keeps a hard wall-clock limit on everything in it.

The child (:mod:`streamlab.grading.child`) announces each graded cell and each phase of each
check before it starts (:mod:`streamlab.grading.events`). When the announced thing outlives
its limit, the supervisor kills the child's whole process group (its Spark JVM and Python
workers included): a loop inside C, a deadlock or a hung call into the JVM ends like any
other. When the child dies (``os._exit``, a signal), the announced cell or check is blamed.
Either way the supervisor starts a fresh child that skips what is already graded and the
cell that killed its predecessor, so every other exercise is still graded.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streamlab import processes
from streamlab.grading import warm
from streamlab.grading.events import FD_VARIABLE, EventKind, lab_of_check
from streamlab.grading.timeout import CELL_TIME_LIMIT, DEFAULT_TIMEOUT
from streamlab.grading.verdict import FAILED, CheckResult, Status, Verdict
from streamlab.tooling.notebooks import cell_name
from streamlab.tooling.registry import Lab

#: Extra seconds past a limit before the child is killed: the child's own, gentler limit
#: (which keeps the Spark session alive) fires first whenever Python can still run.
GRACE = 3.0
#: A check's setup may start the Spark session, which takes long on a loaded machine.
SETUP_LIMIT = 180.0
#: Stopping a check's queries and jobs.
TEARDOWN_LIMIT = 60.0
#: Anything the course itself does between checks (starting pytest, stopping Spark).
IDLE_LIMIT = 180.0
#: Where a bug in the course is reported.
REPORT_BUGS = (
    "a bug in the course, not in your code: please report it on the course's "
    "issue tracker with build/grade.log attached"
)


@dataclass
class Outcome:
    """What the children found: every verdict, and what could not be graded."""

    results: list[CheckResult] = field(default_factory=list)
    lab_errors: dict[str, str] = field(default_factory=dict)
    cells: dict[str, dict[str, int]] = field(default_factory=dict)  # lab -> exercise -> cell
    #: lab -> exercise -> the first line of its cell
    first_lines: dict[str, dict[str, str]] = field(default_factory=dict)
    #: lab -> the fingerprint of the graded cells its checks ran (streamlab.tooling.notebooks)
    fingerprints: dict[str, str] = field(default_factory=dict)
    #: Labs whose error leaves their exercises not graded rather than failed (the course's
    #: reference notebooks are missing).
    not_graded: set[str] = field(default_factory=set)
    #: Where the seconds went, by :data:`PHASES`, and how many children ran, how many warm.
    timings: dict[str, float] = field(default_factory=dict)

    def took(self, phase: str, seconds: float) -> None:
        self.timings[phase] = round(self.timings.get(phase, 0.0) + seconds, 3)


#: The phases of a grading's time, in order, as ``build/grade.json`` reports them.
PHASES = {
    "start": "starting the child: Python, imports, pytest collecting the checks",
    "setup": "preparing checks: the Spark session, loading the notebook (its cells apart)",
    "cells": "running the notebook's graded cells",
    "checks": "running the checks themselves",
    "teardown": "stopping what each check started",
    "between": "the course's own work between checks",
    "end": "ending the child: stopping Spark",
}


@dataclass
class _Activity:
    kind: str  # "idle", "cell", "setup", "call" or "teardown"
    deadline: float
    limit: float
    lab: str | None = None
    exercise: str | None = None
    cell: int = 0
    check: str | None = None
    line: str = ""  # the running cell's first line
    started: float = field(default_factory=time.monotonic)

    def phase(self, first: bool, done: bool) -> str:
        """Which of :data:`PHASES` this activity's time counts in."""
        if self.kind == "idle":
            return "start" if first else "end" if done else "between"
        return {"cell": "cells", "call": "checks"}.get(self.kind, self.kind)


@dataclass
class _Plan:
    done: set[str] = field(default_factory=set)
    # lab -> cell number -> the fields of the loader's CellProblem for it
    cells: dict[str, dict[int, dict]] = field(default_factory=dict)
    # Exercises with a check that had to be killed: their other checks would only hang too.
    given_up: set[tuple[str, str]] = field(default_factory=set)
    # Variants (nox -s mutants) with a failed check: their other checks need not run.
    failed: set[str] = field(default_factory=set)

    def write(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "done": sorted(self.done),
                    "given_up": sorted(f"{lab}:{exercise}" for lab, exercise in self.given_up),
                    "failed": sorted(self.failed),
                    "cells": {
                        lab: {str(n): problem for n, problem in cells.items()}
                        for lab, cells in self.cells.items()
                    },
                }
            )
        )


def run(
    labs: Sequence[Lab],
    notebooks: str,
    *,
    exercises: Sequence[str] = (),
    max_check_seconds: float | None = None,
    log_path: Path,
    child_args: Sequence[str] = (),
    on_result: Callable[[CheckResult], None] | None = None,
) -> Outcome:
    """Grade ``labs`` in as many children as it takes; never raises for the learner's code.

    ``child_args`` go to every child's pytest (``--variants``, for nox -s mutants);
    ``on_result`` is told each check's verdict as soon as it is known.
    """
    outcome, plan = Outcome(), _Plan()
    cap = max_check_seconds
    cell_limit = cap or CELL_TIME_LIMIT
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="streamlab-grading-") as scratch,
        open(log_path, "wb") as log,
    ):
        plan_path = Path(scratch) / "plan.json"
        # Each child either finishes or is blamed on one more cell or check, so this many
        # children are enough; the bound only guards against a course bug that loops.
        for _ in range(200):
            plan.write(plan_path)
            args = [str(lab.check_file) for lab in labs] + [
                "--notebooks",
                notebooks,
                "--grading-plan",
                str(plan_path),
            ]
            args += [arg for e in exercises for arg in ("--exercise", e)]
            args += list(child_args)
            if cap:
                args += ["--max-check-seconds", str(cap)]
            ended, activity, code = _run_child(args, outcome, plan, log, cell_limit, cap, on_result)
            if ended:
                return outcome
            if not _blame(activity, code, outcome, plan):
                break
        stopped = "stopped answering" if code is None else f"ended with exit code {code}"
        for lab in labs:
            if not any(r.lab == lab.id for r in outcome.results):
                outcome.lab_errors.setdefault(
                    lab.id,
                    (
                        f"Lab {lab.id} could not be graded: the process that runs its checks "
                        f"{stopped} before it reached them. This is {REPORT_BUGS}."
                    ),
                )
        return outcome


def _run_child(
    args: list[str],
    outcome: Outcome,
    plan: _Plan,
    log,
    cell_limit: float,
    cap: float | None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> tuple[bool, _Activity, int | None]:
    """Run one child to its end. Returns (finished normally, last activity, exit code)."""
    read_fd, write_fd = os.pipe()
    env = {**os.environ, FD_VARIABLE: str(write_fd), "PYTHONUNBUFFERED": "1"}
    activity = _Activity("idle", time.monotonic() + IDLE_LIMIT, IDLE_LIMIT)
    log.flush()
    child = warm.claim(args, write_fd, log.fileno(), env)
    outcome.took("children", 1)
    outcome.took("warm", child is not None)
    if child is None:
        child = subprocess.Popen(
            [sys.executable, "-m", "streamlab.grading.child", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            pass_fds=(write_fd,),
            # Its own process group, so that killing it takes its JVM and Python workers along.
            start_new_session=True,
        )
    os.close(write_fd)
    finished, first = False, True
    try:
        # The deadline is the newest activity's: each event may move it.
        for event in _events(child, read_fd, lambda: activity.deadline):  # noqa: B023
            before = activity
            if event.get("event") == EventKind.DONE:
                finished = True
            activity = _follow(event, activity, outcome, plan, cell_limit, cap)
            if activity is not before:
                outcome.took(before.phase(first, False), activity.started - before.started)
                first = False
            if on_result and event.get("event") == EventKind.RESULT:
                on_result(outcome.results[-1])
    except _OutOfTime:
        return finished, activity, None
    finally:
        os.close(read_fd)
        _kill(child)
        outcome.took(activity.phase(first, finished), time.monotonic() - activity.started)
    return finished, activity, child.returncode


class _OutOfTime(Exception):
    """What the child announced outlived its limit."""


def _events(child: subprocess.Popen, read_fd: int, deadline: Callable[[], float]) -> Iterator[dict]:
    """The child's events as they come, until it exits; :class:`_OutOfTime` when ``deadline()``
    (which each event may move) passes first."""
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    open_pipe = True
    try:
        while True:
            left = deadline() - time.monotonic()
            if left <= 0:
                raise _OutOfTime
            if not open_pipe:
                try:
                    child.wait(timeout=min(left, 0.5))
                except subprocess.TimeoutExpired:
                    continue
                return
            if not selector.select(timeout=min(left, 1.0)):
                if child.poll() is not None:
                    # Dead, though something it started may still hold the pipe open.
                    return
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                open_pipe = False
                continue
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # something else wrote to the pipe; the events still count
                yield event
    finally:
        selector.close()


def _follow(
    event: dict,
    activity: _Activity,
    outcome: Outcome,
    plan: _Plan,
    cell_limit: float,
    cap: float | None,
) -> _Activity:
    """The activity after ``event``; records verdicts and lab errors as they come."""
    now = time.monotonic()
    kind, lab = event.get("event"), event.get("lab")
    if kind == EventKind.CELL and event.get("cell"):
        limit = cell_limit + GRACE
        return _Activity(
            "cell",
            now + limit,
            cell_limit,
            lab,
            event.get("exercise"),
            event["cell"],
            activity.check,
            event.get("line", ""),
        )
    if kind == EventKind.CELL:  # the cell finished: back to the check's setup
        return _Activity(
            "setup", now + SETUP_LIMIT, SETUP_LIMIT, lab, activity.exercise, check=activity.check
        )
    if kind == EventKind.CELLS:
        outcome.cells[lab] = event.get("cells", {})
        outcome.first_lines[lab] = event.get("first_lines", {})
        if event.get("fingerprint"):
            outcome.fingerprints[lab] = event["fingerprint"]
    if kind == EventKind.PHASE:
        phase = event["phase"]
        limit = {"setup": SETUP_LIMIT, "teardown": TEARDOWN_LIMIT}.get(
            phase, event.get("limit") or (min(DEFAULT_TIMEOUT, cap) if cap else DEFAULT_TIMEOUT)
        )
        grace = GRACE + 0.1 * limit if phase == "call" else 0
        return _Activity(
            phase, now + limit + grace, limit, lab, event.get("exercise"), check=event.get("check")
        )
    if kind == EventKind.RESULT:
        outcome.results.append(
            CheckResult(
                lab,
                event["exercise"],
                _name(event["check"]),
                Verdict(
                    Status(event["status"]),
                    event["message"],
                    event.get("expected", ""),
                    event.get("actual", ""),
                    event.get("hint", ""),
                    event.get("diff", ""),
                ),
            )
        )
        plan.done.add(event["check"])
        if event["status"] == FAILED:
            plan.failed.add(lab)
    if kind == EventKind.LAB_ERROR:
        outcome.lab_errors[lab] = event["message"]
    if kind == EventKind.BROKEN:
        broken_lab = lab_of_check(event.get("check", ""))
        if broken_lab and event.get("reference"):
            # The course's reference notebooks are missing: the sentence says what to do.
            outcome.lab_errors[broken_lab] = event["message"]
            outcome.not_graded.add(broken_lab)
        elif broken_lab:
            outcome.lab_errors[broken_lab] = (
                f"Lab {broken_lab} could not be graded: its checks do not load "
                f"({event.get('message')}). This is {REPORT_BUGS}."
            )
    if kind == EventKind.DONE:
        return _Activity("idle", now + IDLE_LIMIT, IDLE_LIMIT)
    if kind in (EventKind.RESULT, EventKind.LAB_ERROR, EventKind.BROKEN, EventKind.CELLS):
        return activity
    return _Activity("idle", now + IDLE_LIMIT, IDLE_LIMIT)


def _blame(activity: _Activity, code: int | None, outcome: Outcome, plan: _Plan) -> bool:
    """Record what the killed or dead child was doing; False when no exercise is to blame."""
    how = _how(code, activity.limit)
    line = outcome.first_lines.get(activity.lab or "", {}).get(activity.exercise or "", "")
    in_cell = (
        f" (your code is in {cell_name(activity.exercise, line)})" if activity.exercise else ""
    )
    if activity.kind == "cell":
        detail = (
            f"{how}: is there an endless loop at the top level of the cell, or a call "
            "that never returns?"
            if code is None
            else f"{how}: does the cell call os._exit(), or end its own process?"
        )
        problem = {
            "exercise": activity.exercise,
            "cell_number": activity.cell,
            "kind": "crash",
            "detail": detail,
            "first_line": activity.line,
        }
        plan.cells.setdefault(activity.lab, {})[activity.cell] = problem
        return True
    if activity.kind in ("setup", "call", "teardown") and activity.check:
        if code is None and activity.kind == "call":
            sentence = (
                f"The check {how}: is there an endless loop, a call that never "
                "returns (a loop inside a library, a query nobody stops), or a "
                f"deadlock?{in_cell}"
            )
        elif code is None and activity.kind == "teardown":
            sentence = (
                f"Stopping the queries this check started {how}: does your code "
                f"start a query that ignores stop()?{in_cell}"
            )
        elif code is None:
            sentence = (
                f"Preparing this check (loading the notebook, starting Spark) {how}. "
                f"If your cells are quick, this is {REPORT_BUGS}."
            )
        else:
            sentence = (
                f"Your code {how} during the check: does it call os._exit(), or end "
                f"its own process?{in_cell}"
            )
        outcome.results.append(
            CheckResult(
                activity.lab, activity.exercise, _name(activity.check), Verdict(FAILED, sentence)
            )
        )
        plan.done.add(activity.check)
        plan.given_up.add((activity.lab, activity.exercise))
        return True
    return False


def _how(code: int | None, limit: float | None = None) -> str:
    if code is None:
        return (
            f"did not finish within {limit:g} s and was stopped" if limit else "stopped answering"
        )
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"ended the process running your code (killed by {name})"
    return f"ended the process running your code (exit code {code})"


def _kill(child: subprocess.Popen) -> None:
    """Kill the child's process group: the child, its Spark JVM and the JVM's Python workers."""
    processes.terminate(child, group=True, first=signal.SIGKILL)


def _name(nodeid: str) -> str:
    return nodeid.rpartition("::")[2]
