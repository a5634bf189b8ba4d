"""What the grading child tells its supervisor: one JSON object per line on an inherited pipe.

The child announces each thing that may hang or end the process (a graded cell, each phase
of a check) before it starts, and each verdict as soon as it is known, so that when the
child has to be killed, or dies, the supervisor knows which cell or check to blame and
which verdicts it already has.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum

from streamlab.course import registry

#: Names the file descriptor of the pipe in the child's environment.
FD_VARIABLE = "STREAMLAB_GRADING_FD"


class EventKind(StrEnum):
    """What an event says; its other fields depend on it.

    The events of a cell or a check (all but ``broken`` and ``done``) name its ``lab`` and
    its ``unit``: what is graded, the lab itself, or under ``nox -s mutants`` a variant of the
    lab's solution (``m12``; ``solution`` for the solution itself).
    """

    #: A graded cell starts (``cell``: its number, ``exercise``, ``line``: its first line),
    #: or ends (``cell`` 0).
    CELL = "cell"
    #: A lab's notebook is loaded: ``cells`` and ``first_lines`` by exercise, ``fingerprint``,
    #: ``uses`` (what each exercise's cells read from earlier exercises' cells).
    CELLS = "cells"
    #: The checks this child will run, in order, once pytest has collected them: ``checks``.
    COLLECTED = "collected"
    #: A check's ``phase`` (setup, call, teardown) starts; ``limit`` in seconds for a call.
    PHASE = "phase"
    #: A check's verdict: ``status``, ``message``, ``expected``, ``actual``, ``hint``, ``diff``,
    #: ``hintless``, and ``part``: the part of its exercise the check grades, or "".
    RESULT = "result"
    #: A lab's notebook cannot be read: ``message``.
    LAB_ERROR = "lab-error"
    #: A check file does not load: ``check``, ``message``; a course bug, unless ``reference``
    #: (the course's reference notebook it reads is missing: ``message`` says what to do).
    BROKEN = "broken"
    #: The child's checks are over: ``code``.
    DONE = "done"


def emit(event: EventKind, **fields) -> None:
    """Send one event to the supervisor; a no-op when there is none (pytest run directly)."""
    fd = os.environ.get(FD_VARIABLE)
    if not fd:
        return
    line = json.dumps({"event": str(event), **fields}) + "\n"
    try:
        os.write(int(fd), line.encode())
    except OSError:
        # The learner's code closed the pipe: the supervisor sees it end and blames the
        # cell or check that was running.
        pass


def lab_of_check(nodeid: str) -> str | None:
    """The lab of a check's (or check file's) node id: ``checks/lab_04/test_4_2.py::t`` is 04."""
    return registry.lab_of_check(nodeid)
