"""Start and stop the emulator from Python: in a background thread, or as a subprocess.

In-process (a thread with its own event loop)::

    with Hub(port=0) as hub:            # port 0: any free port
        client = EventHubProducerClient.from_connection_string(
            hub.connection_string, eventhub_name="heartbeats")

As a subprocess (can be killed with SIGKILL to test durability)::

    proc = start_subprocess(data_dir="/tmp/hub")
    proc.connection_string; proc.kill(); proc.wait()
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from streamlab import processes
from streamlab.paths import in_use

from .connection import IDLE_TIMEOUT, OPEN_TIMEOUT
from .server import (
    DEFAULT_EVENTHUBS,
    KEY_NAME,
    KEY_VALUE,
    LOCK_FILE,
    HubConfig,
    HubServer,
    connection_string,
)
from .storage import Policy

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding streamlab/


def _with_entity(conn_str: str, eventhub: str | None) -> str:
    return conn_str + (f";EntityPath={eventhub}" if eventhub else "")


class Hub:
    """The emulator in a background thread of this process."""

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        eventhubs: Mapping[str, int] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        policy: Policy | None = None,
        key_name: str = KEY_NAME,
        key: str = KEY_VALUE,
        open_timeout: float = OPEN_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        """``key_name``/``key``: the shared access policy tokens must be signed with (the
        connection string carries it); ``open_timeout``: seconds a client has to send its
        AMQP open; ``idle_timeout``: seconds of silence after which a connection is closed
        (advertised to clients, which send empty frames well before it)."""
        self.config = HubConfig(
            host=host,
            port=port,
            data_dir=Path(data_dir) if data_dir is not None else None,
            eventhubs=dict(eventhubs or DEFAULT_EVENTHUBS),
            policy=policy or Policy(),
            key_name=key_name,
            key=key,
            open_timeout=open_timeout,
            idle_timeout=idle_timeout,
        )
        self._server: HubServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port: int | None = None

    @property
    def connection_string(self) -> str:
        if self.port is None:
            raise RuntimeError("the hub is not running; call start() first")
        return connection_string(
            self.config.host, self.port, None, self.config.key_name, self.config.key
        )

    def connection_string_for(self, eventhub: str) -> str:
        """The connection string with ``EntityPath`` set to one event hub."""
        return _with_entity(self.connection_string, eventhub)

    def start(self, timeout: float = 30.0) -> str:
        """Start serving; return the connection string once the port is open."""
        if self._thread is not None:
            return self.connection_string
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="streamlab-hub", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the hub did not start in time")
        if self._error is not None:
            self._thread.join(timeout)
            self._thread = None
            raise self._error
        return self.connection_string

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._server = HubServer(self.config)
            try:
                await self._server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self.port = self._server.port
            self._ready.set()
            await self._stop.wait()
            await self._server.stop()

        asyncio.run(main())

    def stop(self, timeout: float = 30.0) -> None:
        """Close all connections and storage, and end the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop already ended
                pass
        self._thread.join(timeout)
        self._thread = None
        self.port = None

    def __enter__(self) -> Hub:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HubProcess:
    """A handle on an emulator running as a subprocess."""

    def __init__(self, popen: processes.Child, connection_string: str) -> None:
        self.popen, self.connection_string = popen, connection_string

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def connection_string_for(self, eventhub: str) -> str:
        return _with_entity(self.connection_string, eventhub)

    def output(self) -> str:
        """The last lines the emulator printed (stdout and stderr)."""
        return self.popen.output()

    def kill(self) -> None:
        """SIGKILL: no chance to clean up (for durability tests)."""
        if self.popen.poll() is None:
            self.popen.kill()

    def terminate(self) -> None:
        """SIGTERM: the emulator closes connections and storage, then exits 0."""
        if self.popen.poll() is None:
            self.popen.terminate()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout)

    def stop(self, timeout: float = 15.0) -> int:
        """Terminate, wait, and kill if it does not exit in time."""
        return processes.terminate(self.popen, grace=timeout)

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_subprocess(
    data_dir: str | os.PathLike | None = None,
    eventhubs: Mapping[str, int] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    extra_args: Sequence[str] = (),
    timeout: float = 30.0,
) -> HubProcess:
    """Run ``python -m streamlab.hub`` and wait for its connection-string line.

    ``data_dir`` None: a temporary directory, removed when the emulator stops.
    """
    args = [sys.executable, "-m", "streamlab.hub", "--host", host, "--port", str(port)]
    for name, count in (eventhubs or DEFAULT_EVENTHUBS).items():
        args += ["--eventhub", f"{name}:{count}"]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    args += list(extra_args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    child = processes.Child(args, env=env)

    def printed_connection_string() -> str:
        """The connection string once the hub printed it; "" until then."""
        return next((x.strip() for x in child.lines() if x.startswith("Endpoint=sb://")), "")

    try:
        line = processes.wait_until(
            printed_connection_string,
            timeout=timeout,
            every=0.2,
            watch=[child],
            exited=lambda _: RuntimeError(
                f"streamlab-hub exited with code {child.returncode}:\n" + child.output()
            ),
            expired=lambda: TimeoutError(
                "streamlab-hub did not print its connection string:\n" + child.output()
            ),
            sleep=child.wait_for_output,
        )
    except TimeoutError:
        child.kill()
        child.wait()
        raise
    return HubProcess(child, line)


def start_beside_others(
    data_dir: Path, port: int, *, say: Callable[[str], object] = print, **options: Any
) -> HubProcess:
    """An emulator on ``data_dir`` and ``port``, or, where another emulator holds them (a
    second ``nox -s lab``, a test beside a learner's), on a free port and a data directory
    of its own: never a refusal.

    A data directory of its own is temporary: the emulator removes it when it stops. ``say``
    tells the user what was chosen instead; ``options`` go to :func:`start_subprocess`.
    """
    chosen: Path | None = data_dir
    if in_use(data_dir / LOCK_FILE):
        say(
            f"Another Event Hubs emulator is using {data_dir}; this one keeps its events in a "
            "temporary folder, deleted when it stops."
        )
        chosen = None
    if port and not _port_free(options.get("host", "127.0.0.1"), port):
        say(f"Port {port} is taken; the Event Hubs emulator takes another one.")
        port = 0
    try:
        return start_subprocess(data_dir=chosen, port=port, **options)
    except RuntimeError:  # another emulator took the folder or the port a moment ago
        return start_subprocess(data_dir=None, port=0, **options)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


#: Set by ``nox -s lab`` for its notebooks: the connection string of the hub it started.
HUB_ENV = "STREAMLAB_HUB_CONNECTION_STRING"
_course_hub: Hub | None = None


def course_connection_string() -> str:
    """The course's hub: the one ``nox -s lab`` started, else one started in this process.

    Notebooks call this instead of hard-coding a connection string, so the same cell works
    under ``nox -s lab``, under nbval, and (with the variable set to an Azure namespace's
    connection string) against Azure Event Hubs. A hub started here keeps its events in a
    temporary folder, removed when this process ends.
    """
    global _course_hub
    if os.environ.get(HUB_ENV):
        return os.environ[HUB_ENV]
    if _course_hub is None:
        _course_hub = Hub(port=0)
        _course_hub.start()
        atexit.register(_course_hub.stop)
    return _course_hub.connection_string
