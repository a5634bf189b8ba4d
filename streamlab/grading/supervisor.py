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
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, cast

from streamlab import processes
from streamlab.course.notebooks import cell_name
from streamlab.course.registry import Lab
from streamlab.grading import warm
from streamlab.grading.events import FD_VARIABLE, EventKind, lab_of_check
from streamlab.grading.timeout import CELL_TIME_LIMIT, DEFAULT_TIMEOUT
from streamlab.grading.verdict import FAILED, TIMEOUT_HINT, Attempt, CheckResult, Status, Verdict

#: One event of the child's, as :mod:`streamlab.grading.events` describes each kind.
Event = dict[str, Any]
#: A child process, started here or claimed warm.
_Child = subprocess.Popen[bytes] | warm.WarmChild

#: Extra seconds past a limit before the child is killed: the child's own, gentler limit
#: (which keeps the Spark session alive) fires first whenever Python can still run.
GRACE = 3.0
#: A check's setup may start the Spark session, which takes long on a loaded machine.
SETUP_LIMIT = 180.0
#: Stopping a check's queries and jobs.
TEARDOWN_LIMIT = 60.0
#: Anything the course itself does between checks (starting pytest, ending the checks).
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
    #: Units other than a lab (variants of its solution, nox -s mutants) whose notebook could
    #: not be read: unit -> why.
    unit_errors: dict[str, str] = field(default_factory=dict)
    # Keyed by unit: the lab, or a variant of its solution under nox -s mutants.
    cells: dict[str, dict[str, int]] = field(default_factory=dict)  # unit -> exercise -> cell
    #: unit -> exercise -> the first line of its cell
    first_lines: dict[str, dict[str, str]] = field(default_factory=dict)
    #: unit -> the fingerprint of the graded cells its checks ran (streamlab.course.notebooks)
    fingerprints: dict[str, str] = field(default_factory=dict)
    #: Labs whose error leaves their exercises not graded rather than failed (the course's
    #: reference notebooks are missing).
    not_graded: set[str] = field(default_factory=set)
    #: unit -> exercise -> earlier exercise -> the names of its cell the exercise reads
    uses: dict[str, dict[str, dict[str, list[str]]]] = field(default_factory=dict)
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
    "end": "ending the child once its checks are done",
}


class Phase(StrEnum):
    """What the child announced it is doing: which limit holds, and what is blamed for a hang."""

    IDLE = "idle"  # the course's own work: starting pytest, between checks, ending the checks
    CELL = "cell"  # a graded cell runs
    SETUP = "setup"
    CALL = "call"
    TEARDOWN = "teardown"

    def timing(self, first: bool, done: bool) -> str:
        """Which of :data:`PHASES` time spent in this phase counts in."""
        if self is Phase.IDLE:
            return "start" if first else "end" if done else "between"
        return {Phase.CELL: "cells", Phase.CALL: "checks"}.get(self, self.value)


@dataclass
class _Activity:
    """What the child does now, as its last event announced it, and until when it may."""

    phase: Phase
    deadline: float
    limit: float
    lab: str = ""
    #: What is graded: the lab, or a variant of its solution (nox -s mutants).
    unit: str = ""
    exercise: str = ""
    cell: int = 0
    check: str = ""
    line: str = ""  # the running cell's first line
    started: float = field(default_factory=time.monotonic)
    #: While a graded cell runs for a check's setup: the exercise of that check, whose setup
    #: goes on once the cell is done.
    check_exercise: str = ""


