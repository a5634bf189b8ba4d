"""Link attach: decide what a client's link connects to.

A client may attach to an event hub or partition (to send), to a consumer-group
partition (to receive), or to the request/response nodes ``$cbs`` (put-token: a SAS
token, checked as the service checks it) and ``$management`` (event hub and partition
properties), whose answers :mod:`streamlab.hub.nodes` computes. As on the service, an
entity is reached only with a token: an attach or a management request the connection's
tokens do not cover is refused.

An attach to something that does not exist is answered the way AMQP prescribes: an
attach with a null terminus, then a detach carrying the error. The SDK turns that into
an exception at once instead of waiting for a timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from . import frames, message, nodes
from .auth import Grant, resource_path
from .broker import Broker, BrokerError, parse_address
from .codec import DecodeError, Described
from .conditions import Condition
from .links import (
    MAX_MESSAGE_SIZE,
    REQUEST_NODES,
    RUNTIME_METRIC,
    ConsumerLink,
    InboundLink,
    Link,
    OutboundLink,
    ReplyLink,
    echo,
)
from .session import Session

SELECTOR_FILTERS = ("apache.org:selector-filter:string", 0x0000468C00000004)
EPOCH = "com.microsoft:epoch"


class Peer(Protocol):
    """What an attach needs from the client's connection: the broker and its tokens."""

    broker: Broker
    keys: dict[str, str]  # policy name -> key
    grants: list[Grant]  # what the tokens put on $cbs allow

    def authorized(self, entity_path: str) -> bool: ...


def _terminus_field(terminus: Any, code: int, name: str) -> Any:
    if isinstance(terminus, Described) and isinstance(terminus.value, list):
        return frames.field_of(code, terminus.value, name)
    return None


def _address(terminus: Any, code: int) -> str:
    return str(_terminus_field(terminus, code, "address") or "")


def _selector(source: Any) -> str | None:
    """The Event Hubs selector filter of a source, if any."""
    filters = _terminus_field(source, frames.SOURCE, "filter")
    if not isinstance(filters, dict):
        return None
    for value in filters.values():
        if isinstance(value, Described) and value.descriptor in SELECTOR_FILTERS:
            text = value.value
            return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return None


def attach(conn: Peer, session: Session, perf: frames.Performative) -> None:
    """Handle an attach from the client."""
    remote_handle = perf.field("handle")
    if remote_handle is None or remote_handle in session.links:
        raise frames.ProtocolError(Condition.HANDLE_IN_USE, f"handle {remote_handle} is in use")
    name, client_receives = str(perf.field("name", "")), bool(perf.field("role", False))
    handle = session.free_handle()
    address = (
        _address(perf.field("source"), frames.SOURCE)
        if client_receives
        else _address(perf.field("target"), frames.TARGET)
    )
    try:
        if address not in REQUEST_NODES:
            _authorize(conn, address, "Listen" if client_receives else "Send")
        if client_receives:
            link: Link = _outbound(conn.broker, session, perf, name, handle, address)
        else:
            link = _inbound(conn, session, perf, name, handle, address)
    except BrokerError as exc:
        _refuse(session, perf, handle, address, exc)
        return
    session.links[remote_handle] = link
    metrics = isinstance(link, ConsumerLink) and link.metrics is not None
    session.send(
        frames.attach_frame(
            session.channel,
            name,
            handle,
            role=not client_receives,
            source=echo(perf.raw_field("source")),
            target=echo(perf.raw_field("target")),
            initial_delivery_count=0 if client_receives else None,
            max_message_size=MAX_MESSAGE_SIZE,
            offered=[RUNTIME_METRIC] if metrics else None,
        )
    )
    if isinstance(link, InboundLink):
        link.grant()
    elif isinstance(link, OutboundLink):
        link.start()


def _refuse(
    session: Session, perf: frames.Performative, handle: int, address: str, exc: BrokerError
) -> None:
    """Answer an attach that cannot be: a null terminus on our side, then the error.

    The SDK raises the error at once. The link stays, closed, so that its frames are
    ignored until the client detaches it.
    """
    remote_handle = perf.field("handle")
    name, client_receives = str(perf.field("name", "")), bool(perf.field("role", False))
    session.send(
        frames.attach_frame(
            session.channel,
            name,
            handle,
            role=not client_receives,
            source=None if client_receives else echo(perf.raw_field("source")),
            target=echo(perf.raw_field("target")) if client_receives else None,
        )
    )
    session.send(
        frames.detach_frame(
            session.channel, handle, True, frames.error(exc.condition, exc.description)
        )
    )
    dead = Link(session, name, handle, remote_handle, address)
    dead.closed = True
    session.links[remote_handle] = dead


