"""The writer of ``build/logs/spark.log``: Spark's console output, minus its workers' hang-ups.

PySpark forks its Python workers from daemons (``pyspark.daemon``). When the JVM closes a
worker's connection before the worker has flushed its last bytes (a task whose result is no
longer wanted, a session stopping), the flush fails and the daemon prints the traceback of a
``BrokenPipeError`` to the console it shares with the JVM. Nothing is wrong, yet each warm-up
and each shutdown left such tracebacks in the course's log, where a learner looking for a real
error meets them first.

:func:`writer` starts ``python -m streamlab.spark_log PATH``, which appends what it reads to
``PATH`` and leaves out exactly those tracebacks: every frame in PySpark's ``daemon.py``, the
last line a ``BrokenPipeError`` or ``ConnectionResetError``. Any other traceback is kept whole.
It ends when the last process writing to it (the JVM, its workers) has closed its end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

_TRACEBACK = "Traceback (most recent call last):"
_HANG_UPS = ("BrokenPipeError", "ConnectionResetError")
#: The last line of a traceback: the exception, ``BrokenPipeError: [Errno 32] Broken pipe``.
_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b")


def writer(path: Path) -> int:
    """A file descriptor whose lines end up in ``path``, the workers' hang-ups left out.

    The caller hands it to the processes that write (the JVM, through stdout and stderr) and
    closes its own copy.
    """
    read, write = os.pipe()
    subprocess.Popen(
        [sys.executable, "-m", "streamlab.spark_log", str(path)],
        stdin=read,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C or a kill meant for the caller's group must not take the
        # log's writer away from a JVM still shutting down; it ends at the end of its input.
        start_new_session=True,
    )
    os.close(read)
    return write


def is_hang_up(block: list[str]) -> bool:
    """Whether ``block`` (the lines of one or more tracebacks) is only daemons' workers
    failing to write to a JVM that had closed the connection."""
    frames = [line for line in block if line.lstrip().startswith("File ")]
    endings = [line for line in block if _EXCEPTION.match(line)]
    return (
        bool(frames)
        and all("pyspark/daemon.py" in frame for frame in frames)
        and all(line.startswith(_HANG_UPS) for line in endings)
    )


def kept(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` without the hang-up tracebacks (see :func:`is_hang_up`).

    Workers write at the same time, so two tracebacks may come interleaved, and other lines
    between theirs: a traceback's lines are held back from its first line to its exception's,
    and so are those of any traceback that begins meanwhile; other lines pass at once.
    """
    held: list[str] = []
    begun = 0  # tracebacks whose exception line has not come yet
    for line in lines:
        if line.startswith(_TRACEBACK):
            held.append(line)
            begun += 1
        elif begun and line.startswith((" ", "\t")) and line.strip():
            held.append(line)
        elif begun and _EXCEPTION.match(line):
            held.append(line)
            begun -= 1
            if not begun:
                if not is_hang_up(held):
                    yield from held
                held = []
        else:
            yield line
    yield from held


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    source = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    with open(path, "a", encoding="utf-8") as log:
        for line in kept(source):
            log.write(line)
            log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
