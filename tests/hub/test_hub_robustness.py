"""Protocol-level behaviour the SDK cannot show: credit, drain, errors, hostile clients.

These tests speak AMQP over a raw socket (``RawClient``), and use the SDK alongside to
show that other clients are not disturbed.
"""

from __future__ import annotations

import random
import socket
import struct
import threading

from azure.eventhub import EventData
from eventhub_clients import (
    DEADLINE,
    RawClient,
    Receiver,
    annotations,
    port_of,
    producer,
    receive,
    wait_for,
)
from raw_cbs import put_token, token_for

from streamlab.hub import frames
from streamlab.hub.codec import Symbol

CONSUMER = "amqp://127.0.0.1/heartbeats/ConsumerGroups/$Default/Partitions/{}"
EVERYTHING = "amqp.annotation.x-opt-offset > '-1'"


def _raw(conn_str: str) -> RawClient:
    """A raw client with a token for the whole namespace, as the SDK would put."""
    client = RawClient(port_of(conn_str))
    client.handshake()
    assert put_token(client, "sb://127.0.0.1/", token_for(conn_str))[0] == 202
    return client


def test_link_credit_is_respected_exactly(conn_str):
    client = _raw(conn_str)
    try:
        assert (
            client.publish("heartbeats/Partitions/0", [b"e%d" % i for i in range(20)])
            == [frames.accepted()] * 20
        )
        attach = client.attach_receiver(CONSUMER.format(0), EVERYTHING)
        assert attach.get(9) == 0 and attach.get(5) is not None  # initial count, source
        server_handle = attach.get(1)

        def transfers_until_echo() -> tuple[list[bytes], frames.Performative]:
            got = []
            while True:
                _, perf = client.read_frame()
                if perf.code == frames.TRANSFER:
                    got.append(perf.payload)
                elif perf.code == frames.FLOW and perf.get(4) == server_handle:
                    return got, perf

        client.flow(0, delivery_count=0, credit=5)
        first = [client.expect(frames.TRANSFER).payload for _ in range(5)]
        client.flow(0, delivery_count=5, credit=0, echo=True)  # revoke, ask for state
        extra, state = transfers_until_echo()
        assert extra == [] and state.get(5) == 5 and state.get(6) == 0
        client.flow(0, delivery_count=5, credit=100)
        rest = [client.expect(frames.TRANSFER).payload for _ in range(15)]
        client.flow(0, delivery_count=20, credit=80, echo=True)
        extra, state = transfers_until_echo()
        assert extra == [] and state.get(5) == 20 and state.get(6) == 80
        seqs = [annotations(p)["x-opt-sequence-number"] for p in first + rest]
        assert seqs == list(range(20))
    finally:
        client.close()


def test_drain_uses_up_credit_when_nothing_is_left(conn_str):
    client = _raw(conn_str)
    try:
        client.publish("heartbeats/Partitions/1", [b"a", b"b", b"c"])
        client.attach_receiver(CONSUMER.format(1), EVERYTHING)
        client.send(0, frames.FLOW, [0, 100000, 0, 100000, 0, 0, 10, None, True, False])
        payloads = [client.expect(frames.TRANSFER).payload for _ in range(3)]
        flow = client.expect(frames.FLOW)
        while flow.get(4) is None:  # skip session-only flows
            flow = client.expect(frames.FLOW)
        assert flow.get(8) is True and flow.get(5) == 10 and flow.get(6) == 0
        assert [annotations(p)["x-opt-sequence-number"] for p in payloads] == [0, 1, 2]
    finally:
        client.close()


def test_unknown_entities_get_an_amqp_error_and_the_connection_survives(conn_str):
    client = _raw(conn_str)
    try:
        for handle, address in enumerate(
            ["amqp://127.0.0.1/nope/ConsumerGroups/$Default/Partitions/0", CONSUMER.format(9)]
        ):
            attach = client.attach_receiver(address, EVERYTHING, handle=handle)
            assert attach.get(5) is None  # no source: the link could not be created
            detach = client.expect(frames.DETACH)
            assert detach.get(1) is True and detach.get(2).value[0] == "amqp:not-found"
        attach = client.attach_sender("amqp://127.0.0.1/nope", handle=5)
        assert attach.get(6) is None
        assert client.expect(frames.DETACH).get(2).value[0] == "amqp:not-found"
        attach = client.attach_receiver(CONSUMER.format(0), EVERYTHING, handle=6)
        assert attach.get(5) is not None  # a valid attach on the same connection works
    finally:
        client.close()


