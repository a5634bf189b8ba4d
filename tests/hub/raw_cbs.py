"""Claims-based security for the raw AMQP client: put a SAS token on ``$cbs``.

The SDK does this itself from the connection string; a raw client must do it before it
may attach to an event hub, as on the service.
"""

from __future__ import annotations

import time
import uuid

from eventhub_clients import RawClient

from streamlab.hub import frames, message
from streamlab.hub.auth import SAS_TOKEN_TYPE, make_token
from streamlab.hub.codec import Described, ULong

CBS_SENDER, CBS_RECEIVER = 90, 91


def settings_of(conn_str: str) -> dict[str, str]:
    """The fields of a connection string, by name."""
    return dict(part.split("=", 1) for part in conn_str.split(";") if "=" in part)


def token_for(
    conn_str: str,
    resource: str = "",
    *,
    key: str | None = None,
    key_name: str | None = None,
    lifetime: int = 3600,
) -> str:
    """A token for ``resource`` (an entity path; "" is the namespace) signed as the SDK
    signs it, with the connection string's policy unless told otherwise."""
    fields = settings_of(conn_str)
    return make_token(
        f"sb://127.0.0.1/{resource}",
        key_name or fields["SharedAccessKeyName"],
        key or fields["SharedAccessKey"],
        int(time.time()) + lifetime,
    )


def put_token(client: RawClient, audience: str, token: str) -> tuple[int, str]:
    """Send a put-token request; return (status-code, status-description).

    The $cbs links are detached afterwards and every frame they caused is read, so the
    caller's next frames are its own.
    """
    source = Described(ULong(frames.SOURCE), ["$cbs"])
    target = Described(ULong(frames.TARGET), ["$cbs"])
    client.send(
        0,
        frames.ATTACH,
        [
            "cbs-send",
            CBS_SENDER,
            False,
            None,
            None,
            Described(ULong(frames.SOURCE), ["raw-cbs"]),
            target,
            None,
            None,
            0,
        ],
    )
    client.expect(frames.ATTACH)
    client.send(
        0,
        frames.ATTACH,
        [
            "cbs-receive",
            CBS_RECEIVER,
            True,
            None,
            None,
            source,
            Described(ULong(frames.TARGET), ["raw-cbs"]),
        ],
    )
    client.expect(frames.ATTACH)
    client.flow(CBS_RECEIVER, delivery_count=0, credit=10)
    request = (
        message.section(message.PROPERTIES, [uuid.uuid4()])
        + message.section(
            message.APPLICATION_PROPERTIES,
            {"operation": "put-token", "type": SAS_TOKEN_TYPE, "name": audience},
        )
        + message.section(message.AMQP_VALUE, token)
    )
    client.transfer(CBS_SENDER, 0, request)
    reply = message.parse_request(client.expect(frames.TRANSFER).payload)
    client.expect(frames.DISPOSITION)
    for handle in (CBS_SENDER, CBS_RECEIVER):
        client.send(0, frames.DETACH, [handle, True])
        client.expect(frames.DETACH)
    return reply.properties["status-code"], reply.properties["status-description"]
