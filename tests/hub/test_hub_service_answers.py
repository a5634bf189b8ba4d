"""The emulator answers as the service does: tokens, unknown event hubs, deadlines, sizes.

Each behaviour is seen through the real SDK where the SDK can show it, and through the
raw client where only the protocol can (a client that never sends ``open``, a message
one byte over the limit, which the SDK would refuse before sending).
"""

from __future__ import annotations

import logging
import os
import socket
import time

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.amqp import AmqpAnnotatedMessage
from azure.eventhub.exceptions import AuthenticationError, ConnectError, EventDataSendError
from eventhub_clients import (
    DEADLINE,
    RawClient,
    Receiver,
    encoded_event,
    port_of,
    producer,
    receive,
    send,
    wait_for,
)
from raw_cbs import put_token, settings_of, token_for

from streamlab.hub import Hub, frames
from streamlab.hub.links import MAX_MESSAGE_SIZE

CONSUMER = "amqp://127.0.0.1/heartbeats/ConsumerGroups/$Default/Partitions/0"


def _with(conn_str: str, **fields: str) -> str:
    """``conn_str`` with some fields replaced."""
    settings = settings_of(conn_str) | fields
    return ";".join(f"{name}={value}" for name, value in settings.items())


def _refused(conn_str: str, eventhub: str = "heartbeats") -> AuthenticationError:
    """The error a producer gets for sending and for asking for properties."""
    with producer(conn_str, eventhub, retry_total=0) as client:
        with pytest.raises(AuthenticationError) as sent:
            client.send_event(EventData("x"))
        with pytest.raises(AuthenticationError):
            client.get_eventhub_properties()
    return sent.value


# ------------------------------------------------------------------ messages


def test_delivery_annotations_reach_the_consumer(conn_str):
    message = AmqpAnnotatedMessage(
        data_body=[b"aa", b"bb"],
        delivery_annotations={"delann_key": "delann_value"},
        application_properties={"body_type": "data"},
    )
    with producer(conn_str) as client:
        client.send_event(message, partition_id="0")
        client.send_event(EventData("plain"), partition_id="0")
    with Receiver(
        conn_str,
        partition_id="0",
        starting_position="-1",
        track_last_enqueued_event_properties=True,
    ) as receiver:
        annotated, plain = receiver.wait_count(2)
    raw = annotated.raw_amqp_message
    assert raw.delivery_annotations[b"delann_key"] == b"delann_value"
    assert list(raw.body) == [b"aa", b"bb"]
    assert raw.application_properties[b"body_type"] == b"data"
    assert not plain.raw_amqp_message.delivery_annotations.get(b"delann_key")
    # The runtime metrics this receiver asked for travel in the same section.
    assert receiver.last_enqueued["0"]["sequence_number"] == 1


# ------------------------------------------------------------------ tokens


def test_an_unknown_event_hub_is_refused_at_put_token(conn_str):
    error = _refused(conn_str, eventhub="no-such-hub")
    assert isinstance(error, ConnectError)  # AuthenticationError is a ConnectError
    assert "404" in str(error) and "no-such-hub" in str(error)


def test_a_wrong_key_is_refused(conn_str):
    error = _refused(_with(conn_str, SharedAccessKey="not-the-key"))
    assert "401" in str(error) and "InvalidSignature" in str(error)


def test_an_unknown_policy_is_refused(conn_str):
    error = _refused(_with(conn_str, SharedAccessKeyName="NoSuchPolicy"))
    assert "401" in str(error) and "NoSuchPolicy" in str(error)


def test_an_expired_or_garbage_token_is_refused(conn_str):
    expired = token_for(conn_str, "heartbeats", lifetime=-60)
    base = f"Endpoint={settings_of(conn_str)['Endpoint']};UseDevelopmentEmulator=true"
    error = _refused(f"{base};SharedAccessSignature={expired}")
    assert "401" in str(error) and "ExpiredToken" in str(error)
    error = _refused(f"{base};SharedAccessSignature=SharedAccessSignature sr=x&sig=y&se=1")
    assert "401" in str(error)


def test_the_printed_connection_string_works_and_entity_path_names_one_hub(hub):
    with EventHubProducerClient.from_connection_string(
        hub.connection_string_for("status")
    ) as client:
        assert client.get_eventhub_properties()["partition_ids"] == ["0"]
        client.send_event(EventData("to status"))
    assert (
        receive(
            hub.connection_string, 1, eventhub="status", partition_id="0", starting_position="-1"
        )[0].body_as_str()
        == "to status"
    )