def test_exclusive_receivers_follow_epoch_rules(conn_str):
    """A higher owner level (epoch) takes a partition over; lower or none is refused."""
    epoch = {Symbol("com.microsoft:epoch"): 1}
    first, second = _raw(conn_str), _raw(conn_str)
    try:
        assert (
            first.attach_receiver(CONSUMER.format(0), EVERYTHING, properties=epoch).get(5)
            is not None
        )
        second.attach_receiver(
            CONSUMER.format(0), EVERYTHING, properties={Symbol("com.microsoft:epoch"): 2}
        )
        stolen = first.expect(frames.DETACH)
        assert stolen.get(2).value[0] == "amqp:link:stolen"
        for handle, properties in ((1, epoch), (2, None)):
            refused = first.attach_receiver(
                CONSUMER.format(0), EVERYTHING, handle=handle, properties=properties
            )
            assert refused.get(5) is None
            assert first.expect(frames.DETACH).get(2).value[0] == "amqp:link:stolen"
        # Another consumer group is not affected.
        other = first.attach_receiver(
            CONSUMER.format(0).replace("$Default", "other"), EVERYTHING, handle=3
        )
        assert other.get(5) is not None
    finally:
        first.close()
        second.close()


def test_malformed_event_is_rejected_not_fatal(conn_str):
    client = _raw(conn_str)
    try:
        client.attach_sender("heartbeats/Partitions/2", handle=1)
        client.transfer(1, 0, b"\x00\x53\x75\xa0\xff")  # a data section cut short
        outcome = client.expect(frames.DISPOSITION).get(4)
        assert outcome.descriptor == frames.REJECTED
        assert client.publish("heartbeats/Partitions/2", [b"fine"], handle=2) == [frames.accepted()]
    finally:
        client.close()


def _hostile_connections(port: int, seed: int) -> None:
    """Open connections that misbehave in many ways; each must be dealt with quickly."""
    rng = random.Random(seed)
    amqp_then_open = frames.AMQP_HEADER + frames.open_frame("x", 65536, 1)
    payloads = [
        bytes(rng.randrange(256) for _ in range(2000)),  # noise
        frames.AMQP_HEADER + bytes(rng.randrange(256) for _ in range(500)),
        frames.SASL_HEADER + b"\x00\x00\x00\x10\x02\x01\x00\x00garbage!",
        amqp_then_open + struct.pack(">IBBH", 2**31, 2, 0, 0),  # absurd frame size
        amqp_then_open + frames.begin_frame(0, 0, 0, 10, 10, 10)[:9],  # half a frame
        amqp_then_open + b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x99\x45",  # unknown code
        b"",  # connect, leave
    ]
    for payload in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # then the server sees the end of the stream
            while sock.recv(65536):  # the server must close its side, not hang
                pass


def test_garbage_clients_while_a_producer_keeps_sending(conn_str):
    sent, failures, stop = [], [], threading.Event()

    def keep_sending() -> None:
        with producer(conn_str) as client:
            n = 0
            while not stop.is_set() and n < 3000:
                batch = client.create_batch(partition_id="3")
                for _ in range(20):
                    batch.add(EventData(f"steady {n}"))
                    n += 1
                try:
                    client.send_batch(batch)
                    sent.extend(f"steady {i}" for i in range(n - 20, n))
                except Exception as exc:
                    failures.append(exc)

    thread = threading.Thread(target=keep_sending, daemon=True)
    thread.start()
    wait_for(lambda: len(sent) >= 100, what="the producer to get going")
    for seed in range(3):
        _hostile_connections(port_of(conn_str), seed)
    # A producer that disconnects in the middle of a two-frame delivery: nothing stored.
    half = _raw(conn_str)
    half.attach_sender("heartbeats/Partitions/3", handle=1)
    half.transfer(1, 0, b"\x00\x53\x75\xa0\x10first half", more=True)
    half.close()
    wait_for(lambda: len(sent) >= 400, what="the producer to keep going")
    stop.set()
    thread.join(DEADLINE)
    assert failures == []
    events = receive(conn_str, len(sent), partition_id="3", starting_position="-1")
    assert [e.body_as_str() for e in events] == sent
    with producer(conn_str) as client:
        last = client.get_partition_properties("3")["last_enqueued_sequence_number"]
    assert last == len(sent) - 1  # the half-sent delivery was not stored


def test_a_client_that_stops_reading_does_not_stall_others(conn_str):
    big = "x" * 4000
    with producer(conn_str) as client:
        for _ in range(15):  # about 6 MB: more than socket buffers and our high-water mark
            batch = client.create_batch(partition_id="1")
            for _ in range(100):
                batch.add(EventData(big))
            client.send_batch(batch)
    stuck = _raw(conn_str)
    try:
        stuck.attach_receiver(CONSUMER.format(1), EVERYTHING)
        stuck.flow(0, delivery_count=0, credit=100000)  # ...and never reads again
        with Receiver(conn_str, partition_id="1", starting_position="-1") as receiver:
            with producer(conn_str) as client:
                client.send_event(EventData("still served"), partition_id="1")
            events = receiver.wait_count(1501)
        assert events[-1].body_as_str() == "still served"
    finally:
        stuck.close()
