"""AMQP links of the hub: what clients send to (events, requests) and receive from.

* ``InboundLink``: the client sends. Targets are an event hub, one of its partitions,
  or a request node (``$cbs``, ``$management``). Credit is granted in blocks and topped
  up, and each delivery is settled only after it is stored.
* ``OutboundLink``: the client receives, from a partition (consumer) or a request
  node's replies. A pump task sends while the client gives link credit and session
  window, and sleeps until an append, a flow or a reply wakes it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from typing import Protocol

from . import frames, message
from .broker import BrokerError, Cursor, Partition
from .codec import Described, Raw
from .conditions import Condition

_LOG = logging.getLogger(__name__)
CREDIT = 1000  # link credit granted to senders, topped up when half is used
MAX_MESSAGE_SIZE = 1024 * 1024  # what Event Hubs (standard tier) accepts per message
RUNTIME_METRIC = "com.microsoft:enable-receiver-runtime-metric"
REQUEST_NODES = ("$cbs", "$management")


class LinkSession(Protocol):
    """What a link needs from the session it is attached on."""

    channel: int
    remote_incoming_window: int  # transfer frames the client will still take

    @property
    def max_frame_size(self) -> int:
        """The largest frame the client takes (from its open)."""
        ...

    def send(self, data: bytes) -> None: ...

    def send_flow(
        self,
        handle: int | None = None,
        delivery_count: int | None = None,
        link_credit: int | None = None,
        drain: bool = False,
    ) -> None: ...

    def send_transfer_frame(self, data: bytes) -> None: ...

    def next_delivery_id(self) -> int: ...

    async def backpressure(self) -> None: ...


class Link:
    """State shared by both directions."""

    def __init__(
        self, session: LinkSession, name: str, handle: int, remote_handle: int, address: str
    ) -> None:
        self.session, self.name, self.handle = session, name, handle
        self.remote_handle, self.address = remote_handle, address
        self.closed = False
        self.delivery_count = 0
        self.cleanup: list[Callable[[], None]] = []  # run once when the link closes

    def detach(self, condition: Condition | None = None, description: str = "") -> None:
        """Detach from our side (with an error when ``condition`` is given)."""
        if self.closed:
            return
        err = frames.error(condition, description) if condition else None
        self.session.send(frames.detach_frame(self.session.channel, self.handle, True, err))
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for action in self.cleanup:
            action()
        self.cleanup.clear()

    def on_flow(self, perf: frames.Performative) -> None:
        """A flow for this link (inbound links ignore the sender's view)."""

    def credit_state(self) -> int:
        """Current link credit, as reported in our flow frames."""
        return 0


class InboundLink(Link):
    """The client sends to us: events to a hub/partition, or requests to a node."""

    def __init__(
        self,
        session: LinkSession,
        name: str,
        handle: int,
        remote_handle: int,
        address: str,
        initial_delivery_count: int,
        on_message: Callable[[InboundLink, bytes, int], Described],
    ) -> None:
        super().__init__(session, name, handle, remote_handle, address)
        self.delivery_count = initial_delivery_count
        self.on_message = on_message
        self.credit_left = 0
        self._parts: list[bytes] = []
        self._size = 0
        self._first: frames.Performative | None = None

    def grant(self) -> None:
        """Give the sender a fresh block of credit."""
        self.credit_left = CREDIT
        self.session.send_flow(self.handle, self.delivery_count, CREDIT)

    def credit_state(self) -> int:
        return max(0, self.credit_left)

    def on_transfer(self, perf: frames.Performative) -> None:
        if self.closed:
            return
        if self._first is None:
            self._first = perf
        self._size += len(perf.payload)
        if self._size <= MAX_MESSAGE_SIZE:  # the limit our attach advertised, to the byte
            self._parts.append(perf.payload)
        else:
            self._parts = []  # an oversized delivery is read to its end, not kept
        if perf.field("aborted", False):  # forget the partial delivery
            self._reset()
            return
        if perf.field("more", False):  # more frames of this delivery follow
            return
        first, size = self._first, self._size
        payload = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._reset()
        self.delivery_count += 1
        self.credit_left -= 1
        delivery_id = first.field("delivery_id")
        if size > MAX_MESSAGE_SIZE:  # refused as the service refuses it: rejected, link kept
            state = frames.rejected(
                Condition.MESSAGE_SIZE_EXCEEDED,
                f"The received message (delivery-id:{delivery_id}, size:{size} bytes) exceeds "
                f"the limit ({MAX_MESSAGE_SIZE} bytes) currently allowed on the link.",
            )
        else:
            try:
                state = self.on_message(self, payload, first.field("message_format", 0))
            except BrokerError as exc:
                state = frames.rejected(exc.condition, exc.description)
        if not first.field("settled", False) and delivery_id is not None:  # acknowledge
            self.session.send(
                frames.disposition_frame(self.session.channel, delivery_id, delivery_id, state)
            )
        if self.credit_left <= CREDIT // 2:
            self.grant()

    def _reset(self) -> None:
        self._parts, self._size, self._first = [], 0, None


class OutboundLink(Link):
    """The client receives from us, credit permitting."""

    def __init__(
        self, session: LinkSession, name: str, handle: int, remote_handle: int, address: str
    ) -> None:
        super().__init__(session, name, handle, remote_handle, address)
        self.credit = 0
        self.drain = False
        self.wake = asyncio.Event()
        self._frames: deque[bytes] = deque()  # frames of a delivery not yet sent (window)
        self._task: asyncio.Task | None = None

    def credit_state(self) -> int:
        return self.credit

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._pump())

    def on_flow(self, perf: frames.Performative) -> None:
        # Credit is relative to the delivery count the receiver last knew of.
        their_count = perf.field("delivery_count", 0)
        self.credit = max(0, their_count + perf.field("link_credit", 0) - self.delivery_count)
        self.drain = bool(perf.field("drain", False))
        self.wake.set()

    def close(self) -> None:
        super().close()
        self.wake.set()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    async def _pump(self) -> None:
        try:
            while not self.closed:
                self.wake.clear()
                progressed = self._send_pending() and self._deliver()
                if progressed:
                    await self.session.backpressure()
                    await asyncio.sleep(0)  # let other clients' work run between chunks
                    continue
                if self.drain and self.credit > 0 and not self._frames:
                    # Nothing to send: use up the credit as the drain protocol asks.
                    self.delivery_count += self.credit
                    self.credit = 0
                    self.session.send_flow(self.handle, self.delivery_count, 0, drain=True)
                await self.wake.wait()
        except (asyncio.CancelledError, ConnectionError):
            pass  # link closed, or the client went away while we waited for it to read
        except Exception:
            _LOG.exception("delivery to link %s failed", self.name)
            self.detach(Condition.INTERNAL_ERROR, "the emulator failed to deliver")

    def _send_pending(self) -> bool:
        """Send queued frames of a split delivery; True when none are left."""
        session = self.session
        while self._frames and session.remote_incoming_window > 0:
            session.send_transfer_frame(self._frames.popleft())
        return not self._frames

    def _deliver(self) -> bool:  # pragma: no cover - overridden
        return False

    def _queue_message(self, payload: bytes) -> None:
        """Frame one settled delivery, splitting it to the client's max frame size."""
        session = self.session
        tag = struct.pack(">I", self.delivery_count & 0xFFFFFFFF)
        delivery_id = session.next_delivery_id()
        limit = max(512, session.max_frame_size - 128)
        chunks = [payload[i : i + limit] for i in range(0, len(payload), limit)] or [b""]
        for index, chunk in enumerate(chunks):
            self._frames.append(
                frames.transfer_frame(
                    session.channel,
                    self.handle,
                    delivery_id,
                    tag,
                    chunk,
                    settled=True,
                    more=index < len(chunks) - 1,
                )
            )
        self.delivery_count += 1
        self.credit -= 1
        self._send_pending()


