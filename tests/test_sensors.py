"""Simulated sensors: the plan is deterministic and its disorder bounded; the producer replays it
on the sensors' clock against the real emulator."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from eventhub_clients import Receiver, wait_for

from streamlab.sensors import START, Outage, Reading, SensorProducer, sensor_freq, sensor_plan

DEVICES = ["sensor-1", "sensor-2", "sensor-3"]


def test_the_same_plan_every_time():
    one = sensor_plan(DEVICES, 120, outages=[Outage("sensor-2", 30, 50)])
    assert one == sensor_plan(DEVICES, 120, outages=[Outage("sensor-2", 30, 50)])
    assert len(one) == 3 * 60
    per_device = {d: [x.reading for x in one if x.reading.device_id == d] for d in DEVICES}
    for readings in per_device.values():
        taken = sorted(r.event_time for r in readings)
        assert taken == [START + timedelta(seconds=2 * i) for i in range(60)]


def test_values_are_about_fifty_except_rare_anomalies():
    values = [sensor_freq(device, index) for device in (1, 2, 3) for index in range(500)]
    anomalies = [v for v in values if v < 0]
    normal = [v for v in values if v >= 0]
    assert 40 <= len(anomalies) <= 80  # one in 25
    assert all(-2.0 <= v <= -0.5 for v in anomalies)
    assert all(49.5 <= v <= 50.5 for v in normal)
    assert len(set(normal)) > 10
    assert not any(sensor_freq(1, i, anomaly_every=0) < 0 for i in range(500))


def test_an_outage_sends_its_readings_late_and_together():
    plan = sensor_plan(DEVICES, 120, outages=[Outage("sensor-2", 30, 50)])
    late = [d for d in plan if d.delay_s > 0]
    assert {d.reading.device_id for d in late} == {"sensor-2"}
    assert [d.delay_s for d in late] == [20, 18, 16, 14, 12, 10, 8, 6, 4, 2]
    assert all(d.send_at_s == 50 for d in late)
    assert [d.send_at_s for d in plan] == sorted(d.send_at_s for d in plan)
    # Sent at the same moment: the buffered readings first, in event-time order.
    at_50 = [
        (d.reading.device_id, (d.reading.event_time - START).seconds)
        for d in plan
        if d.send_at_s == 50
    ]
    assert at_50[:10] == [("sensor-2", s) for s in range(30, 50, 2)]
    assert at_50[10:] == [("sensor-1", 50), ("sensor-2", 50), ("sensor-3", 50)]


def test_outages_must_name_devices_of_the_plan():
    with pytest.raises(ValueError, match="sensor-9"):
        sensor_plan(DEVICES, 60, outages=[Outage("sensor-9", 0, 10)])


def test_a_reading_is_the_json_body_a_sensor_sends():
    reading = Reading("sensor-1", -1.25, START + timedelta(seconds=2.5))
    assert reading.is_anomaly
    assert json.loads(reading.body()) == {
        "device_id": "sensor-1",
        "sensor_freq": -1.25,
        "event_time": "2026-11-22T10:00:02.500Z",
    }


def test_speed_must_be_positive():
    with pytest.raises(ValueError, match="speed"):
        SensorProducer("Endpoint=sb://127.0.0.1:1", "sensors", [], speed=0)


def test_the_producer_replays_the_plan_on_the_sensors_clock(hub, clock):
    plan = sensor_plan(DEVICES, 20, outages=[Outage("sensor-3", 4, 10)])
    with (
        Receiver(hub.connection_string, starting_position="-1") as receiver,
        SensorProducer(
            hub.connection_string, "heartbeats", plan, speed=10, clock=clock, tick=0.01
        ) as producer,
    ):
        producer.start()
        wait_for(lambda: len(producer.sent) == 3, what="the readings due at sensor time 0")
        clock.now += 0.5  # 5 s of sensor time: readings up to 4 s, sensor-3's held back
        wait_for(lambda: len(producer.sent) == 8, what="the readings due by sensor time 5 s")
        held = [r.event_time for _, r in producer.sent if r.device_id == "sensor-3"]
        assert held == [START, START + timedelta(seconds=2)]
        clock.now += 2.0
        assert producer.join(timeout=30) and producer.done
        events = receiver.wait_count(len(plan))
    assert producer.errors == []
    by_device: dict[str, list] = {}
    partitions: dict[str, set] = {}
    for event, partition in zip(events, receiver.partitions):
        body = json.loads(event.body_as_str())
        assert event.partition_key in (body["device_id"], body["device_id"].encode())
        by_device.setdefault(body["device_id"], []).append(body["event_time"])
        partitions.setdefault(body["device_id"], set()).add(partition)
    assert all(len(p) == 1 for p in partitions.values())
    for device in DEVICES:
        planned = [
            json.loads(d.reading.body())["event_time"]
            for d in plan
            if d.reading.device_id == device
        ]
        assert by_device[device] == planned
