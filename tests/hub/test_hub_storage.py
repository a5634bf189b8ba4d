"""Partition logs: offsets, lookups, recovery of torn tails, and retention."""

from __future__ import annotations

import time

from azure.eventhub import EventData
from eventhub_clients import producer, receive

from streamlab.hub import Hub, Policy
from streamlab.hub.storage import HEADER_SIZE, PartitionLog


def _body(seq: int, offset: int, ms: int) -> tuple[bytes, int]:
    return f"event {seq} at {offset}".encode(), 0


def _append(log: PartitionLog, count: int, now_ms: int) -> None:
    log.append([_body] * count, now_ms)


def test_offsets_and_lookups(tmp_path):
    log = PartitionLog(tmp_path, Policy())
    _append(log, 3, now_ms=1000)
    _append(log, 2, now_ms=2000)
    records = log.read(0, 10)
    assert [r.seq for r in records] == [0, 1, 2, 3, 4]
    assert records[0].offset == 0
    assert records[1].offset == HEADER_SIZE + len(records[0].body)
    assert all(r.body == f"event {r.seq} at {r.offset}".encode() for r in records)
    assert log.seq_at_offset(records[1].offset, inclusive=True) == 1
    assert log.seq_at_offset(records[1].offset, inclusive=False) == 2
    assert log.seq_at_offset(records[4].offset, inclusive=False) == 5  # past the end
    assert log.seq_at_time(1000, inclusive=True) == 0
    assert log.seq_at_time(1000, inclusive=False) == 3
    assert log.seq_at_time(5000, inclusive=False) == 5
    assert log.last() == (4, records[4].offset, 2000)
    log.close()


def test_enqueued_time_never_goes_backwards(tmp_path):
    log = PartitionLog(tmp_path, Policy())
    _append(log, 1, now_ms=5000)
    _append(log, 1, now_ms=4000)  # the wall clock stepped back
    assert [r.enqueued_ms for r in log.read(0, 2)] == [5000, 5000]
    log.close()


def test_torn_and_corrupt_tails_are_cut(tmp_path):
    log = PartitionLog(tmp_path, Policy())
    _append(log, 4, now_ms=1000)
    segment = log.segments[-1].path
    good_size = segment.stat().st_size
    log.close()
    with segment.open("ab") as f:
        f.write(b"\x00\x00\x00\x40\x01\x02")  # a header cut short
    log = PartitionLog(tmp_path, Policy())
    assert log.next_seq == 4 and segment.stat().st_size == good_size
    _append(log, 1, now_ms=1000)
    log.close()
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # flip a bit in the last record: its checksum fails
    segment.write_bytes(bytes(data))
    log = PartitionLog(tmp_path, Policy())
    assert log.next_seq == 4  # the damaged record is dropped, numbering continues
    _append(log, 1, now_ms=1000)
    assert [r.body for r in log.read(0, 10)][-1] == b"event 4 at %d" % log.last()[1]
    log.close()


def test_retention_by_size_keeps_offsets_stable(tmp_path):
    policy = Policy(segment_bytes=200, retention_bytes=600)
    log = PartitionLog(tmp_path, policy)
    offsets = {}
    for _ in range(30):
        _append(log, 1, now_ms=1000)
        offsets[log.last()[0]] = log.last()[1]
        log.enforce_retention(now_ms=1000)
    assert log.begin_seq > 0 and log.total_bytes <= 600 + 200
    assert len(list(tmp_path.glob("*.log"))) == len(log.segments)
    kept = log.read(0, 100)  # reading from 0 starts at the oldest retained event
    assert kept[0].seq == log.begin_seq
    assert all(offsets[r.seq] == r.offset for r in kept)
    begin = log.begin_seq
    log.close()
    reopened = PartitionLog(tmp_path, policy)
    assert reopened.begin_seq == begin and reopened.next_seq == 30
    assert [r.offset for r in reopened.read(begin, 100)] == [r.offset for r in kept]
    reopened.close()


def test_retention_by_age(tmp_path):
    log = PartitionLog(tmp_path, Policy(segment_bytes=1, retention_seconds=60))  # 1 per file
    now = int(time.time() * 1000)
    for _ in range(5):
        _append(log, 1, now_ms=now - 3_600_000)  # an hour old
    _append(log, 1, now_ms=now)
    assert log.enforce_retention(now) == 5
    assert log.begin_seq == 5 and [r.seq for r in log.read(0, 10)] == [5]
    log.close()


def test_retention_through_the_sdk(tmp_path):
    """Old events go; consumers from "-1" start at the oldest retained event."""
    policy = Policy(segment_bytes=4096, retention_bytes=8192)
    with Hub(data_dir=tmp_path, eventhubs={"small": 1}, port=0, policy=policy) as hub:
        with producer(hub.connection_string, "small") as client:
            for start in range(0, 300, 50):
                client.send_batch(
                    [EventData(f"{i:04d}" + "x" * 100) for i in range(start, start + 50)]
                )
            props = client.get_partition_properties("0")
        begin = props["beginning_sequence_number"]
        assert 0 < begin < 300 and props["last_enqueued_sequence_number"] == 299
        events = receive(
            hub.connection_string,
            300 - begin,
            eventhub="small",
            partition_id="0",
            starting_position="-1",
        )
        assert [e.sequence_number for e in events] == list(range(begin, 300))
    assert (
        sum(f.stat().st_size for f in (tmp_path / "small" / "0").glob("*.log"))
        <= 8192 + 4096 + 50 * 200
    )


def test_without_positioned_io(tmp_path, monkeypatch):
    """Windows has no os.pread/os.pwrite: the seek-based fallback gives the same log."""
    import os

    monkeypatch.delattr(os, "pread")
    monkeypatch.delattr(os, "pwrite")
    log = PartitionLog(tmp_path, Policy())
    _append(log, 3, now_ms=1000)
    _append(log, 2, now_ms=1000)
    log.close()
    log = PartitionLog(tmp_path, Policy())
    records = log.read(1, 10)
    assert [r.seq for r in records] == [1, 2, 3, 4] and log.next_seq == 5
    assert all(r.body == f"event {r.seq} at {r.offset}".encode() for r in records)
    log.close()