@dataclass(frozen=True)
class Progress:
    """What a grading waits on now, for the learner to see while it runs.

    ``doing`` is ``start`` (the child starts: Python, Spark), ``cell`` (a graded cell runs),
    ``setup``, ``call`` or ``teardown`` of check ``check`` of ``checks``, or ``between``
    (the course's own work between checks, and ending the checks). ``seconds``: how
    long it has been at it.
    """

    doing: str
    seconds: float
    check: int = 0
    checks: int = 0
    exercise: str = ""
    name: str = ""

    def line(self) -> str:
        """One line saying it: ``check 3 of 12 (2.8, your test passes ...): 47 s``."""
        seconds = f"{self.seconds:.0f} s"
        if self.doing == "start":
            return f"Starting the grader ... {seconds}"
        if self.doing == "cell":
            return f"Running your cells for exercise {self.exercise or '(setup)'} ... {seconds}"
        if self.doing in ("setup", "call", "teardown") and self.checks:
            what = {
                "setup": ", preparing it (Spark, your notebook)",
                "teardown": ", stopping its queries",
            }.get(self.doing, "")
            return (
                f"check {self.check} of {self.checks} ({self.exercise}, {self.name}){what}: "
                f"{seconds}"
            )
        return f"Finishing the grading ... {seconds}"


def check_in_words(nodeid: str) -> str:
    """``test_your_test_passes_a_right_final_counts`` -> ``your test passes a right final
    counts``: a check's name as the learner reads it."""
    name = _name(nodeid).partition("[")[0].removeprefix("test_")
    return name.replace("_", " ")


def _idle() -> _Activity:
    return _Activity(Phase.IDLE, time.monotonic() + IDLE_LIMIT, IDLE_LIMIT)


@dataclass
class _Plan:
    done: set[str] = field(default_factory=set)
    # unit -> cell number -> the fields of the loader's CellProblem for it
    cells: dict[str, dict[int, dict]] = field(default_factory=dict)
    # (unit, exercise) with a check that had to be killed: their other checks would only hang too.
    given_up: set[tuple[str, str]] = field(default_factory=set)
    # Units with a failed check: a variant (nox -s mutants) needs none of its other checks.
    failed: set[str] = field(default_factory=set)

    def write(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "done": sorted(self.done),
                    "given_up": sorted(f"{unit}:{exercise}" for unit, exercise in self.given_up),
                    "failed": sorted(self.failed),
                    "cells": {
                        unit: {str(n): problem for n, problem in cells.items()}
                        for unit, cells in self.cells.items()
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
    on_progress: Callable[[Progress], None] | None = None,
) -> Outcome:
    """Grade ``labs`` in as many children as it takes; never raises for the learner's code.

    ``child_args`` go to every child's pytest (nox -s mutants loads its plugin there);
    ``on_result`` is told each check's verdict as soon as it is known; ``on_progress`` what
    the grading waits on, at each change and at least once a second.
    """
    cap = max_check_seconds
    grading = _Run(Outcome(), _Plan(), cap or CELL_TIME_LIMIT, cap, on_progress=on_progress)
    outcome, plan = grading.outcome, grading.plan
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        # Children warming up for the gradings to come wait from now until the verdict, also
        # while this grading looks for a child of its own.
        warm.grading(),
        tempfile.TemporaryDirectory(prefix="streamlab-grading-") as scratch,
        open(log_path, "wb") as log,
    ):
        plan_path = Path(scratch) / "plan.json"
        # Each child either finishes or is blamed on one more cell or check, so this many
        # children are enough; the bound only guards against a course bug that loops.
        for _ in range(200):
            plan.write(plan_path)
            args = [str(lab.check_dir) for lab in labs] + [
                "--notebooks",
                notebooks,
                "--grading-plan",
                str(plan_path),
            ]
            args += [arg for e in exercises for arg in ("--exercise", e)]
            args += list(child_args)
            if cap:
                args += ["--max-check-seconds", str(cap)]
            ended, code = _run_child(args, grading, log, on_result)
            if ended:
                return outcome
            if not _blame(grading.activity, code, outcome, plan):
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
    run: _Run,
    log: BinaryIO,
    on_result: Callable[[CheckResult], None] | None = None,
) -> tuple[bool, int | None]:
    """Run one child to its end. Returns (finished normally, exit code); ``run.activity`` is
    what it was doing last."""
    read_fd, write_fd = os.pipe()
    env = {**os.environ, FD_VARIABLE: str(write_fd), "PYTHONUNBUFFERED": "1"}
    run.activity = _idle()
    log.flush()
    run.tell_progress(True)
    child = _start_child(args, write_fd, log, env, run.outcome, lambda: run.tell_progress(True))
    os.close(write_fd)
    finished, first = False, True
    try:
        # The deadline is the newest activity's: each event may move it.
        for event in _events(child, read_fd, lambda: run.activity.deadline):
            if event is _TICK:
                run.tell_progress(first)
                continue
            before = run.activity
            if event.get("event") == EventKind.DONE:
                finished = True
            _follow(event, run)
            if run.activity is not before:
                run.outcome.took(
                    before.phase.timing(first, False), run.activity.started - before.started
                )
                first = False
            if on_result and event.get("event") == EventKind.RESULT:
                on_result(run.outcome.results[-1])
            if finished:
                # Every verdict is in: what is left of the child (stopping Spark, exiting) is
                # ended below rather than waited for.
                break
            run.tell_progress(first)
    except _OutOfTime:
        return finished, None
    finally:
        os.close(read_fd)
        _kill(child)
        run.outcome.took(
            run.activity.phase.timing(first, finished), time.monotonic() - run.activity.started
        )
    return finished, child.returncode


