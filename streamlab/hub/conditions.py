"""The AMQP error conditions the emulator sends, as the service spells them.

``amqp:*`` come from the AMQP 1.0 specification (section 2.8.15 and the connection, session
and link error lists); ``com.microsoft:*`` from Event Hubs.
"""

from __future__ import annotations

from enum import StrEnum


class Condition(StrEnum):
    """An AMQP error condition: the symbol in an error's ``condition`` field."""

    DECODE_ERROR = "amqp:decode-error"
    ILLEGAL_STATE = "amqp:illegal-state"
    INTERNAL_ERROR = "amqp:internal-error"
    NOT_ALLOWED = "amqp:not-allowed"
    NOT_FOUND = "amqp:not-found"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
    CONNECTION_FORCED = "amqp:connection:forced"
    FRAMING_ERROR = "amqp:connection:framing-error"
    HANDLE_IN_USE = "amqp:session:handle-in-use"
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
    LINK_STOLEN = "amqp:link:stolen"
    ARGUMENT_ERROR = "com.microsoft:argument-error"
