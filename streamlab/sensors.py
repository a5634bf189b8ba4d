"""Simulated sensors for the complex event processing lab: readings, late deliveries, a producer.

A reading is the JSON body ``{"device_id": ..., "sensor_freq": ..., "event_time": ISO-8601}``.
Every field is derived from the device and the reading's index, so every run sends the same
readings. Disorder is deliberate and bounded: a device can go offline (an :class:`Outage`)
and deliver the readings it buffered when it comes back, late; everything else is sent in
event-time order. A negative ``sensor_freq`` is an anomaly.

The producer replays a plan on the sensors' clock, ``speed`` times faster than real time, so
that minutes of sensor time (and the windows they fill) pass in seconds::

    plan = sensor_plan(["sensor-1", "sensor-2"], seconds=240,
                       outages=[Outage("sensor-2", 100, 120)])
    with SensorProducer(connection_string, "sensors", plan, speed=20, tick=0.5) as producer:
        producer.start()
        producer.join(timeout=60)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from streamlab.background_sender import BackgroundSender

#: Sensor time 0 of every plan unless told otherwise.
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Reading:
    """One measurement of one device."""

    device_id: str
    sensor_freq: float
    event_time: datetime

    @property
    def is_anomaly(self) -> bool:
        return self.sensor_freq < 0

    def body(self) -> bytes:
        """The event body a sensor sends."""
        stamp = self.event_time.astimezone(UTC).isoformat(timespec="milliseconds")
        return json.dumps(
            {
                "device_id": self.device_id,
                "sensor_freq": self.sensor_freq,
                "event_time": stamp.replace("+00:00", "Z"),
            }
        ).encode()


@dataclass(frozen=True)
class Outage:
    """``device_id`` is offline from ``start_s`` to ``end_s`` (seconds of sensor time): it
    buffers the readings it takes meanwhile and sends them all at ``end_s``."""

    device_id: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Delivery:
    """A reading and when (seconds of sensor time after the plan's start) it is sent."""

    send_at_s: float
    reading: Reading

    @property
    def delay_s(self) -> float:
        """How long after it was taken the reading is sent."""
        return self.send_at_s - _offset_s(self.reading)


def _offset_s(reading: Reading, start: datetime = START) -> float:
    return (reading.event_time - start).total_seconds()


def sensor_freq(device_number: int, index: int, anomaly_every: int = 25) -> float:
    """The value device ``device_number`` (1, 2, ...) reads at its ``index``-th reading.

    About 50 (a mains frequency, 49.5 to 50.5); every ``anomaly_every``-th reading, shifted
    per device, is negative: an anomaly.
    """
    if anomaly_every and (index + 7 * device_number) % anomaly_every == anomaly_every - 1:
        return -round(0.5 + (index * 3 % 7) / 4, 2)
    return round(50 + ((index * 8 + device_number * 13) % 21 - 10) / 20, 2)


def sensor_plan(
    devices: Sequence[str],
    seconds: float,
    *,
    interval_s: float = 2.0,
    start: datetime = START,
    outages: Iterable[Outage] = (),
    anomaly_every: int = 25,
) -> list[Delivery]:
    """Every reading of ``devices`` over ``seconds`` of sensor time, in the order they are sent.

    Each device reads every ``interval_s`` from ``start``; a reading taken during one of the
    device's outages is sent when the outage ends. Readings sent at the same moment go in
    event-time order, devices in the order given.
    """
    outages = list(outages)
    unknown = {o.device_id for o in outages} - set(devices)
    if unknown:
        raise ValueError(f"outages name devices that are not in the plan: {sorted(unknown)}")
    deliveries = []
    for number, device in enumerate(devices, start=1):
        for index in range(int(seconds // interval_s)):
            taken = index * interval_s
            reading = Reading(
                device, sensor_freq(number, index, anomaly_every), start + timedelta(seconds=taken)
            )
            send_at = next(
                (
                    o.end_s
                    for o in outages
                    if o.device_id == device and o.start_s <= taken < o.end_s
                ),
                taken,
            )
            deliveries.append((send_at, taken, number, Delivery(send_at, reading)))
    return [d for *_, d in sorted(deliveries, key=lambda item: item[:3])]


class SensorProducer(BackgroundSender):
    """Sends a plan to an event hub from a background thread, keyed by device.

    Sensor time runs ``speed`` times faster than ``clock`` (seconds, monotonic): a delivery
    planned at ``send_at_s`` goes out ``send_at_s / speed`` seconds after :meth:`start`.
    ``partition_key = device_id`` keeps each device's readings in order on one partition.

    Every ``tick`` seconds the producer sends what is due, one batch per device, as a gateway
    would. A tick of half a second leaves pauses in the stream, which the Python SDK's
    receivers need: they hand events over after 0.2 s without a frame or once their prefetch
    buffer is full, so a stream that never pauses arrives in bursts seconds apart.
    """

    def __init__(
        self,
        connection_string: str,
        eventhub: str,
        plan: Sequence[Delivery],
        *,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        tick: float = 0.05,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        super().__init__(connection_string, eventhub)
        self.plan = list(plan)
        self.speed, self._clock, self._tick = speed, clock, tick
        #: (wall-clock time.time() once the hub acknowledged it, reading), in send order. A
        #: send that fails is tried again, so after an error a reading may appear twice.
        self.sent: list[tuple[float, Reading]] = []
        self._position = 0  # deliveries before this one were acknowledged

    @property
    def done(self) -> bool:
        """Every delivery of the plan was sent."""
        return self._position == len(self.plan)

    def start(self) -> SensorProducer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="streamlab-sensors", daemon=True)
            self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the plan to be sent (or the producer to stop); True if all was sent."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.done

    def _send(self, deliveries: list[Delivery]) -> None:
        by_device: dict[str, list[Reading]] = {}
        for delivery in deliveries:
            by_device.setdefault(delivery.reading.device_id, []).append(delivery.reading)
        for device, readings in by_device.items():
            self._send_keyed(device, (reading.body() for reading in readings))
            acknowledged = time.time()
            self.sent.extend((acknowledged, reading) for reading in readings)

    def _run(self) -> None:
        started = self._clock()
        while self._position < len(self.plan) and not self._stop.is_set():
            now_s = (self._clock() - started) * self.speed
            end = self._position
            while end < len(self.plan) and self.plan[end].send_at_s <= now_s:
                end += 1
            if end > self._position:
                try:
                    self._send(self.plan[self._position : end])
                    self._position = end
                except Exception as error:  # the hub may be down: report, send again
                    self._report(error)
            self._stop.wait(self._tick)