def _start_child(
    args: list[str],
    write_fd: int,
    log: BinaryIO,
    env: dict[str, str],
    outcome: Outcome,
    waiting: Callable[[], None] | None = None,
) -> _Child:
    """A warm child given ``args`` if one is ready, else a child started from cold."""
    warm_child = warm.claim(args, write_fd, log.fileno(), env, waiting)
    outcome.took("children", 1)
    outcome.took("warm", warm_child is not None)
    if warm_child is not None:
        return warm_child
    return subprocess.Popen(
        [sys.executable, "-m", "streamlab.grading.child", *args],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
        pass_fds=(write_fd,),
        # Its own process group, so that killing it takes its JVM and Python workers along.
        start_new_session=True,
    )


class _OutOfTime(Exception):
    """What the child announced outlived its limit."""


#: What :func:`_events` yields when a second passed without an event.
_TICK: Event = {"event": "tick"}


def _events(child: _Child, read_fd: int, deadline: Callable[[], float]) -> Iterator[Event]:
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
                yield _TICK
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
                if isinstance(event, dict):
                    yield event
    finally:
        selector.close()


@dataclass
class _Run:
    """A grading as the supervisor follows it: what the child does now, and what it found."""

    outcome: Outcome
    plan: _Plan
    cell_limit: float
    cap: float | None
    activity: _Activity = field(default_factory=_idle)
    on_progress: Callable[[Progress], None] | None = None
    #: The checks the running child collected, and how many earlier children graded.
    collected: list[str] = field(default_factory=list)
    done_before: int = 0

    def tell_progress(self, starting: bool) -> None:
        """Tell ``on_progress`` what the child does now (``starting``: no event came yet but
        the child's own start)."""
        if self.on_progress is None:
            return
        activity, now = self.activity, time.monotonic()
        seconds = now - activity.started
        if activity.phase is Phase.IDLE:
            self.on_progress(Progress("start" if starting else "between", seconds))
            return
        if activity.phase is Phase.CELL:
            self.on_progress(Progress("cell", seconds, exercise=activity.exercise))
            return
        number = self.collected.index(activity.check) + 1 if activity.check in self.collected else 0
        self.on_progress(
            Progress(
                activity.phase.value,
                seconds,
                self.done_before + number,
                self.done_before + len(self.collected),
                activity.exercise,
                check_in_words(activity.check),
            )
        )


def _follow(event: Event, run: _Run) -> None:
    """Move ``run.activity`` on by ``event``; record verdicts and lab errors as they come."""
    handler = _HANDLERS.get(str(event.get("event")))
    activity = handler(event, run) if handler else _idle()
    if activity is not None:
        run.activity = activity


def _unit(event: Event) -> str:
    """What the event's check grades: its lab, or a variant of its solution (nox -s mutants)."""
    return str(event.get("unit") or event.get("lab") or "")


