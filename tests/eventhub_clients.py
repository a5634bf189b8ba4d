"""Helpers for tests that talk to the emulator: bounded polling, SDK receive loops, a raw client.

Nothing here sleeps for a fixed time to wait for something: every wait polls a
condition with a deadline and fails with a clear message when the deadline passes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

from streamlab.hub import codec, frames
from streamlab.hub.codec import Described, Symbol, UInt, ULong

DEADLINE = 30.0  # seconds; generous for a loaded 2-core machine, never reached when passing


def wait_for(
    condition: Callable[[], Any],
    timeout: float = DEADLINE,
    what: str = "condition",
    interval: float = 0.02,
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def producer(conn_str: str, eventhub: str = "heartbeats", **kwargs: Any) -> EventHubProducerClient:
    return EventHubProducerClient.from_connection_string(conn_str, eventhub_name=eventhub, **kwargs)


def send(
    conn_str: str,
    bodies: list[str],
    eventhub: str = "heartbeats",
    partition_id: str | None = None,
    partition_key: str | None = None,
    properties: dict | None = None,
) -> None:
    """Send ``bodies`` as batches of at most 100 events."""
    with producer(conn_str, eventhub) as client:
        for start in range(0, len(bodies), 100):
            batch = client.create_batch(partition_id=partition_id, partition_key=partition_key)
            for body in bodies[start : start + 100]:
                event = EventData(body)
                if properties:
                    event.properties = dict(properties)
                batch.add(event)
            client.send_batch(batch)


class Receiver:
    """Runs ``EventHubConsumerClient.receive_batch`` in a thread and collects events.

    The batch API is used because the sync SDK's one-event ``receive`` serves its
    partitions round robin and waits a socket timeout (0.2 s) on each idle partition
    per event, which makes draining thousands of events over several partitions slow.
    """

    def __init__(
        self,
        conn_str: str,
        eventhub: str = "heartbeats",
        consumer_group: str = "$Default",
        **receive_kwargs: Any,
    ) -> None:
        self.client = EventHubConsumerClient.from_connection_string(
            conn_str, consumer_group=consumer_group, eventhub_name=eventhub
        )
        self.events: list[Any] = []
        self.partitions: list[str] = []  # the partition of each event, in the same order
        self.last_enqueued: dict[str, Any] = {}  # with track_last_enqueued_event_properties
        self.errors: list[Exception] = []
        self._lock = threading.Lock()
        receive_kwargs.setdefault("on_error", self._on_error)
        receive_kwargs.setdefault("max_batch_size", 300)
        self._thread = threading.Thread(
            target=self.client.receive_batch,
            kwargs={"on_event_batch": self._on_batch, **receive_kwargs},
            daemon=True,
        )
        self._thread.start()

    def _on_batch(self, context: Any, events: list[Any]) -> None:
        with self._lock:
            self.events.extend(events)
            self.partitions.extend([context.partition_id] * len(events))
            if context.last_enqueued_event_properties:
                self.last_enqueued[context.partition_id] = context.last_enqueued_event_properties

    def _on_error(self, context: Any, error: Exception) -> None:
        with self._lock:
            self.errors.append(error)

    def wait_count(self, count: int, timeout: float = DEADLINE) -> list[Any]:
        try:
            wait_for(lambda: len(self.events) >= count, timeout, f"{count} events")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; got {len(self.events)}, errors {self.errors}") from None
        return list(self.events)

    def close(self) -> None:
        self.client.close()
        self._thread.join(DEADLINE)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def receive(conn_str: str, count: int, **kwargs: Any) -> list[Any]:
    """Receive ``count`` events (bounded wait) and stop."""
    with Receiver(conn_str, **kwargs) as receiver:
        return receiver.wait_count(count)


def receive_concurrently(conn_str: str, requests: list[tuple[int, dict]]) -> list[list[Any]]:
    """Run several receivers at once (the SDK's start-up and close are slow, not busy)."""
    receivers = [Receiver(conn_str, **kwargs) for _, kwargs in requests]
    try:
        return [r.wait_count(count) for r, (count, _) in zip(receivers, requests, strict=True)]
    finally:
        closers = [threading.Thread(target=r.close) for r in receivers]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(DEADLINE)


def port_of(conn_str: str) -> int:
    return int(conn_str.split(";")[0].rsplit(":", 1)[1])


class RawClient:
    """A minimal AMQP client over a plain socket, for what the SDK cannot show:
    exact link-credit accounting, garbage input, half-sent frames."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def read_frame(self) -> tuple[int, frames.Performative]:
        while True:
            size, doff, _, channel = frames.FRAME_HEADER.unpack(self._read_exact(8))
            body = self._read_exact(size - 8)[doff * 4 - 8 :]
            if body:
                return channel, frames.parse_body(body)

    def send(
        self,
        channel: int,
        code: int,
        fields: list,
        payload: bytes = b"",
        frame_type: int = frames.AMQP_FRAME,
    ) -> None:
        self.sock.sendall(frames.frame(channel, code, fields, payload, frame_type))

    def handshake(self) -> None:
        self.sock.sendall(frames.SASL_HEADER)
        assert self._read_exact(8) == frames.SASL_HEADER
        self.read_frame()  # mechanisms
        self.send(
            0, frames.SASL_INIT, [Symbol("ANONYMOUS"), b"", None], frame_type=frames.SASL_FRAME
        )
        self.read_frame()  # outcome
        self.sock.sendall(frames.AMQP_HEADER)
        assert self._read_exact(8) == frames.AMQP_HEADER
        self.send(0, frames.OPEN, ["raw-test", None, UInt(65536)])
        assert self.read_frame()[1].code == frames.OPEN
        self.send(0, frames.BEGIN, [None, UInt(0), UInt(100000), UInt(100000)])
        assert self.read_frame()[1].code == frames.BEGIN

    def attach_receiver(
        self,
        address: str,
        selector: str | None = None,
        handle: int = 0,
        properties: dict | None = None,
    ) -> frames.Performative:
        name = "apache.org:selector-filter:string"
        filters = {Symbol(name): Described(Symbol(name), selector)} if selector else None
        source = Described(
            ULong(frames.SOURCE), [address, None, None, None, None, None, None, filters]
        )
        target = Described(ULong(frames.TARGET), ["raw-receiver"])
        self.send(
            0,
            frames.ATTACH,
            [
                f"raw-{handle}",
                UInt(handle),
                True,
                None,
                None,
                source,
                target,
                None,
                None,
                None,
                None,
                None,
                None,
                properties,
            ],
        )
        return self.expect(frames.ATTACH)

    def attach_sender(self, address: str, handle: int = 1) -> frames.Performative:
        source = Described(ULong(frames.SOURCE), ["raw-sender"])
        target = Described(ULong(frames.TARGET), [address])
        self.send(
            0,
            frames.ATTACH,
            [f"raw-{handle}", UInt(handle), False, None, None, source, target, None, None, UInt(0)],
        )
        return self.expect(frames.ATTACH)

    def flow(self, handle: int, delivery_count: int, credit: int, echo: bool = False) -> None:
        self.send(
            0,
            frames.FLOW,
            [
                UInt(0),
                UInt(100000),
                UInt(0),
                UInt(100000),
                UInt(handle),
                UInt(delivery_count),
                UInt(credit),
                None,
                False,
                echo,
            ],
        )

    def expect(self, code: int) -> frames.Performative:
        """Read frames until one with ``code`` arrives (other frames are skipped)."""
        while True:
            _, perf = self.read_frame()
            if perf.code == code:
                return perf

    def transfer(
        self,
        handle: int,
        delivery_id: int,
        payload: bytes,
        more: bool = False,
        settled: bool = False,
    ) -> None:
        self.sock.sendall(
            frames.transfer_frame(
                0,
                handle,
                delivery_id,
                delivery_id.to_bytes(4, "big"),
                payload,
                settled=settled,
                more=more,
            )
        )

    def publish(self, address: str, bodies: list[bytes], handle: int = 7) -> list:
        """Attach a sender, send one event per body, return each delivery's outcome."""
        self.attach_sender(address, handle)
        outcomes = []
        for delivery_id, body in enumerate(bodies):
            self.transfer(handle, delivery_id, encoded_event(body))
            outcomes.append(self.expect(frames.DISPOSITION).get(4))
        return outcomes


def encoded_event(body: bytes) -> bytes:
    """A single event as the SDK would encode it (one data section)."""
    return codec.encode(Described(ULong(0x75), body))


def annotations(payload: bytes) -> dict:
    """The message annotations of a delivered event, keys as text."""
    from streamlab.hub.message import MESSAGE_ANNOTATIONS, split_sections

    for section in split_sections(payload):
        if section.code == MESSAGE_ANNOTATIONS:
            value, _ = codec.decode(section.raw, section.value_at)
            return {str(k): v for k, v in value.items()}
    return {}
