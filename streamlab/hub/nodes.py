"""The request/response nodes: ``$cbs`` (put-token) and ``$management`` (READ properties).

Besides the service's two READ types, ``$management`` answers ``com.streamlab:receivers``:
the open receivers of an event hub and where each stands, for the hub explorer.

A request's answer is a status code, a description and a body, computed from the broker, what
the connection holds (its policy keys, the grants of the tokens it put) and the request: no
socket, no link, so each answer can be tested on its own. The service's own codes and texts
are kept: 202, 401 and 404 for put-token; 200, 400, 401 and 404 for READ.
"""

from __future__ import annotations

import time
from typing import Any

from .auth import Grant, TokenError, check_token, resource_path
from .broker import RECEIVERS, Broker, BrokerError
from .conditions import Condition
from .message import Request

#: What a node answers: status code, description, body.
Answer = tuple[int, str, Any]
CBS, MANAGEMENT = "$cbs", "$management"


def put_token(
    broker: Broker, keys: dict[str, str], request: Request
) -> tuple[Answer, Grant | None]:
    """``$cbs``: check a token; the answer and, when accepted, what the token grants."""
    props = request.properties
    if props.get("operation") != "put-token":
        return (400, f"unsupported $cbs operation {props.get('operation')!r}", None), None
    audience = str(props.get("name", ""))
    try:
        grant = check_token(request.body, props.get("type"), audience, keys)
    except TokenError as exc:
        return (exc.status, str(exc), None), None
    path = resource_path(audience)
    if path:
        try:
            broker.hub(path.split("/", 1)[0])
        except BrokerError:
            return (404, f"The messaging entity '{audience}' could not be found.", None), None
    return (202, "Accepted", None), grant


def read(broker: Broker, grants: list[Grant], request: Request, now: float | None = None) -> Answer:
    """``$management``: an event hub's or a partition's properties, or its receivers, for a
    token that covers it."""
    props = request.properties
    name = str(props.get("name", ""))
    now = time.time() if now is None else now
    if not any(grant.covers(resource_path(name), now) for grant in grants):
        return 401, f"Unauthorized access: no token put on $cbs covers '{name}'.", None
    if props.get("operation") != "READ":
        return 400, f"unsupported operation {props.get('operation')!r}", None
    kind = props.get("type")
    try:
        if kind == "com.microsoft:eventhub":
            return 200, "OK", broker.eventhub_properties(name)
        if kind == "com.microsoft:partition":
            return 200, "OK", broker.partition_properties(name, str(props.get("partition")))
        if kind == RECEIVERS:
            return 200, "OK", broker.receivers(name)
    except BrokerError as exc:
        return (404 if exc.condition == Condition.NOT_FOUND else 400), exc.description, None
    return 400, f"unsupported type {kind!r}", None
