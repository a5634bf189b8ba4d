"""The asyncio TCP server that hosts the emulator's connections."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from streamlab.paths import lock_file

from .broker import Broker
from .connection import IDLE_TIMEOUT, OPEN_TIMEOUT, Connection, ConnectionSettings
from .storage import Policy

_LOG = logging.getLogger(__name__)
# The course's hubs: heartbeats in, status changes out, and the alerts of streamlab.alerts.
DEFAULT_EVENTHUBS = {"heartbeats": 4, "status": 1, "alerts": 1}
KEY_NAME = "RootManageSharedAccessKey"
KEY_VALUE = "SAS_KEY_VALUE"  # the key of Microsoft's emulator: public, fine on loopback
KEEPALIVE_SECONDS = 60  # TCP keepalive: find peers that vanished without a FIN
RETENTION_CHECK_SECONDS = 60.0
#: The file in a data directory that the emulator using it holds locked.
LOCK_FILE = ".lock"


def connection_string(
    host: str,
    port: int,
    eventhub: str | None = None,
    key_name: str = KEY_NAME,
    key: str = KEY_VALUE,
) -> str:
    """The connection string Azure documents for its emulator (plain AMQP, no TLS)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    text = (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName={key_name};"
        f"SharedAccessKey={key};UseDevelopmentEmulator=true"
    )
    return text + (f";EntityPath={eventhub}" if eventhub else "")


@dataclass
class HubConfig:
    """Everything needed to run one emulator."""

    host: str = "127.0.0.1"
    port: int = 5672
    data_dir: Path | None = None  # None: a temporary directory, removed on stop
    eventhubs: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_EVENTHUBS))
    policy: Policy = field(default_factory=Policy)
    key_name: str = KEY_NAME  # the shared access policy the connection string names
    key: str = KEY_VALUE  # its key: tokens must be signed with it
    open_timeout: float = OPEN_TIMEOUT  # seconds a client has to send its AMQP open
    idle_timeout: float = IDLE_TIMEOUT  # seconds of silence before a connection is closed

    def __post_init__(self) -> None:
        if not self.key_name or not self.key or ";" in self.key_name + self.key:
            raise ValueError("the key name and key must be non-empty and contain no ';'")
        if self.open_timeout <= 0 or self.idle_timeout <= 0:
            raise ValueError("open_timeout and idle_timeout must be positive")


class HubServer:
    """Start with ``await start()``, stop with ``await stop()``."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.broker: Broker | None = None
        self.port = config.port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._upkeep: asyncio.Task | None = None
        self._temp_dir: str | None = None
        self._lock_fd: int | None = None
        self._settings = ConnectionSettings(
            {config.key_name: config.key}, config.open_timeout, config.idle_timeout
        )

    @property
    def connection_string(self) -> str:
        return connection_string(
            self.config.host, self.port, None, self.config.key_name, self.config.key
        )

    async def start(self) -> str:
        """Open storage, bind, and start serving; return the connection string."""
        data_dir = self.config.data_dir
        if data_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="streamlab-hub-")
            data_dir = Path(self._temp_dir)
        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock(data_dir)
            self.broker = Broker(data_dir, self.config.eventhubs, self.config.policy)
            sock = _bind(self.config.host, self.config.port)
            self.port = sock.getsockname()[1]
            self._server = await asyncio.start_server(self._serve, sock=sock, limit=2**20)
        except BaseException:
            self._release()
            raise
        self._upkeep = asyncio.get_running_loop().create_task(self._retention_loop())
        _LOG.info("listening on %s:%s, data in %s", self.config.host, self.port, data_dir)
        return self.connection_string

    def _lock(self, data_dir: Path) -> None:
        """One emulator per data directory: two writers would corrupt the logs."""
        self._lock_fd = lock_file(data_dir / LOCK_FILE)
        if self._lock_fd is None:
            raise RuntimeError(f"another emulator is using {data_dir}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                _tune(sock)
            assert self.broker is not None
            await Connection(self.broker, reader, writer, self._settings).run()
        except asyncio.CancelledError:
            # Cancelled by stop(): the connection already sent its AMQP close. Ending
            # normally keeps asyncio's stream callback from logging the cancellation.
            pass
        finally:
            self._connections.discard(task)

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(RETENTION_CHECK_SECONDS)
            try:
                assert self.broker is not None
                self.broker.enforce_retention()
            except Exception:
                _LOG.exception("retention check failed")

    async def stop(self) -> None:
        """Close every connection (with an AMQP close), then storage."""
        if self._server is not None:
            self._server.close()
        if self._upkeep is not None:
            self._upkeep.cancel()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        self._release()

    def _release(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable only from this machine."""
    if host in ("", "0.0.0.0", "::"):
        return False
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    # info[4] is (host, port[, flowinfo, scope_id]): the host is text, IPv6 perhaps with %scope
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def _tune(sock: socket.socket) -> None:
    """Options for an accepted socket."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small frames must not wait
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_SECONDS),
        ("TCP_KEEPINTVL", 10),
        ("TCP_KEEPCNT", 3),
    ):
        if hasattr(socket, name):  # Linux; macOS has only some of them
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _bind(host: str, port: int) -> socket.socket:
    """Bind exactly one listening socket (so port 0 means one port, not one per address)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