class ConsumerLink(OutboundLink):
    """Delivers a partition's events from a cursor."""

    def __init__(
        self,
        session: LinkSession,
        name: str,
        handle: int,
        remote_handle: int,
        address: str,
        partition: Partition,
        cursor: Cursor,
        metrics: Callable[[], dict] | None,
    ) -> None:
        super().__init__(session, name, handle, remote_handle, address)
        self.partition, self.cursor, self.metrics = partition, cursor, metrics
        partition.listeners.add(self.wake.set)

    def close(self) -> None:
        self.partition.listeners.discard(self.wake.set)
        super().close()

    def _deliver(self) -> bool:
        budget = min(self.credit, self.session.remote_incoming_window, 256)
        if budget <= 0:
            return False
        records = self.partition.log.read(self.cursor.seq, budget)
        if not records:
            # Retention may have removed events: resume at the oldest retained one.
            self.cursor.seq = max(self.cursor.seq, self.partition.log.begin_seq)
            return False
        for record in records:
            self.cursor.seq = record.seq + 1
            if self.cursor.accept is not None:
                if not self.cursor.accept(record):
                    continue
                self.cursor.accept = None
            body = record.body
            if self.metrics is not None:
                body = message.add_delivery_annotations(body, record.da_pos, self.metrics())
            self._queue_message(body)
            if self._frames:  # session window full mid-delivery: stop for now
                break
        return True


class ReplyLink(OutboundLink):
    """Carries responses from a request node ($cbs, $management) back to the client."""

    def __init__(
        self, session: LinkSession, name: str, handle: int, remote_handle: int, address: str
    ) -> None:
        super().__init__(session, name, handle, remote_handle, address)
        self.replies: deque[bytes] = deque()

    def reply(self, payload: bytes) -> None:
        self.replies.append(payload)
        # Send now rather than from the pump task, so the response goes out before the
        # request's disposition: the SDK reads one frame per 50 ms while connecting,
        # and the response is the frame it is waiting for.
        if not self.closed and self._send_pending():
            self._deliver()
        self.wake.set()

    def _deliver(self) -> bool:
        sent = False
        while self.replies and self.credit > 0 and self.session.remote_incoming_window > 0:
            self._queue_message(self.replies.popleft())
            sent = True
        return sent


def echo(raw: bytes | None) -> Raw | None:
    """A client's source/target, sent back unchanged in our attach."""
    return Raw(raw) if raw and raw != b"\x40" else None
