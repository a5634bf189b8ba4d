"""What the grading child tells its supervisor: one JSON object per line on an inherited pipe.

The child announces each thing that may hang or end the process (a graded cell, each phase
of a check) before it starts, and each verdict as soon as it is known, so that when the
child has to be killed, or dies, the supervisor knows which cell or check to blame and
which verdicts it already has.
"""

from __future__ import annotations

import json
import os

#: Names the file descriptor of the pipe in the child's environment.
FD_VARIABLE = "STREAMLAB_GRADING_FD"


def emit(event: str, **fields) -> None:
    """Send one event to the supervisor; a no-op when there is none (pytest run directly)."""
    fd = os.environ.get(FD_VARIABLE)
    if not fd:
        return
    line = json.dumps({"event": event, **fields}) + "\n"
    try:
        os.write(int(fd), line.encode())
    except OSError:
        # The learner's code closed the pipe: the supervisor sees it end and blames the
        # cell or check that was running.
        pass
