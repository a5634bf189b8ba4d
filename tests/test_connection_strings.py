"""One reading of an Event Hubs connection string, for Spark's options and every SDK client."""

from __future__ import annotations

import pytest

from streamlab.eventhubs.options import (
    EventHubsOptionError,
    client_kwargs,
    endpoint,
    entity_path,
    parse_options,
    without_entity,
)

BASE = "Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=course;SharedAccessKey=a2V5=;"


def test_entity_path_is_found_in_any_case_and_the_rest_is_left_whole():
    assert entity_path(BASE + "entitypath=heartbeats") == "heartbeats"
    assert entity_path(BASE + "EntityPath=heartbeats") == "heartbeats"
    assert entity_path(BASE) is None
    assert endpoint(BASE + "EntityPath=heartbeats") == "sb://127.0.0.1:5672"
    assert endpoint("not a connection string") == "(no Endpoint in the connection string)"
    assert without_entity(BASE + "ENTITYPATH=heartbeats") == BASE.rstrip(";")


def test_every_client_and_spark_reach_the_same_event_hub():
    named = BASE + "entitypath=heartbeats"
    assert client_kwargs(named, None) == {"conn_str": named}
    assert client_kwargs(named, "heartbeats") == {"conn_str": named}
    assert client_kwargs(BASE, "status") == {"conn_str": BASE, "eventhub_name": "status"}
    assert parse_options({"connectionString": named}).eventhub == "heartbeats"


@pytest.mark.parametrize(
    "call",
    [
        lambda s: client_kwargs(s, "status"),
        lambda s: parse_options({"connectionString": s, "eventHubName": "status"}),
    ],
    ids=["a client", "Spark's options"],
)
def test_a_string_and_a_name_that_disagree_are_refused_with_a_sentence(call):
    # The SDK alone would take the name given and Spark's options the string's: one string
    # and one name would reach two event hubs.
    with pytest.raises(EventHubsOptionError, match="names event hub 'heartbeats'.*'status'"):
        call(BASE + "entitypath=heartbeats")


def test_no_event_hub_named_anywhere_is_refused():
    with pytest.raises(EventHubsOptionError, match="name the event hub"):
        client_kwargs(BASE, None)