def test_a_chosen_key_is_the_only_one_that_works(tmp_path):
    with Hub(data_dir=tmp_path / "hub", key_name="Listener", key="s3cret") as hub:
        assert "SharedAccessKeyName=Listener;SharedAccessKey=s3cret;" in hub.connection_string
        with producer(hub.connection_string) as client:
            client.send_event(EventData("ok"))
        _refused(
            _with(
                hub.connection_string,
                SharedAccessKeyName="RootManageSharedAccessKey",
                SharedAccessKey="SAS_KEY_VALUE",
            )
        )


def test_attach_needs_a_token_that_covers_the_entity(conn_str):
    client = RawClient(port_of(conn_str))
    try:
        client.handshake()
        attach = client.attach_receiver(CONSUMER, handle=0)
        assert attach.get(5) is None
        assert client.expect(frames.DETACH).get(2).value[0] == "amqp:unauthorized-access"
        # A good token for another event hub does not open this one.
        assert put_token(client, "sb://127.0.0.1/status", token_for(conn_str, "status"))[0] == 202
        assert client.attach_sender("heartbeats", handle=1).get(6) is None
        assert client.expect(frames.DETACH).get(2).value[0] == "amqp:unauthorized-access"
        # A token for the consumer group opens its partitions; a wrong key opens nothing.
        status, description = put_token(
            client, "sb://127.0.0.1/heartbeats", token_for(conn_str, "heartbeats", key="bad")
        )
        assert (status, description.split(":")[0]) == (401, "InvalidSignature")
        group = "heartbeats/consumergroups/$default"
        assert put_token(client, f"sb://127.0.0.1/{group}", token_for(conn_str, group))[0] == 202
        assert client.attach_receiver(CONSUMER, handle=2).get(5) is not None
    finally:
        client.close()


# ------------------------------------------------------------------ deadlines


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """Read until the server closes; fail if it takes longer than ``seconds``."""
    sock.settimeout(seconds)
    received = b""
    started = time.monotonic()
    while chunk := sock.recv(65536):
        received += chunk
    assert time.monotonic() - started < seconds
    return received


