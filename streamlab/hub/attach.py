"""Link attach: decide what a client's link connects to, and answer requests.

A client may attach to an event hub or partition (to send), to a consumer-group
partition (to receive), or to the request/response nodes ``$cbs`` (put-token: a SAS
token, checked as the service checks it) and ``$management`` (event hub and partition
properties). As on the service, an entity is reached only with a token: an attach or a
management request the connection's tokens do not cover is refused.

An attach to something that does not exist is answered the way AMQP prescribes: an
attach with a null terminus, then a detach carrying the error. The SDK turns that into
an exception at once instead of waiting for a timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import frames, message
from .auth import TokenError, check_token, resource_path
from .broker import LINK_STOLEN, NOT_FOUND, Broker, BrokerError, parse_address
from .codec import DecodeError, Described
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

if TYPE_CHECKING:
    from .connection import Connection, Session

SELECTOR_FILTERS = ("apache.org:selector-filter:string", 0x0000468C00000004)
EPOCH = "com.microsoft:epoch"
UNAUTHORIZED = "amqp:unauthorized-access"


def _address(terminus: Any) -> str:
    if isinstance(terminus, Described) and isinstance(terminus.value, list) and terminus.value:
        return str(terminus.value[0] or "")
    return ""


def _selector(source: Any) -> str | None:
    """The Event Hubs selector filter of a source, if any."""
    if not isinstance(source, Described) or len(source.value) < 8:
        return None
    filters = source.value[7]
    if not isinstance(filters, dict):
        return None
    for value in filters.values():
        if isinstance(value, Described) and value.descriptor in SELECTOR_FILTERS:
            text = value.value
            return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return None


def attach(conn: Connection, session: Session, perf: frames.Performative) -> None:
    """Handle an attach from the client."""
    remote_handle = perf.get(1)
    if remote_handle is None or remote_handle in session.links:
        raise frames.ProtocolError(
            "amqp:session:handle-in-use", f"handle {remote_handle} is in use"
        )
    name, client_receives = str(perf.get(0, "")), bool(perf.get(2, False))
    raw_source = perf.raw[5] if len(perf.raw) > 5 else None
    raw_target = perf.raw[6] if len(perf.raw) > 6 else None
    handle = session.free_handle()
    address = _address(perf.get(5) if client_receives else perf.get(6))
    try:
        if address not in REQUEST_NODES:
            _authorize(conn, address, "Listen" if client_receives else "Send")
        if client_receives:
            link: Link = _outbound(conn.broker, session, perf, name, handle, address)
        else:
            link = _inbound(conn.broker, session, perf, name, handle, address)
    except BrokerError as exc:
        # Null terminus on our side, then the error: the SDK raises it immediately.
        session.send(
            frames.attach_frame(
                session.channel,
                name,
                handle,
                not client_receives,
                None if client_receives else echo(raw_source),
                echo(raw_target) if client_receives else None,
                None,
                None,
            )
        )
        session.send(
            frames.detach_frame(
                session.channel, handle, True, frames.error(exc.condition, exc.description)
            )
        )
        dead = Link(session, name, handle, remote_handle, address)
        dead.closed = True
        session.links[remote_handle] = dead  # ignore its frames until the client detaches
        return
    session.links[remote_handle] = link
    metrics = isinstance(link, ConsumerLink) and link.metrics is not None
    session.send(
        frames.attach_frame(
            session.channel,
            name,
            handle,
            not client_receives,
            echo(raw_source),
            echo(raw_target),
            0 if client_receives else None,
            MAX_MESSAGE_SIZE,
            offered=[RUNTIME_METRIC] if metrics else None,
        )
    )
    if isinstance(link, InboundLink):
        link.grant()
    elif isinstance(link, OutboundLink):
        link.start()


def _authorize(conn: Connection, address: str, claim: str) -> None:
    """Refuse an attach that no token put on this connection covers."""
    path = resource_path(address)
    if not conn.authorized(path):
        raise BrokerError(
            UNAUTHORIZED,
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
    remote_handle = perf.get(1)
    if address in REQUEST_NODES:
        return ReplyLink(session, name, handle, remote_handle, address)
    hub, group, partition_id = parse_address(address)
    if group is None or partition_id is None:
        raise BrokerError(
            NOT_FOUND,
            f"cannot receive from '{address}': use <hub>/ConsumerGroups/<group>/Partitions/<id>",
        )
    part = broker.partition(hub, partition_id)
    cursor = broker.open_cursor(part, _selector(perf.get(5)))
    desired = perf.get(12) or []
    desired = desired if isinstance(desired, list) else [desired]
    wants_metrics = RUNTIME_METRIC in [str(d) for d in desired]
    properties = perf.get(13) or {}
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
            lambda why: link.detach(LINK_STOLEN, why),
        )
    except BrokerError:
        link.close()
        raise
    link.cleanup.append(lambda: broker.release(part, group, link))
    return link


def _inbound(
    broker: Broker,
    session: Session,
    perf: frames.Performative,
    name: str,
    handle: int,
    address: str,
) -> Link:
    remote_handle = perf.get(1)
    initial = perf.get(9, 0)
    if address in REQUEST_NODES:
        handler = _requests(broker, address)
    else:
        hub, group, partition_id = parse_address(address)
        if group is not None:
            raise BrokerError(NOT_FOUND, f"cannot send to a consumer group: '{address}'")
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


def _requests(broker: Broker, node: str) -> Handler:
    def on_message(link: InboundLink, payload: bytes, message_format: int) -> Described:
        try:
            request = message.parse_request(payload)
        except DecodeError as exc:
            return frames.rejected("amqp:decode-error", str(exc))
        conn = link.session.connection
        if node == "$cbs":
            status, description, body = _cbs(conn, request)
        elif not conn.authorized(resource_path(str(request.properties.get("name", "")))):
            status, description, body = (
                401,
                (
                    "Unauthorized access: no token put on $cbs covers "
                    f"'{request.properties.get('name', '')}'."
                ),
                None,
            )
        else:
            status, description, body = _management(broker, request)
        reply = link.session.reply_link(node)
        if reply is not None:
            reply.reply(message.response(request.message_id, status, description, body))
        return frames.accepted()

    return on_message


def _cbs(conn: Connection, request: message.Request) -> tuple[int, str, Any]:
    """put-token: the service's answers are 202, 401 (bad token) and 404 (no such entity)."""
    props = request.properties
    if props.get("operation") != "put-token":
        return 400, f"unsupported $cbs operation {props.get('operation')!r}", None
    audience = str(props.get("name", ""))
    try:
        grant = check_token(request.body, props.get("type"), audience, conn.keys)
    except TokenError as exc:
        return exc.status, str(exc), None
    path = resource_path(audience)
    if path:
        try:
            conn.broker.hub(path.split("/", 1)[0])
        except BrokerError:
            return 404, f"The messaging entity '{audience}' could not be found.", None
    conn.grants.append(grant)
    return 202, "Accepted", None


def _management(broker: Broker, request: message.Request) -> tuple[int, str, Any]:
    props = request.properties
    if props.get("operation") != "READ":
        return 400, f"unsupported operation {props.get('operation')!r}", None
    kind, name = props.get("type"), str(props.get("name", ""))
    try:
        if kind == "com.microsoft:eventhub":
            return 200, "OK", broker.eventhub_properties(name)
        if kind == "com.microsoft:partition":
            return 200, "OK", broker.partition_properties(name, str(props.get("partition")))
    except BrokerError as exc:
        return (404 if exc.condition == NOT_FOUND else 400), exc.description, None
    return 400, f"unsupported type {kind!r}", None
