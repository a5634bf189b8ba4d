"""One client connection: protocol headers, SASL, open/close, its sessions and their frames.

Every connection runs in its own task. Errors a client causes (garbage bytes, bad
frames, unknown entities) end that client's link or connection with an AMQP error;
they never reach the server loop. Output is coalesced per event-loop turn and the
reader waits (``backpressure``) when a client stops reading, so a slow client only
slows itself.

Deadlines, as the service has them: a client must send ``open`` within
``open_timeout`` seconds of connecting, and once open must send something (a frame,
or an empty frame as a heartbeat) at least every ``idle_timeout`` seconds, the value
advertised in our ``open``; otherwise the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import frames
from .attach import attach
from .auth import Grant
from .broker import Broker
from .codec import DecodeError
from .conditions import Condition
from .frames import Performative, ProtocolError
from .session import WINDOW, Session

_LOG = logging.getLogger(__name__)
MAX_FRAME_SIZE = 256 * 1024
OPEN_TIMEOUT = 10.0  # seconds from accept to the client's open
IDLE_TIMEOUT = 120.0  # seconds; what the service advertises in its open
HIGH_WATER = 1024 * 1024  # bytes buffered for a client before we wait for it to read


@dataclass
class ConnectionSettings:
    """What every connection of one emulator shares: keys and deadlines."""

    keys: dict[str, str] = field(default_factory=dict)  # policy name -> key
    open_timeout: float = OPEN_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT


class ConnectionState(Enum):
    """Where a connection is: waiting for the client's open, open, or closed."""

    START = "start"  # headers and SASL exchanged or under way; no open yet
    OPENED = "opened"
    CLOSED = "closed"


