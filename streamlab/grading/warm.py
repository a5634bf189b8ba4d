"""A warm grading child: Python, pytest, PySpark and a Spark session ready before the learner asks.

Grading one Spark exercise from cold spends most of its time before the first check runs:
starting Python, importing pytest and PySpark, starting a JVM and a Spark session, and the
first queries' one-off costs (class loading, the RocksDB library, Python workers). After each
grading, ``python -m streamlab.grading`` starts the next grading's child ahead of time
(``nox -s lab`` starts the first), so that all of it happens while the learner edits.

It is still one fresh child per grading: a warm child grades once and ends, and the grading
that claims it keeps its limits and its blame exactly as for a child it started itself. A warm
child that is stale is never used: when a file of any module it imported changed since it
started (the course's own code, an installed package, a module the learner's notebooks import
that the warm-up loaded), or the grading runs with other settings (the environment variables
that choose Python, Java, Spark and the course's folders; the working folder), it is ended and
the grading starts a child from cold, as it always did.

Two processes make one warm child, in a process group of their own:

- the *keeper* (``python -m streamlab.grading.warm SOCKET``) listens on a Unix socket whose
  name is derived from the course's folder, its build folder and its Python; it hands the one
  grading that connects to the child, then reports the child's exit status to that grading
  (which a process that is not the child's parent could not learn), and ends the child when
  that grading goes away. Nobody claiming the child within :data:`IDLE_LIMIT` ends both.
- the *child* (``--child FD``) warms up, says so, and waits for its one job: the arguments of
  :mod:`streamlab.grading.child` with the event pipe and the log file passed along
  (``SCM_RIGHTS``).

A course folder keeps :func:`children` warm children (two unless ``STREAMLAB_WARM_CHILDREN``
says otherwise), each with its keeper and socket, warmed one at a time: a keeper whose child is
ready starts the next keeper, and a grading takes a ready child before one still warming up.
So a regrade that comes right after a verdict, while the child that grading started warms
up, finds the other one ready.

A child warming up never competes with a grading for the two cores: every grading holds a
shared lock on :func:`grading_lock_path` from its start to its verdict (:func:`grading`), and
a child still warming up waits for that lock to be free before each step of its warm-up (a
grading that comes meanwhile takes it as it is, at once).

``STREAMLAB_WARM_GRADER=0`` turns all of it off (the course's own tests do, except those of
this module); gradings then start every child from cold.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from streamlab.paths import BUILD_DIR, REPO_ROOT

#: ``0`` turns warm children off.
ENABLE_ENV = "STREAMLAB_WARM_GRADER"
#: How many warm children a course folder keeps (default :data:`CHILDREN`, at most
#: :data:`MOST_CHILDREN`).
CHILDREN_ENV = "STREAMLAB_WARM_CHILDREN"
CHILDREN, MOST_CHILDREN = 2, 4
#: A warm child that no grading claims within this many seconds ends, with its JVM.
IDLE_LIMIT = 60 * 60.0
#: How long a grading waits for a warm child that is still warming up before it starts its
#: own from cold. A child that has warmed for a while is ahead of a cold start.
READY_WITHIN = 90.0
#: How long a grading waits for a keeper that start() left a moment ago to bind its socket.
LISTENING_WITHIN = 15.0
#: How often a child warming up asks whether the gradings it waits for have ended.
POLL_GRADINGS = 0.25
#: Where the keeper and its child write (their own log: a grading's output goes to its log).
LOG = BUILD_DIR / "logs" / "warm-grader.log"

#: Environment variables a warm child must share with the grading that claims it.
_SETTING_PREFIXES = ("STREAMLAB_", "SPARK_", "PYSPARK_", "JAVA_", "PYTHON", "HADOOP_")
_SETTINGS = ("TZ", "LANG", "LC_ALL")
#: What the grading sets for every child itself, and what the Spark session sets for its
#: workers whatever they were (a notebook's kernel that started Spark passes them on).
_NOT_SETTINGS = (
    "STREAMLAB_GRADING_FD",
    "PYTHONUNBUFFERED",
    ENABLE_ENV,
    CHILDREN_ENV,
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
)


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1") != "0"


def children(environ: Mapping[str, str] | None = None) -> int:
    """How many warm children the gradings of ``environ`` (default: this process's) keep."""
    environ = os.environ if environ is None else environ
    try:
        wanted = int(environ.get(CHILDREN_ENV, CHILDREN))
    except ValueError:
        wanted = CHILDREN
    return min(max(wanted, 1), MOST_CHILDREN)


def socket_path(slot: int = 0) -> Path:
    """A keeper's socket: ``slot`` of those of a course folder, build folder and Python."""
    key = f"{sys.executable}\0{REPO_ROOT}\0{BUILD_DIR}".encode()
    name = f"streamlab-grader-{hashlib.sha256(key).hexdigest()[:16]}"
    return Path(tempfile.gettempdir()) / (f"{name}-{slot}" if slot else name)


def grading_lock_path() -> Path:
    """The file a grading holds a shared lock on while it runs (see :func:`grading`)."""
    path = socket_path()
    return path.with_name(path.name + ".grading")


@contextmanager
def grading(path: Path | None = None) -> Iterator[None]:
    """Hold the grading lock (``path``, default :func:`grading_lock_path`) while a grading
    runs: children warming up wait for it to be free. Several gradings share it. Never
    raises: a lock that cannot be taken only lets a child warm up beside the grading."""
    fd = _open_lock(path)
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            except OSError:
                pass
        yield
    finally:
        if fd is not None:
            os.close(fd)  # which releases the lock, as a grading that dies does


def _open_lock(path: Path | None) -> int | None:
    """The grading lock's file (``path``, default :func:`grading_lock_path`) opened, made if
    missing; None when it cannot be."""
    try:
        return os.open(path or grading_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


def _slots(environ: Mapping[str, str] | None = None) -> list[Path]:
    return [socket_path(slot) for slot in range(children(environ))]


def settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What decides how a child behaves besides its arguments and the files it reads."""
    environ = os.environ if environ is None else environ
    chosen = {
        key: value
        for key, value in environ.items()
        if (key.startswith(_SETTING_PREFIXES) or key in _SETTINGS) and key not in _NOT_SETTINGS
    }
    # The Java on PATH, not PATH itself: nox and JupyterLab's terminal each put the course's
    # own folders first once more, which changes nothing a child runs.
    java = shutil.which("java", path=environ.get("PATH")) or ""
    return {"python": sys.executable, "cwd": os.getcwd(), "java": java, **chosen}


# --- the grading's side ---------------------------------------------------------------------


def start(environ: Mapping[str, str] | None = None, *, ready: Path | None = None) -> None:
    """Start a warm child for the gradings to come, unless warm children are off, one is
    warming up already (it starts the next when it is ready), or every slot has one.

    ``environ`` is the environment of the gradings to come (default: this process's);
    ``ready`` is the socket of a keeper calling this as its own child is ready.
    Returns at once: the keeper runs detached, in a session of its own, its output in
    :data:`LOG`. Never raises: without a warm child the next grading starts from cold.
    """
    environ = os.environ if environ is None else environ
    if environ.get(ENABLE_ENV, "1") == "0":
        return
    states = {path: "ready" if path == ready else _state(path) for path in _slots(environ)}
    empty = [path for path, state in states.items() if state == "none"]
    if "warming" in states.values() or not empty:
        return
    path = empty[0]
    try:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(LOG, "ab") as log:
            keeper = subprocess.Popen(
                [sys.executable, "-m", "streamlab.grading.warm", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env={**environ, "PYTHONUNBUFFERED": "1"},
            )
        # For stop(), which may come before the keeper has bound its socket.
        _pid_file(path).write_text(str(keeper.pid))
    except OSError:
        pass


def stop() -> bool:
    """End the warm children of this course folder, waiting or still warming up; True when
    there was one."""
    ended = False
    # Twice: a keeper whose child got ready as the first round ended it may have started the
    # next one.
    for _ in range(2):
        for slot in range(MOST_CHILDREN):
            ended = _stop(socket_path(slot)) or ended
    return ended


def _stop(path: Path) -> bool:
    keepers = set()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as link:
            link.settimeout(5)
            link.connect(str(path))
            keepers.add(int(_Messages(link).read()["keeper"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    started = _started_keeper(path)
    if started is not None:
        keepers.add(started)
    try:
        _pid_file(path).unlink(missing_ok=True)
    except OSError:
        pass
    for keeper in keepers:
        _kill_group(keeper)
    return bool(keepers)


def _started_keeper(path: Path) -> int | None:
    """The keeper start() last left for ``path``, while it runs; None when it has ended."""
    try:
        started = int(_pid_file(path).read_text())
        # Only a keeper: the number may belong to another process by now.
        if b"streamlab.grading.warm" in Path(f"/proc/{started}/cmdline").read_bytes():
            return started
    except (OSError, ValueError):
        pass
    return None


def _pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def readiness() -> str:
    """``"ready"`` (a warm child is ready), ``"warming"`` (one is started, none ready yet) or
    ``"none"``: the warm children of this course folder, as a grading starting now would find
    them."""
    states = [_state(path) for path in _slots()]
    return next((s for s in ("ready", "warming") if s in states), "none")


def warming() -> bool:
    """Whether a warm child of this course folder is warming up (another may be ready)."""
    return any(_state(path) == "warming" for path in _slots())


def _state(path: Path) -> str:
    """``"ready"``, ``"warming"`` or ``"none"``: the keeper of one socket and its child."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as link:
            link.settimeout(5)
            link.connect(str(path))
            return "ready" if _Messages(link).read().get("ready") else "warming"
    except (OSError, ValueError):
        pass
    if _started_keeper(path) is not None:
        return "warming"  # started, its socket not bound yet
    return "none"


class WarmChild:
    """A claimed warm child, as the supervisor uses a :class:`subprocess.Popen`.

    ``pid`` is the keeper's, which leads the process group: killing the group ends the keeper,
    the child, its JVM and its Python workers. The exit status is the child's, as the keeper
    reports it; a keeper that ended without reporting one was killed (-SIGKILL).
    """

    def __init__(self, messages: _Messages, keeper: int, child: int) -> None:
        link = messages.link
        self._link = link
        self._messages = messages
        self.pid = keeper
        self.child_pid = child
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("warm grading child", timeout or 0)
            self._read(left)
        return self.returncode

    def _read(self, timeout: float | None) -> None:
        self._link.settimeout(timeout)
        try:
            message = self._messages.read()
        except (TimeoutError, BlockingIOError):
            return
        except (OSError, ValueError):
            message = None
        if message is not None and "exit" in message:
            self.returncode = int(message["exit"])
        else:
            self.returncode = -signal.SIGKILL
        self._link.close()


def claim(
    args: list[str],
    events_fd: int,
    log_fd: int,
    env: dict[str, str],
    waiting: Callable[[], None] | None = None,
) -> WarmChild | None:
    """Hand one grading to a warm child, if a fresh one is there; None means start from cold.

    A ready child is taken before one still warming up, which takes the grading at its next
    step. ``env`` is the environment a cold child would get; the warm child must match its
    settings. ``waiting`` is called about once a second while the child is still warming up.
    """
    if not enabled():
        return None
    job = {"args": args, "settings": settings(env)}
    fds = (events_fd, log_fd)
    warming = []
    for path in _slots():
        said = _hello(path, within=0)
        if said is None:
            if _started_keeper(path) is not None:
                warming.append(path)
        elif not said[1].get("ready"):
            said[0].link.close()  # the keeper lets a link go that sends no job
            warming.append(path)
        elif (child := _hand(*said, job, fds, waiting)) is not None:
            return child
    for path in warming:
        said = _hello(path)
        if said is not None and (child := _hand(*said, job, fds, waiting)) is not None:
            return child
    return None


def _hello(path: Path, within: float = LISTENING_WITHIN) -> tuple[_Messages, dict] | None:
    """A link to the keeper at ``path`` and what it says first (its pid, whether its child is
    ready); None when there is none (see :func:`_connect` for ``within``)."""
    link = _connect(path, within)
    if link is None:
        return None
    messages = _Messages(link)
    try:
        return messages, messages.read()
    except (OSError, ValueError):
        link.close()
        return None


def _hand(
    messages: _Messages,
    hello: dict,
    job: dict,
    fds: tuple[int, int],
    waiting: Callable[[], None] | None,
) -> WarmChild | None:
    """Send ``job`` to the keeper that said ``hello``: its child, or None when it was stale."""
    link = messages.link
    try:
        keeper = int(hello["keeper"])
        socket.send_fds(link, [json.dumps(job).encode() + b"\n"], list(fds))
        try:
            answer = _answer_within(messages, READY_WITHIN, waiting)
        except TimeoutError:
            _kill_group(keeper)
            raise
        if "pid" not in answer:
            # Stale: the keeper ends the child; the grading tries the next, or starts from cold.
            _note(f"a warm grading child was not used: {answer.get('stale', answer)}")
            link.close()
            return None
        return WarmChild(messages, keeper, int(answer["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        link.close()
        return None


def _connect(path: Path, within: float = LISTENING_WITHIN) -> socket.socket | None:
    """A link to the keeper at ``path``; None when there is none to wait for.

    A keeper that start() has just left (the grading before ended a moment ago) is given
    ``within`` seconds to bind its socket: its child is already ahead of a cold start.
    One that does not listen by then is ended, so that the cold child does not share the
    machine with a child warming up for nobody. ``within=0`` only tries once, ending nothing.
    """
    deadline = time.monotonic() + within
    while True:
        link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        link.settimeout(5)
        try:
            link.connect(str(path))
            return link
        except OSError:
            link.close()
        keeper = _started_keeper(path)
        if keeper is None or within <= 0:
            return None
        if time.monotonic() > deadline:
            _note(f"the keeper {keeper} did not listen within {LISTENING_WITHIN:g} s: ended")
            _kill_group(keeper)
            return None
        time.sleep(0.05)


def _answer_within(messages: _Messages, seconds: float, waiting: Callable[[], None] | None) -> dict:
    """The keeper's answer to a job, read a second at a time so that ``waiting`` is told."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the warm grading child did not answer")
        messages.link.settimeout(min(left, 1.0))
        try:
            return messages.read()
        except TimeoutError:
            if waiting is not None:
                waiting()


def _answers(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1)
            # Connecting only queues this probe: the keeper takes it for a grading, sees no
            # job follow and goes on waiting for the next one.
            probe.connect(str(path))
            return True
    except OSError:
        return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _note(text: str) -> None:
    try:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {text}\n")
    except OSError:
        pass


class _Messages:
    """The JSON lines a socket brings, one at a time, whatever chunks they arrive in."""

    def __init__(self, link: socket.socket) -> None:
        self.link = link
        self._buffer = b""

    def read(self) -> dict:
        """The next message; ValueError when the other side closed first. A timeout or a
        non-blocking socket with nothing to read raises as ``recv`` does, losing nothing."""
        while b"\n" not in self._buffer:
            chunk = self.link.recv(65536)
            if not chunk:
                raise ValueError("closed")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)


def _send(link: socket.socket, message: dict) -> None:
    link.sendall(json.dumps(message).encode() + b"\n")


# --- the keeper -----------------------------------------------------------------------------


def keeper(path: Path) -> int:
    """Start the child, hand it to the first grading that sends a job, report its end."""
    listener = _listen(path)
    if listener is None:
        return 0  # another keeper is there
    ours, theirs = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-m", "streamlab.grading.warm", "--child", str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
    )
    theirs.close()
    _note(f"warm grading child {child.pid} warming up")
    from_child = _Messages(ours)
    try:
        grading, job, fds = _wait_for_job(listener, from_child, child, path)
        if grading is None:
            return 0
        with grading:
            socket.send_fds(ours, [job], fds)
            for fd in fds:
                os.close(fd)
            try:
                answer = from_child.read()
                while "ready" in answer:  # said while the job was already on its way
                    _note(_ready_note(child.pid, answer))
                    answer = from_child.read()
            except ValueError:
                _note(f"warm grading child {child.pid} ended before it took its job")
                return 0  # the grading starts from cold
            _send(grading, answer)
            if "pid" in answer:
                _report_end(grading, child)
        return 0
    finally:
        listener.close()
        _forget_pid(path)
        if child.poll() is None:
            child.kill()
            child.wait()


def _listen(path: Path) -> socket.socket | None:
    if _answers(path):
        return None
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    return listener


def _wait_for_job(listener, from_child, child, path):
    """The first connection that sends a job, with the job and its two file descriptors.

    (None, None, None) when the child ended, or when nobody came within :data:`IDLE_LIMIT`.
    Connections that send nothing (a probe asking whether a keeper is there) are let go.
    """
    deadline = time.monotonic() + IDLE_LIMIT
    inode = _identity(path)  # the file this keeper bound (a socket's own fstat differs)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(from_child.link, selectors.EVENT_READ, "child")
    ready = False
    try:
        while (left := deadline - time.monotonic()) > 0:
            if not _owns(path, inode):
                # Another keeper, started at the same moment, took the socket's name.
                _note(f"warm grading child {child.pid} ended: another keeper took its socket")
                return None, None, None
            for key, _ in selector.select(timeout=min(left, 30.0)):
                if key.data == "child":
                    try:
                        said = from_child.read()
                    except ValueError:
                        _note(f"warm grading child {child.pid} ended while warming up")
                        return None, None, None
                    ready = True
                    _note(_ready_note(child.pid, said))
                    selector.unregister(from_child.link)
                    # The next slot's child warms up now, not beside this one's.
                    threading.Thread(target=start, kwargs={"ready": path}, daemon=True).start()
                    continue
                grading, job, fds = _take_job(listener, ready)
                if grading is not None:
                    _unlink(path, inode)
                    _forget_pid(path)
                    return grading, job, fds
        _note(f"warm grading child {child.pid} unclaimed for {IDLE_LIMIT / 60:g} min: ended")
        return None, None, None
    finally:
        selector.close()
        _unlink(path, inode)


def _ready_note(pid: int, said: dict) -> str:
    skipped = said.get("skipped")
    if skipped:
        return (
            f"warm grading child {pid} taken by a grading after {said.get('ready')} s of its "
            f"warm-up, skipping {', '.join(skipped)}"
        )
    return f"warm grading child {pid} ready after {said.get('ready')} s"


def _take_job(listener: socket.socket, ready: bool):
    """Accept one connection: (it, its job, the event pipe and log it passed) or Nones."""
    grading, _ = listener.accept()
    grading.settimeout(5)
    fds: list[int] = []
    try:
        _send(grading, {"keeper": os.getpid(), "ready": ready})
        job, fds, _, _ = socket.recv_fds(grading, 1 << 20, 2)
        while job and not job.endswith(b"\n"):
            more = grading.recv(1 << 20)
            if not more:
                break
            job += more
        if job.endswith(b"\n") and len(fds) == 2:
            grading.settimeout(None)
            return grading, job, fds
    except OSError:
        pass
    for fd in fds:
        os.close(fd)
    grading.close()
    return None, None, None


def _forget_pid(path: Path) -> None:
    """Remove start()'s note of this keeper: its slot is free for the next one."""
    try:
        if _pid_file(path).read_text() == str(os.getpid()):
            _pid_file(path).unlink()
    except OSError:
        pass


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What tells one socket file from another made later at the same path: inode numbers
    alone may be reused."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino, status.st_ctime_ns


def _owns(path: Path, inode: tuple[int, int, int] | None) -> bool:
    """Whether the socket file at ``path`` is still the one this keeper bound."""
    return inode is not None and _identity(path) == inode


def _unlink(path: Path, inode: tuple[int, int, int] | None) -> None:
    """Remove the socket file if it is still this keeper's."""
    if _owns(path, inode):
        try:
            path.unlink()
        except OSError:
            pass


def _report_end(grading: socket.socket, child: subprocess.Popen) -> None:
    """Tell the grading the child's exit status; end the child if the grading goes first."""
    selector = selectors.DefaultSelector()
    selector.register(grading, selectors.EVENT_READ)
    try:
        while child.poll() is None:
            if selector.select(timeout=0.5) and not grading.recv(1):
                _note(f"the grading using child {child.pid} went away: ending the child")
                child.kill()
                child.wait()
                return
        _send(grading, {"exit": child.returncode})
    except OSError:
        pass
    finally:
        selector.close()


# --- the child ------------------------------------------------------------------------------


def warm_child(fd: int) -> int:
    """Warm up, then grade the one job the keeper passes on, if this child is still fresh."""
    link = socket.socket(fileno=fd)
    started_with = settings()
    began = time.monotonic()
    skipped = _warm_up(lambda timeout=0.0: bool(select.select([link], [], [], timeout)[0]))
    files = _module_files()
    _send(link, {"ready": round(time.monotonic() - began, 1), "skipped": skipped})
    job, fds, _, _ = socket.recv_fds(link, 1 << 20, 2)
    while job and not job.endswith(b"\n"):
        job += link.recv(1 << 20)
    if not job:
        return 0
    request = json.loads(job)
    reason = stale(started_with, request["settings"], files)
    if reason:
        _send(link, {"stale": reason})
        return 0
    _send(link, {"pid": os.getpid()})
    events_fd, log_fd = fds
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    from streamlab.grading import child
    from streamlab.grading.events import FD_VARIABLE

    os.environ[FD_VARIABLE] = str(events_fd)
    code = child.main(request["args"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def stale(started_with: dict[str, str], wanted: dict[str, str], files: dict) -> str:
    """Why a warm child cannot grade a job wanting ``wanted`` settings; "" when it can."""
    changed = sorted(
        key for key in set(started_with) | set(wanted) if started_with.get(key) != wanted.get(key)
    )
    if changed:
        return "the grading's settings differ: " + ", ".join(changed)
    for path, seen in files.items():
        if _stat(path) != seen:
            return f"{path} changed since the child started"
    return ""


def _stat(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _module_files() -> dict[str, tuple[int, int] | None]:
    """Every file behind a module this process imported, with what it was when it started."""
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            files[path] = _stat(path)
    return files


def _warm_up(job_waiting: Callable[..., bool] = lambda timeout=0.0: False) -> list[str]:
    """Import what checks import, start the checks' Spark session, and run what every
    grading's first queries pay for once: a batch job, a Python UDF, a stateful streaming
    query on the RocksDB state store, and a ``transformWithState`` query (its Python state
    server, timers and the parquet sink), the operator most checks run.

    A grading that comes while the child is still warming takes it at the next step: what is
    done is ahead of a child started from cold, and the steps left would only make the grading
    wait for work it does itself. Returns the names of the steps skipped so. Before each step
    it waits while a grading's child runs (:func:`_wait_for_gradings`).

    ``job_waiting(timeout)`` tells whether a grading sent its job, waiting up to ``timeout``
    seconds for one.
    """
    steps = warm_up_steps()
    for done, (name, step) in enumerate(steps):
        if job_waiting() or _wait_for_gradings(job_waiting, name):
            return [name for name, _ in steps[done:]]
        step()
    return []


def _wait_for_gradings(
    job_waiting: Callable[..., bool], step: str, path: Path | None = None
) -> bool:
    """Wait until no grading holds the grading lock (``path``, default
    :func:`grading_lock_path`); True when a job came meanwhile. Never raises: a lock that
    cannot be read is taken for a free one."""
    fd = _open_lock(path)
    if fd is None:
        return False
    said = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    _note(
                        f"warm grading child {os.getpid()} waits for a grading to end before {step}"
                    )
                    said = True
                if job_waiting(POLL_GRADINGS):
                    return True
                continue
            except OSError:
                return False
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
    finally:
        os.close(fd)


def warm_up_steps() -> list[tuple[str, Callable[[], object]]]:
    """The warm-up in the order it runs, each step short enough to wait for."""
    made: dict[str, Any] = {}

    def session() -> None:
        from streamlab.session import CHECKS_SESSION, spark_session

        # The session the checks' ``spark`` fixture asks for (streamlab.spark_fixtures).
        master, conf = CHECKS_SESSION["master"], CHECKS_SESSION["conf"]
        assert isinstance(master, str) and isinstance(conf, dict)
        made["spark"] = spark_session(master, conf=conf)

    return [
        ("imports", _import_what_checks_import),
        ("the Spark session", session),
        ("a batch job and a Python UDF", lambda: _first_jobs(made["spark"])),
        ("a stateful streaming query", lambda: _first_streaming_query(made["spark"], "counts")),
        ("a transformWithState query", lambda: _first_streaming_query(made["spark"], "statuses")),
    ]


def _import_what_checks_import() -> None:
    import nbformat  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pytest  # noqa: F401


def _first_jobs(spark) -> None:
    from pyspark.sql import functions as F

    spark.range(8).groupBy((F.col("id") % 2).alias("k")).count().collect()
    spark.range(4).select(F.udf(lambda x: x + 1, "long")("id")).collect()


def _first_streaming_query(spark, name: str) -> None:
    """``counts``: a streaming count into a memory table; ``statuses``: a
    ``transformWithState`` query with a processing-time timer into parquet files; each run to
    the end of two files."""
    from streamlab.deadlines import finish
    from streamlab.grading.warm_processor import WarmUpProcessor
    from streamlab.session import NO_DATA_BATCHES, session_conf

    with tempfile.TemporaryDirectory(prefix="streamlab-warm-") as folder:
        scratch = Path(folder)
        source = scratch / "in"
        source.mkdir()
        (source / "0.json").write_text('{"k": "a"}\n{"k": "b"}\n')
        (source / "1.json").write_text('{"k": "a"}\n')
        keys = spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(source))
        if name == "counts":
            what = "the warm grading child's first stateful query"
            writer = keys.groupBy("k").count().writeStream.format("memory")
            writer = writer.queryName("streamlab_warm_up").outputMode("update")
        else:
            what = "the warm grading child's first transformWithState query"
            statuses = keys.groupBy("k").transformWithState(
                WarmUpProcessor(), "k string, n long", "Append", "ProcessingTime"
            )
            writer = statuses.writeStream.format("parquet").option("path", str(scratch / "out"))
        writer = writer.option("checkpointLocation", str(scratch / "checkpoint"))
        # Without no-data batches, a query with processing-time timers ends with its input.
        with session_conf(spark, {NO_DATA_BATCHES: "false"}):
            query = writer.trigger(availableNow=True).start()
        finish(query, within=120, what=what)
        if name == "counts":
            spark.catalog.dropTempView("streamlab_warm_up")
        else:
            spark.read.parquet(str(scratch / "out")).collect()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return warm_child(int(argv[1]))
    if len(argv) != 1:
        print("usage: python -m streamlab.grading.warm SOCKET", file=sys.stderr)
        return 2
    return keeper(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
