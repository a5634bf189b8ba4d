"""The grading child: runs the checks, and with them the learner's code, in its own process.

``python -m streamlab.grading.child [pytest options] CHECK_FILE ...`` is started by
:mod:`streamlab.grading.supervisor`, never by hand. Whatever the learner's code does here
(end the process, loop inside C, hang a call into the JVM) cannot reach the grader: the
supervisor reads this process's events and kills it when a limit passes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from streamlab.grading import events
from streamlab.grading.events import lab_of_check
from streamlab.grading.loader import missing_reference, reference_sentence
from streamlab.paths import REPO_ROOT


class _Recorder:
    """Reports a check file that failed to import, and the end of the checks.

    That is a bug in the course, not the learner's, unless what failed was reading one of the
    course's reference notebooks in ``solutions/`` that the checks compare the code with:
    then the lab is not graded, and the sentence says how to restore the notebook.
    """

    def __init__(self) -> None:
        self._errors: dict[str, BaseException] = {}
        self.done = False

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        # Every verdict is out: the supervisor reports them and ends this process at once,
        # which stops Spark faster than Spark stops itself.
        events.emit(events.EventKind.DONE, code=int(exitstatus))
        self.done = True

    def pytest_exception_interact(self, node, call: pytest.CallInfo, report) -> None:
        # Called before pytest_collectreport for a file that failed to import.
        if isinstance(report, pytest.CollectReport) and call.excinfo is not None:
            self._errors[report.nodeid] = call.excinfo.value

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.failed:
            return
        reference = missing_reference(self._errors.pop(report.nodeid, None))
        lab = lab_of_check(report.nodeid)
        if reference is not None and lab:
            events.emit(
                events.EventKind.BROKEN,
                check=report.nodeid,
                message=reference_sentence(reference, f"Lab {lab}'s checks"),
                reference=True,
            )
            return
        last = report.longreprtext.strip().splitlines()[-1:] or ["?"]
        events.emit(events.EventKind.BROKEN, check=report.nodeid, message=last[0])


def _die_with_supervisor() -> None:
    """End this process group (Spark's JVM included) once the supervisor is gone.

    The child runs in a session of its own, so that it can be killed as a whole; the same
    makes it outlive a supervisor that was killed itself, unless it watches.
    """
    supervisor = os.getppid()

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(1)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    _die_with_supervisor()
    recorder = _Recorder()
    code = pytest.main(
        [
            *argv,
            # One lab's check file that does not load must not keep the others from being
            # graded: pytest would otherwise stop before running any check.
            "--continue-on-collection-errors",
            "-p",
            "no:terminal",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(REPO_ROOT),
            "-c",
            str(REPO_ROOT / "checks" / "pytest.ini"),
        ],
        plugins=[recorder],
    )
    if not recorder.done:  # pytest ended before its session did (a usage error)
        events.emit(events.EventKind.DONE, code=int(code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