def _on_cell(event: Event, run: _Run) -> _Activity:
    """A graded cell starts (its number given), or ends: back to the check's setup."""
    lab, now = str(event.get("lab") or ""), time.monotonic()
    before = run.activity
    of_check = before.check_exercise if before.phase is Phase.CELL else before.exercise
    if event.get("cell"):
        limit = run.cell_limit
        return _Activity(
            Phase.CELL,
            now + limit + GRACE,
            limit,
            lab,
            _unit(event),
            str(event.get("exercise") or ""),
            int(event["cell"]),
            before.check,
            str(event.get("line", "")),
            check_exercise=of_check,
        )
    return _Activity(
        Phase.SETUP, now + SETUP_LIMIT, SETUP_LIMIT, lab, _unit(event), of_check, check=before.check
    )


def _on_cells(event: Event, run: _Run) -> None:
    """A notebook is loaded: where each exercise's cell is, and the cells' fingerprint."""
    unit, outcome = _unit(event), run.outcome
    outcome.cells[unit] = event.get("cells", {})
    outcome.first_lines[unit] = event.get("first_lines", {})
    if event.get("fingerprint"):
        outcome.fingerprints[unit] = event["fingerprint"]
    outcome.uses[unit] = event.get("uses", {})


def _on_phase(event: Event, run: _Run) -> _Activity:
    """A check's setup, call or teardown starts, each with its own limit."""
    phase = Phase(event["phase"])
    default = min(DEFAULT_TIMEOUT, run.cap) if run.cap else DEFAULT_TIMEOUT
    limits = {Phase.SETUP: SETUP_LIMIT, Phase.TEARDOWN: TEARDOWN_LIMIT}
    limit = limits.get(phase, event.get("limit") or default)
    grace = GRACE + 0.1 * limit if phase is Phase.CALL else 0
    return _Activity(
        phase,
        time.monotonic() + limit + grace,
        limit,
        str(event.get("lab") or ""),
        _unit(event),
        str(event.get("exercise") or ""),
        check=str(event.get("check") or ""),
    )


def _on_collected(event: Event, run: _Run) -> None:
    """The child's checks, in the order it runs them."""
    run.done_before = len(run.plan.done)
    run.collected = [str(check) for check in event.get("checks", [])]


def _on_result(event: Event, run: _Run) -> None:
    """A check's verdict."""
    verdict = Verdict(
        Status(event["status"]),
        event["message"],
        event.get("expected", ""),
        event.get("actual", ""),
        event.get("hint", ""),
        event.get("diff", ""),
        bool(event.get("hintless", False)),
        str(event.get("cause") or ""),
    )
    unit = _unit(event)
    run.outcome.results.append(
        CheckResult(
            event["lab"],
            event["exercise"],
            _name(event["check"]),
            verdict,
            unit,
            str(event.get("part") or ""),
            _attempt(event),
        )
    )
    run.plan.done.add(event["check"])
    if verdict.status == FAILED:
        run.plan.failed.add(unit)


def _attempt(event: Event) -> Attempt | None:
    """What the check made of the learner's try, as the child said (streamlab.grading.attempt)."""
    fields = event.get("attempt")
    if not isinstance(fields, dict):
        return None
    try:
        return Attempt(**fields)
    except TypeError:  # a child of another version of the course
        return None


def _on_lab_error(event: Event, run: _Run) -> None:
    """A notebook cannot be read: the lab's, or a variant's (nox -s mutants)."""
    lab, unit = str(event.get("lab") or ""), _unit(event)
    if unit == lab:
        run.outcome.lab_errors[lab] = event["message"]
    else:
        run.outcome.unit_errors[unit] = event["message"]


def _on_broken(event: Event, run: _Run) -> None:
    """A check file does not load: the course's bug, or its reference notebooks are missing."""
    lab, outcome = lab_of_check(event.get("check", "")), run.outcome
    if lab and event.get("reference"):
        # The course's reference notebooks are missing: the sentence says what to do.
        outcome.lab_errors[lab] = event["message"]
        outcome.not_graded.add(lab)
    elif lab:
        outcome.lab_errors[lab] = (
            f"Lab {lab} could not be graded: its checks do not load "
            f"({event.get('message')}). This is {REPORT_BUGS}."
        )


