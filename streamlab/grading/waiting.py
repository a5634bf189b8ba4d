"""What a learner sees while a grading runs: what it waits on, and for how long.

The supervisor (:mod:`streamlab.grading.supervisor`) says what its child does at each change
and once a second (:class:`~streamlab.grading.supervisor.Progress`). ``nox -s check`` prints
a line when the grader starts, and a line for anything that has run :data:`QUIET_FOR` seconds
or more, again every :data:`EVERY` seconds: lines, never a spinner, so that a log or a
terminal that is not a tty reads as well as a live one. ``%check`` asks the grader for every
update as a JSON line on its output (:data:`MARK`), and shows the latest in place.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TextIO

from streamlab.grading.supervisor import Progress

#: Seconds a step runs before ``nox -s check`` says it is waiting on it.
QUIET_FOR = 15.0
#: Seconds between two lines about the same step.
EVERY = 30.0
#: What starts a line of progress on the grader's output under ``--progress-json``.
MARK = "@streamlab-progress "


class TerminalProgress:
    """Prints what the grading waits on, as lines: see the module's docstring."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._step: tuple = ()
        self._next = QUIET_FOR
        self._started = False

    def __call__(self, progress: Progress) -> None:
        if progress.doing == "start" and not self._started:
            self._started = True
            self._say("Starting the grader ...")
        step = (progress.doing, progress.check, progress.exercise, progress.name)
        if step != self._step:
            self._step, self._next = step, QUIET_FOR
        if progress.seconds >= self._next:
            self._next = progress.seconds + EVERY
            self._say(f"  ... {progress.line()}")

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def json_progress(progress: Progress) -> None:
    """One line of ``MARK`` and the progress as JSON, for ``%check`` to read."""
    print(MARK + json.dumps(dataclasses.asdict(progress)), flush=True)


def read_progress(line: str) -> Progress | None:
    """The progress a line of the grader's output under ``--progress-json`` holds, if any."""
    if not line.startswith(MARK):
        return None
    try:
        return Progress(**json.loads(line[len(MARK) :]))
    except (ValueError, TypeError):
        return None
