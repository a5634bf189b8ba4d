"""Performative fields by name: read from what a client sends, full lists in what we send."""

from __future__ import annotations

import pytest

from streamlab.hub import frames
from streamlab.hub.conditions import Condition


def _parsed(data: bytes) -> frames.Performative:
    return frames.parse_body(data[frames.FRAME_HEADER.size :])


def test_a_flow_is_read_by_field_name():
    flow = _parsed(frames.flow_frame(0, 5, 5000, 7, 99, 2, 10, 1000, None, True, True))
    assert [
        flow.field(name)
        for name in ("next_incoming_id", "incoming_window", "handle", "link_credit", "echo")
    ] == [5, 5000, 2, 1000, True]
    assert flow.field("available", 0) == 0  # null: the default


def test_a_missing_trailing_field_reads_as_its_default():
    # A client may leave out trailing fields: this detach has only a handle.
    detach = _parsed(frames.frame(0, frames.DETACH, [frames.UInt(3)]))
    assert detach.field("handle") == 3 and detach.field("closed", False) is False
    assert detach.raw_field("error") is None


def test_every_performative_we_send_carries_its_full_field_list():
    sent = {
        frames.OPEN: frames.open_frame("hub", 512, 1),
        frames.BEGIN: frames.begin_frame(0, 0, 0, 1, 1, 1),
        frames.ATTACH: frames.attach_frame(0, "n", 0, role=True, source=None, target=None),
        frames.FLOW: frames.flow_frame(0, None, 1, 0, 1),
        frames.TRANSFER: frames.transfer_frame(0, 0, 0, b"t", b""),
        frames.DISPOSITION: frames.disposition_frame(0, 0, 0, frames.accepted()),
        frames.DETACH: frames.detach_frame(0, 0),
        frames.CLOSE: frames.close_frame(frames.error(Condition.INTERNAL_ERROR, "x")),
    }
    for code, data in sent.items():
        assert len(_parsed(data).fields) == len(frames.FIELDS[code]), hex(code)


def test_a_field_name_the_performative_lacks_is_refused():
    with pytest.raises(ValueError, match="no field credit in 0x13"):
        frames.fields(frames.FLOW, credit=1)
    with pytest.raises(KeyError):
        _parsed(frames.detach_frame(0, 0)).field("link_credit")
