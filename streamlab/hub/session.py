"""An AMQP session: its channels, transfer windows and links, on one client connection."""

from __future__ import annotations

from typing import Protocol

from . import frames
from .frames import Performative
from .links import InboundLink, Link, OutboundLink, ReplyLink

WINDOW = 5000  # session incoming window we advertise, refreshed when half used


class SessionConnection(Protocol):
    """What a session needs from the connection it runs on."""

    remote_max_frame_size: int  # the largest frame the client takes (from its open)

    def send(self, data: bytes) -> None: ...

    async def backpressure(self) -> None: ...


class Session:
    """A session: channel mapping, transfer windows, and its links by handle."""

    def __init__(
        self,
        connection: SessionConnection,
        channel: int,
        remote_channel: int,
        begin: Performative,
    ) -> None:
        self.connection, self.channel, self.remote_channel = connection, channel, remote_channel
        self.next_outgoing_id = 0  # per transfer frame we send
        self._next_delivery = 0
        self.next_incoming_id = begin.field("next_outgoing_id", 0)
        self.incoming_left = WINDOW
        self.remote_incoming_window = begin.field("incoming_window", 0)
        self.links: dict[int, Link] = {}  # by the client's handle

    @property
    def max_frame_size(self) -> int:
        return self.connection.remote_max_frame_size

    def send(self, data: bytes) -> None:
        self.connection.send(data)

    async def backpressure(self) -> None:
        await self.connection.backpressure()

    def next_delivery_id(self) -> int:
        self._next_delivery = (self._next_delivery + 1) & 0xFFFFFFFF
        return self._next_delivery - 1

    def send_transfer_frame(self, data: bytes) -> None:
        self.next_outgoing_id = (self.next_outgoing_id + 1) & 0xFFFFFFFF
        self.remote_incoming_window -= 1
        self.send(data)

    def send_flow(
        self,
        handle: int | None = None,
        delivery_count: int | None = None,
        link_credit: int | None = None,
        drain: bool = False,
    ) -> None:
        self.incoming_left = WINDOW
        self.send(
            frames.flow_frame(
                self.channel,
                self.next_incoming_id,
                WINDOW,
                self.next_outgoing_id,
                2**31 - 1,
                handle,
                delivery_count,
                link_credit,
                drain=drain,
            )
        )

    def free_handle(self) -> int:
        used = {link.handle for link in self.links.values()}
        return next(h for h in range(len(used) + 1) if h not in used)

    def reply_link(self, node: str) -> ReplyLink | None:
        for link in self.links.values():
            if isinstance(link, ReplyLink) and not link.closed and link.address == node:
                return link
        return None

    # ---------------------------------------------------------------- incoming frames

    def on_flow(self, perf: Performative) -> None:
        # The client's view of our transfers: how many more frames it will take.
        next_in = perf.field("next_incoming_id", 0)
        window = perf.field("incoming_window", 0)
        self.remote_incoming_window = next_in + window - self.next_outgoing_id
        link = self.links.get(perf.field("handle"))
        if link is not None:
            link.on_flow(perf)
        for other in self.links.values():
            if isinstance(other, OutboundLink):
                other.wake.set()
        if perf.field("echo", False):  # answer with the link's state if any
            if link is not None and not link.closed:
                self.send_flow(link.handle, link.delivery_count, link.credit_state())
            else:
                self.send_flow()

    def on_transfer(self, perf: Performative) -> None:
        self.next_incoming_id = (self.next_incoming_id + 1) & 0xFFFFFFFF
        self.incoming_left -= 1
        link = self.links.get(perf.field("handle"))
        if isinstance(link, InboundLink):
            link.on_transfer(perf)
        if self.incoming_left <= WINDOW // 2:
            self.send_flow()

    def on_detach(self, perf: Performative) -> None:
        link = self.links.pop(perf.field("handle"), None)
        if link is None:
            return
        if not link.closed:  # the client detached first: confirm
            closed = perf.field("closed", False)
            self.send(frames.detach_frame(self.channel, link.handle, closed))
            link.close()

    def end(self) -> None:
        for link in self.links.values():
            link.close()
        self.links.clear()