def test_a_client_that_never_sends_open_is_closed(tmp_path):
    with Hub(data_dir=tmp_path / "hub", open_timeout=0.5) as hub:
        with socket.create_connection(("127.0.0.1", hub.port), timeout=DEADLINE) as sock:
            sock.sendall(frames.AMQP_HEADER)  # ...and then nothing
            assert _closed_within(sock, 5) == frames.AMQP_HEADER
        with socket.create_connection(("127.0.0.1", hub.port), timeout=DEADLINE) as sock:
            assert _closed_within(sock, 5) == b""  # not even a header
        with producer(hub.connection_string) as client:  # real clients open at once
            client.send_event(EventData("fine"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_accepted_sockets_use_tcp_keepalive(hub):
    """The in-process hub's end of a connection, found among this process's sockets."""
    with socket.create_connection(("127.0.0.1", hub.port), timeout=DEADLINE) as client:
        client.sendall(frames.AMQP_HEADER)
        assert client.recv(8) == frames.AMQP_HEADER  # accepted and served

        def server_end() -> socket.socket | None:
            for fd in os.listdir("/proc/self/fd"):
                try:
                    candidate = socket.socket(fileno=os.dup(int(fd)))
                except OSError:
                    continue
                try:
                    if candidate.getpeername() == client.getsockname():
                        return candidate
                except OSError:
                    pass
                candidate.close()
            return None

        accepted = wait_for(server_end, what="the hub's end of the connection")
        with accepted:
            assert accepted.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_a_silent_connection_is_closed_and_sdk_clients_are_not(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="streamlab.hub.connection")

    def idle_closes() -> int:
        return sum("silent for" in record.getMessage() for record in caplog.records)

    # Two seconds, so that the SDK's empty frames reach the hub in time on a loaded machine too.
    with Hub(data_dir=tmp_path / "hub", idle_timeout=2.0) as hub:
        conn_str = hub.connection_string
        silent = RawClient(hub.port)
        try:
            silent.sock.sendall(frames.AMQP_HEADER)
            assert silent._read_exact(8) == frames.AMQP_HEADER
            silent.send(0, frames.OPEN, ["raw-test"])
            opened = silent.expect(frames.OPEN)
            assert opened.get(4) == 2000  # the advertised idle timeout, in milliseconds
            started = time.monotonic()
            close = silent.expect(frames.CLOSE)
            assert 1.8 < time.monotonic() - started < 8
            assert close.get(0).value[0] == "amqp:resource-limit-exceeded"
            with pytest.raises(ConnectionError):
                silent.read_frame()
        finally:
            silent.close()
        assert idle_closes() == 1
        # The SDK reads the advertised timeout and sends empty frames within it: a consumer
        # waiting on an empty partition for more than two timeouts is not closed.
        with Receiver(conn_str, partition_id="2", starting_position="-1") as receiver:
            send(conn_str, ["first"], partition_id="2")
            receiver.wait_count(1)
            time.sleep(4.5)
            assert idle_closes() == 1
            # A producer has no keep-alive unless asked (keep_alive=...): idle, it is closed,
            # as on the service, and its next send opens a new connection by itself.
            with producer(conn_str) as client:
                client.send_event(EventData("second"), partition_id="2")
                wait_for(lambda: idle_closes() == 2, what="the idle producer to be closed")
                client.send_event(EventData("after a quiet spell"), partition_id="2")
            events = receiver.wait_count(3)
            assert receiver.errors == []
        assert [e.body_as_str() for e in events] == ["first", "second", "after a quiet spell"]


# ------------------------------------------------------------------ message size


def test_the_advertised_size_is_accepted_and_one_byte_more_is_refused(conn_str):
    client = RawClient(port_of(conn_str))
    try:
        client.handshake()
        put_token(client, "sb://127.0.0.1/heartbeats", token_for(conn_str, "heartbeats"))
        attach = client.attach_sender("heartbeats/Partitions/3", handle=1)
        assert attach.get(10) == MAX_MESSAGE_SIZE  # what the SDK sizes its batches by

        def send(size: int, delivery_id: int) -> None:
            payload = encoded_event(b"x" * (size - 8))  # 8 bytes of section header
            assert len(payload) == size
            chunks = [payload[i : i + 200_000] for i in range(0, size, 200_000)]
            for index, chunk in enumerate(chunks):
                client.transfer(1, delivery_id, chunk, more=index < len(chunks) - 1)

        send(MAX_MESSAGE_SIZE, 0)
        assert client.expect(frames.DISPOSITION).get(4) == frames.accepted()
        send(MAX_MESSAGE_SIZE + 1, 1)
        refused = client.expect(frames.DISPOSITION).get(4)
        assert refused.descriptor == frames.REJECTED
        condition, description, _ = refused.value[0].value
        assert condition == "amqp:link:message-size-exceeded"
        assert (
            f"size:{MAX_MESSAGE_SIZE + 1} bytes) exceeds the limit ({MAX_MESSAGE_SIZE} "
            "bytes)" in description
        )
        send(1000, 2)  # the link stays usable, as on the service
        assert client.expect(frames.DISPOSITION).get(4) == frames.accepted()
    finally:
        client.close()
    with producer(conn_str) as sdk:
        assert sdk.get_partition_properties("3")["last_enqueued_sequence_number"] == 1


def test_the_sdk_fills_a_batch_to_the_limit_and_refuses_more(conn_str):
    with producer(conn_str) as client:
        batch = client.create_batch(partition_id="1")
        assert batch.max_size_in_bytes == MAX_MESSAGE_SIZE
        with pytest.raises(ValueError, match="size limit"):
            for _ in range(10_000):
                batch.add(EventData("y" * 997))
        filled = len(batch)
        assert batch.size_in_bytes > MAX_MESSAGE_SIZE - 1100
        client.send_batch(batch)  # the fullest batch the SDK makes is within the limit
        # A single event is not checked by the SDK: the hub refuses it, and the SDK
        # raises the service's error.
        with pytest.raises(EventDataSendError, match="LinkMessageSizeExceeded"):
            client.send_event(EventData(b"z" * MAX_MESSAGE_SIZE), partition_id="1")
    assert len(receive(conn_str, filled, partition_id="1", starting_position="-1")) == filled
