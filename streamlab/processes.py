"""Child processes and signals: start, wait until ready, stop, and stop on Ctrl-C or SIGTERM.

What the hub launcher, the standalone cluster, the Spark Connect server, the demo, the monitor
and JupyterLab's launcher share::

    child = Child(command, log=LOG_DIR / "server.log", group=True)
    wait_until(listening, timeout=180, watch=[child],
               exited=lambda c: Error(f"exited with code {c.returncode}:\\n{c.output()}"),
               expired=lambda: Error("did not listen in time"))
    stop = stop_requested()          # Ctrl-C and SIGTERM set it instead of interrupting
    while not stop.wait(1.0) and child.poll() is None: ...
    terminate(child, group=True)     # SIGTERM, a grace period, then SIGKILL
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

#: How many of a piped child's last output lines are kept for error messages.
KEEP_LINES = 200


class Child(subprocess.Popen):
    """A process started with its output kept for error messages.

    With ``log``, stdout and stderr are appended to that file and :meth:`output` is its end;
    without it, a thread keeps reading the merged output (so the child never blocks on a full
    pipe) and :meth:`output` is its last lines. ``group=True`` starts the child in a process
    group of its own, which whatever it starts (a JVM, its Python workers) shares, so that
    :func:`terminate` can stop them all and a Ctrl-C in the terminal reaches only this program.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log: Path | None = None,
        group: bool = False,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
    ) -> None:
        self.log = log
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._new_line = threading.Condition()
        self._pump_thread: threading.Thread | None = None
        options: dict[str, Any] = dict(
            stdin=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=group,
        )
        if log is None:
            super().__init__(command, stdout=subprocess.PIPE, text=True, **options)
            self._pump_thread = threading.Thread(
                target=self._pump, args=(self.stdout,), daemon=True
            )
            self._pump_thread.start()
            return
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            super().__init__(command, stdout=out, **options)

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._new_line:
                self._lines.append(line)
                self._new_line.notify_all()
        stream.close()

    def lines(self) -> list[str]:
        """The last lines the child printed (piped output only)."""
        with self._new_line:
            return list(self._lines)

    def output(self, lines: int = 15) -> str:
        """The end of what the child printed: its last ``lines`` log lines, or its piped output."""
        if self.log is None:
            if self._pump_thread is not None and self.poll() is not None:
                self._pump_thread.join(2.0)  # what it printed last, before it ended
            return "".join(self.lines())
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_for_output(self, seconds: float) -> None:
        """Sleep until the child prints a line or ``seconds`` pass (a ``wait_until`` sleep)."""
        with self._new_line:
            self._new_line.wait(seconds)


def _exited(child: subprocess.Popen) -> BaseException:
    output = child.output() if isinstance(child, Child) else ""
    return RuntimeError(f"{child.args[0]} exited with code {child.returncode}:\n{output}")


def wait_until(
    ready: Callable[[], T],
    *,
    timeout: float,
    every: float = 0.5,
    watch: Iterable[subprocess.Popen] = (),
    exited: Callable[[subprocess.Popen], BaseException] = _exited,
    expired: Callable[[], BaseException] | None = None,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call ``ready()`` every ``every`` seconds until it returns something true; return that.

    Raises ``exited(process)`` as soon as a process in ``watch`` has ended, and ``expired()``
    (a ``TimeoutError`` by default) once ``timeout`` seconds have passed. ``sleep`` may be a
    condition's ``wait`` or :meth:`Child.wait_for_output`, to wake as soon as there is news.
    """
    watch = list(watch)
    deadline = clock() + timeout
    while True:
        answer = ready()
        if answer:
            return answer
        for process in watch:
            if process.poll() is not None:
                raise exited(process)
        left = deadline - clock()
        if left <= 0:
            raise expired() if expired else TimeoutError(f"not ready within {timeout:g} s")
        sleep(min(every, left))


def _signal(process: subprocess.Popen, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def terminate(
    process: subprocess.Popen,
    *,
    group: bool = False,
    first: int = signal.SIGTERM,
    grace: float = 20.0,
) -> int:
    """Stop ``process``: signal ``first``, wait up to ``grace`` seconds, then SIGKILL.

    ``group=True`` signals the child's whole process group, and once the child has ended
    kills what is left in it (executors and Python workers a JVM started). Returns the exit
    code; a process that has already ended is only reaped.
    """
    if process.poll() is None:
        _signal(process, first, group)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL, group)
            process.wait()
    if group:
        _signal(process, signal.SIGKILL, group)
    return process.returncode


def stop_requested(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> threading.Event:
    """An event that Ctrl-C and SIGTERM set, instead of interrupting what runs.

    For a main loop that polls (``while not stop.wait(1.0): ...``) and then cleans up. Call it
    from the main thread, as Python installs signal handlers only there.
    """
    stop = threading.Event()
    for sig in signals:
        signal.signal(sig, lambda *_: stop.set())
    return stop


def interrupt_on_sigterm() -> None:
    """SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does, for a program blocked in a call it
    cannot poll: one ``except KeyboardInterrupt`` then cleans up after either."""

    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)


def serve_until_stopped(
    service: Any,
    banner: Callable[[], Sequence[str]],
    *,
    start_error: type[Exception],
    did_not_start: str,
    stopped: str,
    died: Callable[[], str],
    stop: threading.Event | None = None,
) -> int:
    """The ``main()`` of a command that runs a service in the foreground.

    Starts ``service`` (a ``start_error`` ends it: ``did_not_start`` and the error on stderr,
    exit 1), prints ``banner()``, then waits for ``stop`` (by default Ctrl-C or SIGTERM, from
    before the start on: exit 0) or for the service to stop running on its own (``died()``
    on stderr, exit 1); stops the service either way and says ``stopped``. ``service`` has
    ``start()``, ``running()`` and ``stop()``.
    """
    stop = stop or stop_requested()
    try:
        service.start()
    except start_error as error:
        print(f"{did_not_start}: {error}", file=sys.stderr)
        return 1
    try:
        print("\n".join(banner()), flush=True)
        while not stop.wait(1.0):
            if not service.running():
                print(died(), file=sys.stderr)
                return 1
    finally:
        service.stop()
        print(stopped, flush=True)
    return 0