def _on_done(event: Event, run: _Run) -> _Activity:
    """The child's checks are over: the grading ends it (Spark with it) rather than wait."""
    return _idle()


#: What each kind of event does; None from a handler leaves the activity as it was.
_HANDLERS: dict[str, Callable[[Event, _Run], _Activity | None]] = {
    EventKind.CELL: _on_cell,
    EventKind.CELLS: _on_cells,
    EventKind.COLLECTED: _on_collected,
    EventKind.PHASE: _on_phase,
    EventKind.RESULT: _on_result,
    EventKind.LAB_ERROR: _on_lab_error,
    EventKind.BROKEN: _on_broken,
    EventKind.DONE: _on_done,
}


def _blame(activity: _Activity, code: int | None, outcome: Outcome, plan: _Plan) -> bool:
    """Record what the killed or dead child was doing; False when no exercise is to blame."""
    if activity.phase is Phase.CELL:
        _blame_cell(activity, code, plan)
        return True
    if activity.phase in _CHECK_PHASES and activity.check:
        _blame_check(activity, code, outcome, plan)
        return True
    return False


#: The phases of a check, which a hang or a crash in them fails.
_CHECK_PHASES = (Phase.SETUP, Phase.CALL, Phase.TEARDOWN)


def _blame_cell(activity: _Activity, code: int | None, plan: _Plan) -> None:
    """The running cell killed the child, or outlived its limit: the next child skips it."""
    how = _how(code, activity.limit)
    detail = (
        f"{how}: is there an endless loop at the top level of the cell, or a call "
        "that never returns?"
        if code is None
        else f"{how}: does the cell call os._exit(), or end its own process?"
    )
    problem = {
        "exercise": activity.exercise or None,
        "cell_number": activity.cell,
        "kind": "crash",
        "detail": detail,
        "first_line": activity.line,
    }
    plan.cells.setdefault(activity.unit, {})[activity.cell] = problem


def _blame_check(activity: _Activity, code: int | None, outcome: Outcome, plan: _Plan) -> None:
    """The running check killed the child, or outlived its limit: it fails, and the
    exercise's other checks are given up."""
    hung = code is None and activity.phase is Phase.CALL
    verdict = Verdict(
        FAILED, _check_sentence(activity, code, outcome), hint=TIMEOUT_HINT if hung else ""
    )
    outcome.results.append(
        CheckResult(activity.lab, activity.exercise, _name(activity.check), verdict, activity.unit)
    )
    plan.done.add(activity.check)
    plan.given_up.add((activity.unit, activity.exercise))


def _check_sentence(activity: _Activity, code: int | None, outcome: Outcome) -> str:
    """What a learner reads about a check that hung or ended the process, by its phase."""
    how = _how(code, activity.limit)
    line = outcome.first_lines.get(activity.unit, {}).get(activity.exercise, "")
    in_cell = (
        f" (your code is in {cell_name(activity.exercise, line)})" if activity.exercise else ""
    )
    if code is not None:
        return (
            f"Your code {how} during the check: does it call os._exit(), or end "
            f"its own process?{in_cell}"
        )
    if activity.phase is Phase.CALL:
        return (
            f"The check {how}: is there an endless loop, a call that never "
            "returns (a loop inside a library, a query nobody stops), or a "
            f"deadlock?{in_cell}"
        )
    if activity.phase is Phase.TEARDOWN:
        return (
            f"Stopping the queries this check started {how}: does your code "
            f"start a query that ignores stop()?{in_cell}"
        )
    return (
        f"Preparing this check (loading the notebook, starting Spark) {how}. "
        f"If your cells are quick, this is {REPORT_BUGS}."
    )


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


def _kill(child: _Child) -> None:
    """Kill the child's process group: the child, its Spark JVM and the JVM's Python workers."""
    # A WarmChild has all of a Popen that terminate() uses: pid, poll(), wait(), returncode.
    processes.terminate(cast(subprocess.Popen, child), group=True, first=signal.SIGKILL)


def _name(nodeid: str) -> str:
    return nodeid.rpartition("::")[2]