class Connection:
    """Serves one client until it closes, breaks the protocol, or the server stops."""

    def __init__(
        self,
        broker: Broker,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        settings: ConnectionSettings,
    ) -> None:
        self.broker, self.reader, self.writer = broker, reader, writer
        self.settings = settings
        self.keys = settings.keys
        self.grants: list[Grant] = []  # what the tokens put on $cbs allow
        self.sessions: dict[int, Session] = {}  # by the client's channel
        self.remote_max_frame_size = 512
        self.state = ConnectionState.START
        self._out = bytearray()
        self._flush_scheduled = False
        self._last_read = time.monotonic()

    @property
    def opened(self) -> bool:
        return self.state is ConnectionState.OPENED

    @property
    def closed(self) -> bool:
        return self.state is ConnectionState.CLOSED

    def _set_state(self, state: ConnectionState) -> None:
        if state is not self.state:
            _LOG.debug("connection %s -> %s", self.state.value, state.value)
            self.state = state

    def authorized(self, entity_path: str) -> bool:
        """True when a token put on this connection covers ``entity_path``, now."""
        now = time.time()
        self.grants = [g for g in self.grants if g.expires > now]
        return any(grant.covers(entity_path, now) for grant in self.grants)

    # ---------------------------------------------------------------- output

    def send(self, data: bytes) -> None:
        """Queue bytes; they are written once per event-loop turn (fewer syscalls)."""
        if self.closed:
            return
        self._out += data
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and not self.writer.is_closing():
            self.writer.write(bytes(self._out))
        self._out.clear()

    async def backpressure(self) -> None:
        """Wait while the client has not read what we already sent."""
        if self.writer.transport.get_write_buffer_size() + len(self._out) > HIGH_WATER:
            self._flush()
            await self.writer.drain()

    # ---------------------------------------------------------------- main loop

    async def run(self) -> None:
        watchdog = None
        try:
            await asyncio.wait_for(self._open(), self.settings.open_timeout)
            watchdog = asyncio.get_running_loop().create_task(self._watch_idle())
            while not self.closed:
                await self._read_frame()
                await self.backpressure()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        except ProtocolError as exc:
            self._close_with(exc.condition, exc.description)
        except DecodeError as exc:
            self._close_with(Condition.DECODE_ERROR, str(exc))
        except asyncio.CancelledError:
            self._close_with(Condition.CONNECTION_FORCED, "The emulator is shutting down.")
            raise
        except Exception as exc:
            _LOG.exception("connection failed")
            self._close_with(Condition.INTERNAL_ERROR, f"emulator error: {exc}")
        finally:
            if watchdog is not None:
                watchdog.cancel()
            self._teardown()

    async def _open(self) -> None:
        """Protocol headers, SASL and the client's open, all within the open deadline."""
        await self._handshake()
        while not self.opened:
            await self._read_frame()

    async def _watch_idle(self) -> None:
        """Close the connection when the client sends nothing for the idle timeout."""
        limit = self.settings.idle_timeout
        while not self.closed:
            silent = time.monotonic() - self._last_read
            if silent >= limit:
                _LOG.info("closing a connection silent for %.1f s", silent)
                self._close_with(
                    Condition.RESOURCE_LIMIT_EXCEEDED,
                    f"Connection idle for more than {limit:g} seconds: nothing "
                    "was received, not even an empty frame.",
                )
                self.writer.close()  # the reader then sees end of stream
                return
            await asyncio.sleep(limit - silent)

    def _close_with(self, condition: Condition, description: str) -> None:
        if self.opened:
            self.send(frames.close_frame(frames.error(condition, description)))
            self._flush()
        self._set_state(ConnectionState.CLOSED)

    def _teardown(self) -> None:
        self._set_state(ConnectionState.CLOSED)
        for session in self.sessions.values():
            session.end()
        self.sessions.clear()
        self._flush()
        self.writer.close()

    async def _handshake(self) -> None:
        header = await self.reader.readexactly(8)
        if header == frames.SASL_HEADER:
            self.writer.write(
                frames.SASL_HEADER
                + frames.sasl_mechanisms_frame(["ANONYMOUS", "PLAIN", "EXTERNAL"])
            )
            while True:  # any mechanism and credentials are fine on a local emulator
                frame_type, _, body = await self._read_raw()
                if (
                    frame_type == frames.SASL_FRAME
                    and frames.parse_body(body).code == frames.SASL_INIT
                ):
                    break
            self.writer.write(frames.sasl_outcome_frame(0))
            header = await self.reader.readexactly(8)
        if header != frames.AMQP_HEADER:
            self.writer.write(frames.AMQP_HEADER)  # tell the peer what we speak, then go
            raise ConnectionError("not an AMQP 1.0 client")
        self.writer.write(frames.AMQP_HEADER)

    async def _read_raw(self) -> tuple[int, int, bytes]:
        head = await self.reader.readexactly(frames.FRAME_HEADER.size)
        size, doff, frame_type, channel = frames.FRAME_HEADER.unpack(head)
        if size < 8 or doff < 2 or doff * 4 > size or size > MAX_FRAME_SIZE:
            raise ProtocolError(Condition.FRAMING_ERROR, f"bad frame header {head!r}")
        body = await self.reader.readexactly(size - 8) if size > 8 else b""
        self._last_read = time.monotonic()
        return frame_type, channel, body[doff * 4 - 8 :]

    async def _read_frame(self) -> None:
        frame_type, channel, body = await self._read_raw()
        if not body:
            return  # an empty frame: a heartbeat
        if frame_type != frames.AMQP_FRAME:
            raise ProtocolError(Condition.FRAMING_ERROR, "unexpected frame type")
        perf = frames.parse_body(body)
        if not self.opened and perf.code != frames.OPEN:
            raise ProtocolError(Condition.NOT_ALLOWED, "the first frame must be open")
        handler = _HANDLERS.get(perf.code)
        if handler is None:
            raise ProtocolError(Condition.NOT_IMPLEMENTED, f"performative 0x{perf.code:x}")
        handler(self, channel, perf)

    # ---------------------------------------------------------------- performatives

    def _on_open(self, channel: int, perf: Performative) -> None:
        if self.opened:
            raise ProtocolError(Condition.ILLEGAL_STATE, "open received twice")
        self._set_state(ConnectionState.OPENED)
        self.remote_max_frame_size = max(
            512, min(perf.field("max_frame_size", 2**32 - 1), 2**32 - 1)
        )
        self.send(
            frames.open_frame(
                "streamlab-hub", MAX_FRAME_SIZE, 4095, int(self.settings.idle_timeout * 1000)
            )
        )

    def _on_close(self, channel: int, perf: Performative) -> None:
        self.send(frames.close_frame())
        self._flush()
        self._set_state(ConnectionState.CLOSED)

    def _on_begin(self, channel: int, perf: Performative) -> None:
        if channel in self.sessions:
            raise ProtocolError(Condition.ILLEGAL_STATE, f"channel {channel} already has a session")
        used = {s.channel for s in self.sessions.values()}
        local = next(c for c in range(len(used) + 1) if c not in used)
        session = Session(self, local, channel, perf)
        self.sessions[channel] = session
        self.send(frames.begin_frame(local, channel, 0, WINDOW, 2**31 - 1, 2**32 - 1))

    def _on_end(self, channel: int, perf: Performative) -> None:
        session = self.sessions.pop(channel, None)
        if session is not None:
            session.end()
            self.send(frames.end_frame(session.channel))

    def _session(self, channel: int) -> Session:
        try:
            return self.sessions[channel]
        except KeyError:
            raise ProtocolError(
                Condition.FRAMING_ERROR, f"no session on channel {channel}"
            ) from None

    def _on_flow(self, channel: int, perf: Performative) -> None:
        self._session(channel).on_flow(perf)

    def _on_transfer(self, channel: int, perf: Performative) -> None:
        self._session(channel).on_transfer(perf)

    def _on_disposition(self, channel: int, perf: Performative) -> None:
        self._session(channel)  # we deliver settled, so receivers' outcomes need no action

    def _on_detach(self, channel: int, perf: Performative) -> None:
        self._session(channel).on_detach(perf)

    def _on_attach(self, channel: int, perf: Performative) -> None:
        attach(self, self._session(channel), perf)


_HANDLERS: dict[int, Any] = {
    frames.OPEN: Connection._on_open,
    frames.BEGIN: Connection._on_begin,
    frames.ATTACH: Connection._on_attach,
    frames.FLOW: Connection._on_flow,
    frames.TRANSFER: Connection._on_transfer,
    frames.DISPOSITION: Connection._on_disposition,
    frames.DETACH: Connection._on_detach,
    frames.END: Connection._on_end,
    frames.CLOSE: Connection._on_close,
}
