"""The emulator's AMQP codec: round trips, and garbage never escapes as a crash."""

from __future__ import annotations

import random
import uuid

import pytest

from streamlab.hub import codec, frames, message
from streamlab.hub.codec import (
    DecodeError,
    Described,
    Symbol,
    SymbolArray,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        127,
        -129,
        2**40,
        -(2**63),
        UByte(7),
        UShort(65535),
        UInt(0),
        UInt(255),
        UInt(2**32 - 1),
        ULong(0),
        ULong(200),
        ULong(2**64 - 1),
        Timestamp(1_700_000_000_123),
        1.5,
        "",
        "héllo",
        "x" * 300,
        b"",
        b"\x00" * 300,
        Symbol("x-opt-offset"),
        uuid.UUID(int=42),
        [],
        [1, "a", [None, b"z"]],
        {"a": 1, Symbol("b"): [2, 3]},
        Described(ULong(0x75), b"body"),
        Described(Symbol("apache.org:selector-filter:string"), "amqp.annotation.x > '1'"),
        SymbolArray([Symbol("ANONYMOUS"), Symbol("PLAIN")]),
    ],
)
def test_round_trip(value):
    decoded, end = codec.decode(codec.encode(value))
    assert end == len(codec.encode(value))
    assert decoded == value
    assert type(decoded) is type(value) or isinstance(value, (SymbolArray, bool, int))


def test_garbage_raises_decode_error_only():
    rng = random.Random(1234)
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(3000)]
    # Valid prefixes followed by noise reach deeper into the decoder.
    samples += [codec.encode([1, "a", {"k": b"v"}])[:n] for n in range(1, 20)]
    samples += [
        b"\xe0\xff\xff\x40",
        b"\xf0\xff\xff\xff\xff\xff\xff\xff\xff\x40",
        b"\xc0\x02" + b"\xc0\x01" * 200,
        b"\x00" * 100,
    ]
    for data in samples:
        for parse in (codec.decode, codec.skip, codec.split_list):
            try:
                parse(data, 0)
            except DecodeError:
                pass
        for parse in (frames.parse_body, message.split_sections, message.parse_request):
            try:
                parse(data)
            except DecodeError:
                pass


def test_deep_nesting_is_refused():
    deep = b"\xc0\x02\x01" * 100 + b"\x40"
    with pytest.raises(DecodeError):
        codec.decode(deep)


def test_stamp_keeps_every_section_and_adds_broker_annotations():
    sections = (
        message.section(message.HEADER, [True])
        + message.section(message.DELIVERY_ANNOTATIONS, {Symbol("x-hop"): 1})
        + message.section(
            message.MESSAGE_ANNOTATIONS,
            {
                Symbol("x-opt-partition-key"): "k",
                Symbol("x-opt-sequence-number"): 99,
                Symbol("x-app"): "v",
            },
        )
        + message.section(message.PROPERTIES, ["id-1"])
        + message.section(message.APPLICATION_PROPERTIES, {"n": 1})
        + message.section(message.DATA, b"payload")
    )
    event = message.parse_event(sections)
    assert event.partition_key == "k"
    stored, da_pos = message.stamp(event, seq=5, offset=1234, enqueued_ms=1000, batch_key=None)
    parts = message.split_sections(stored)
    assert [p.code for p in parts] == [
        message.HEADER,
        message.DELIVERY_ANNOTATIONS,
        message.MESSAGE_ANNOTATIONS,
        message.PROPERTIES,
        message.APPLICATION_PROPERTIES,
        message.DATA,
    ]
    assert da_pos == len(parts[0].raw)
    annotations, _ = codec.decode(parts[2].raw, parts[2].value_at)
    assert annotations == {
        "x-opt-partition-key": "k",
        "x-app": "v",
        "x-opt-sequence-number": 5,
        "x-opt-offset": "1234",
        "x-opt-enqueued-time": 1000,
    }
    original = message.split_sections(sections)
    assert parts[1].raw == original[1].raw  # the producer's delivery annotations
    assert [p.raw for p in parts[3:]] == [p.raw for p in original[3:]]  # byte for byte
    # Runtime metrics join the producer's delivery annotations in the one section.
    merged = message.split_sections(
        message.add_delivery_annotations(stored, da_pos, {"x-hop": 7, "last_seq": 9})
    )
    assert [p.code for p in merged] == [p.code for p in parts]
    assert codec.decode(merged[1].raw, merged[1].value_at)[0] == {"x-hop": 1, "last_seq": 9}
    assert [p.raw for p in merged[2:]] == [p.raw for p in parts[2:]]


def test_batch_envelope_gives_its_key_to_events_without_one():
    inner = message.section(message.DATA, b"e1")
    envelope = (
        message.section(message.MESSAGE_ANNOTATIONS, {Symbol("x-opt-partition-key"): "batch-key"})
        + message.section(message.DATA, inner)
        + message.section(message.DATA, inner)
    )
    events, key = message.unpack(envelope, message.BATCH_FORMAT)
    assert key == "batch-key" and len(events) == 2
    stored, _ = message.stamp(events[0], 0, 0, 0, key)
    ann = message.split_sections(stored)[0]
    assert codec.decode(ann.raw, ann.value_at)[0]["x-opt-partition-key"] == "batch-key"
