"""The request nodes answered without a socket: put-token on $cbs, READ on $management."""

from __future__ import annotations

import time

import pytest

from streamlab.hub import nodes
from streamlab.hub.auth import SAS_TOKEN_TYPE, Grant, make_token
from streamlab.hub.broker import Broker
from streamlab.hub.message import Request
from streamlab.hub.storage import Policy

KEYS = {"RootManageSharedAccessKey": "SAS_KEY_VALUE"}
AN_HOUR = int(time.time()) + 3600


@pytest.fixture
def broker(tmp_path):
    running = Broker(tmp_path, {"heartbeats": 4, "status": 1}, Policy())
    yield running
    running.close()


def _put_token(resource: str, audience: str | None = None, key: str = "SAS_KEY_VALUE") -> Request:
    token = make_token(resource, "RootManageSharedAccessKey", key, AN_HOUR)
    properties = {"operation": "put-token", "type": SAS_TOKEN_TYPE, "name": audience or resource}
    return Request(None, properties, token)


def _read(name: str, kind: str = "com.microsoft:eventhub", **more) -> Request:
    return Request(None, {"operation": "READ", "name": name, "type": kind, **more}, None)


def test_a_good_token_is_accepted_with_what_it_grants(broker):
    answer, grant = nodes.put_token(broker, KEYS, _put_token("sb://127.0.0.1:5672/heartbeats"))
    assert answer == (202, "Accepted", None)
    assert grant == Grant("heartbeats", AN_HOUR)


def test_a_bad_token_gets_the_services_401_and_grants_nothing(broker):
    request = _put_token("sb://127.0.0.1:5672/heartbeats", key="not the key")
    (status, description, body), grant = nodes.put_token(broker, KEYS, request)
    assert (status, grant) == (401, None)
    assert description == "InvalidSignature: The token has an invalid signature."


def test_a_token_for_an_event_hub_that_does_not_exist_gets_404(broker):
    answer, grant = nodes.put_token(broker, KEYS, _put_token("sb://127.0.0.1:5672/nope"))
    assert answer == (
        404,
        "The messaging entity 'sb://127.0.0.1:5672/nope' could not be found.",
        None,
    )
    assert grant is None


def test_cbs_answers_only_put_token(broker):
    request = Request(None, {"operation": "delete-token"}, None)
    assert nodes.put_token(broker, KEYS, request) == (
        (400, "unsupported $cbs operation 'delete-token'", None),
        None,
    )


def test_management_reads_properties_that_a_token_covers(broker):
    grants = [Grant("heartbeats", AN_HOUR)]
    status, description, body = nodes.read(broker, grants, _read("heartbeats"))
    assert (status, description) == (200, "OK")
    assert body["partition_ids"] == ["0", "1", "2", "3"] and body["name"] == "heartbeats"
    status, _, body = nodes.read(
        broker, grants, _read("heartbeats", "com.microsoft:partition", partition="2")
    )
    assert status == 200 and body["partition"] == "2" and body["is_partition_empty"] is True


def test_management_refuses_what_no_token_covers_and_says_what_it_cannot_do(broker):
    grants = [Grant("heartbeats", AN_HOUR)]
    assert nodes.read(broker, grants, _read("status")) == (
        401,
        "Unauthorized access: no token put on $cbs covers 'status'.",
        None,
    )
    expired = [Grant("", int(time.time()) - 1)]
    assert nodes.read(broker, expired, _read("heartbeats"))[0] == 401
    everything = [Grant("", AN_HOUR)]
    missing = nodes.read(broker, everything, _read("nope"))
    assert missing[0] == 404 and "nope" in missing[1]
    no_partition = _read("heartbeats", "com.microsoft:partition", partition="9")
    assert nodes.read(broker, everything, no_partition)[0] == 404
    assert nodes.read(broker, everything, _read("heartbeats", "com.microsoft:queue")) == (
        400,
        "unsupported type 'com.microsoft:queue'",
        None,
    )
    write = Request(None, {"operation": "UPDATE", "name": "heartbeats"}, None)
    assert nodes.read(broker, everything, write) == (400, "unsupported operation 'UPDATE'", None)


def test_management_reads_where_each_receiver_stands(broker):
    part = broker.partition("heartbeats", "2")
    cursor = broker.open_cursor(part, "amqp.annotation.x-opt-sequence-number >= '7'")
    token = object()
    broker.claim(part, "Dashboards", None, token, lambda why: None, cursor)
    grants = [Grant("heartbeats", AN_HOUR)]
    answer = nodes.read(broker, grants, _read("heartbeats", "com.streamlab:receivers"))
    assert answer == (
        200,
        "OK",
        {
            "name": "heartbeats",
            "type": "com.streamlab:receivers",
            "receivers": [
                {"partition": "2", "consumer_group": "Dashboards", "next_sequence_number": 7}
            ],
        },
    )
    broker.release(part, "Dashboards", token)
    answer = nodes.read(broker, grants, _read("heartbeats", "com.streamlab:receivers"))
    assert answer[2]["receivers"] == []