def _authorize(conn: Peer, address: str, claim: str) -> None:
    """Refuse an attach that no token put on this connection covers."""
    path = resource_path(address)
    if not conn.authorized(path):
        raise BrokerError(
            Condition.UNAUTHORIZED_ACCESS,
            f"Unauthorized access. '{claim}' claim(s) are required "
            f"to perform this operation. Resource: '{path}'. Put a token for it "
            "on $cbs first (the SDK does this from the connection string).",
        )


def _outbound(
    broker: Broker,
    session: Session,
    perf: frames.Performative,
    name: str,
    handle: int,
    address: str,
) -> Link:
    remote_handle = perf.field("handle")
    if address in REQUEST_NODES:
        return ReplyLink(session, name, handle, remote_handle, address)
    hub, group, partition_id = parse_address(address)
    if group is None or partition_id is None:
        raise BrokerError(
            Condition.NOT_FOUND,
            f"cannot receive from '{address}': use <hub>/ConsumerGroups/<group>/Partitions/<id>",
        )
    part = broker.partition(hub, partition_id)
    cursor = broker.open_cursor(part, _selector(perf.field("source")))
    desired = perf.field("desired_capabilities") or []
    desired = desired if isinstance(desired, list) else [desired]
    wants_metrics = RUNTIME_METRIC in [str(d) for d in desired]
    properties = perf.field("properties") or {}
    epoch = properties.get(EPOCH) if isinstance(properties, dict) else None
    link = ConsumerLink(
        session,
        name,
        handle,
        remote_handle,
        address,
        part,
        cursor,
        (lambda: broker.runtime_metrics(part)) if wants_metrics else None,
    )
    try:
        broker.claim(
            part,
            group,
            epoch if isinstance(epoch, int) else None,
            link,
            lambda why: link.detach(Condition.LINK_STOLEN, why),
            cursor,
        )
    except BrokerError:
        link.close()
        raise
    link.cleanup.append(lambda: broker.release(part, group, link))
    return link


def _inbound(
    conn: Peer,
    session: Session,
    perf: frames.Performative,
    name: str,
    handle: int,
    address: str,
) -> Link:
    broker = conn.broker
    remote_handle = perf.field("handle")
    initial = perf.field("initial_delivery_count", 0)
    if address in REQUEST_NODES:
        handler = _requests(conn, session, address)
    else:
        hub, group, partition_id = parse_address(address)
        if group is not None:
            raise BrokerError(Condition.NOT_FOUND, f"cannot send to a consumer group: '{address}'")
        broker.hub(hub)
        if partition_id is not None:
            broker.partition(hub, partition_id)
        handler = _publisher(broker, hub, partition_id)
    return InboundLink(session, name, handle, remote_handle, address, initial, handler)


Handler = Callable[[InboundLink, bytes, int], Described]


def _publisher(broker: Broker, hub: str, partition_id: str | None) -> Handler:
    def on_message(link: InboundLink, payload: bytes, message_format: int) -> Described:
        broker.publish(hub, partition_id, payload, message_format)
        return frames.accepted()

    return on_message


def _requests(conn: Peer, session: Session, node: str) -> Handler:
    """Answer each request on the reply link the client attached from ``node``."""

    def on_message(link: InboundLink, payload: bytes, message_format: int) -> Described:
        try:
            request = message.parse_request(payload)
        except DecodeError as exc:
            return frames.rejected(Condition.DECODE_ERROR, str(exc))
        if node == nodes.CBS:
            (status, description, body), grant = nodes.put_token(conn.broker, conn.keys, request)
            if grant is not None:
                conn.grants.append(grant)
        else:
            status, description, body = nodes.read(conn.broker, conn.grants, request)
        reply = session.reply_link(node)
        if reply is not None:
            reply.reply(message.response(request.message_id, status, description, body))
        return frames.accepted()

    return on_message
