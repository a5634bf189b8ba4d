"""Shared access signature (SAS) tokens, checked the way Event Hubs checks them.

A client proves it holds a policy's key by sending, on ``$cbs``, a token of the form
``SharedAccessSignature sr=<resource URI>&sig=<signature>&se=<expiry>&skn=<policy>``:
the signature is HMAC-SHA256, with the policy's key, over the URL-encoded resource URI,
a newline and the expiry (seconds since the epoch). The token then grants access to
that resource and everything below it (``sb://host/`` covers the whole namespace,
``sb://host/heartbeats`` one event hub and its consumer groups) until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import quote_plus, unquote_plus, urlsplit

SAS_TOKEN_TYPE = "servicebus.windows.net:sastoken"
_PREFIX = "SharedAccessSignature "


class TokenError(Exception):
    """A token the service refuses: status code 401 and the service's description."""

    status = 401


class Grant(NamedTuple):
    """What an accepted token allows: entity paths under ``path``, until ``expires``."""

    path: str  # lower case, no leading or trailing slash; "" is the whole namespace
    expires: int  # seconds since the epoch

    def covers(self, entity_path: str, now: float) -> bool:
        """True when the grant is still valid for ``entity_path`` (for example
        ``heartbeats/consumergroups/$default``)."""
        target = entity_path.strip("/").lower()
        return now < self.expires and (
            not self.path or target == self.path or target.startswith(self.path + "/")
        )


def resource_path(uri: str) -> str:
    """The entity path of a resource URI or audience: ``sb://host:5672/Hub/`` -> ``hub``.

    The host is not compared: a client may reach the emulator under any name.
    """
    text = uri.strip()
    path = urlsplit(text).path if "://" in text else text
    return path.strip("/").lower()


def make_token(resource: str, policy: str, key: str, expires: int) -> str:
    """A token as the SDK builds it (for tests and tools)."""
    encoded = quote_plus(resource)
    signature = _sign(key, f"{encoded}\n{expires}")
    return (
        f"{_PREFIX}sr={encoded}&sig={quote_plus(signature)}&se={expires}&skn={quote_plus(policy)}"
    )


def _sign(key: str, text: str) -> str:
    digest = hmac.new(key.encode("utf-8"), text.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _fields(token: str) -> dict[str, str]:
    """The raw (still URL-encoded) fields of a token, by name."""
    if not token.startswith(_PREFIX):
        raise TokenError("InvalidToken: the token is not a SharedAccessSignature token.")
    fields: dict[str, str] = {}
    for part in token[len(_PREFIX) :].split("&"):
        name, sep, value = part.partition("=")
        if not sep or name in fields:
            raise TokenError("InvalidToken: the SharedAccessSignature token is malformed.")
        fields[name] = value
    missing = [name for name in ("sr", "sig", "se", "skn") if name not in fields]
    if missing:
        raise TokenError(
            f"InvalidToken: the SharedAccessSignature token lacks {', '.join(missing)}."
        )
    return fields


def check_token(
    token: object,
    token_type: object,
    audience: str,
    keys: dict[str, str],
    clock: Callable[[], float] = time.time,
) -> Grant:
    """Verify a put-token request; return what it grants, or raise TokenError.

    Checked as the service does: the token type, the policy name, the signature with
    that policy's key, the expiry, and that the token's resource covers the audience.
    """
    if isinstance(token, bytes):
        token = token.decode("utf-8", "replace")
    if isinstance(token_type, bytes):
        token_type = token_type.decode("utf-8", "replace")
    if token_type != SAS_TOKEN_TYPE:
        raise TokenError(
            f"InvalidToken: token type {token_type!r} is not supported; the "
            f"emulator accepts {SAS_TOKEN_TYPE} tokens from a connection string."
        )
    if not isinstance(token, str):
        raise TokenError("InvalidToken: the token is not a string.")
    fields = _fields(token)
    policy = unquote_plus(fields["skn"])
    key = keys.get(policy)
    if key is None:
        raise TokenError(f"InvalidIssuer: the policy '{policy}' does not exist on this namespace.")
    try:
        expires = int(fields["se"])
    except ValueError:
        raise TokenError("InvalidToken: the expiry (se) is not a number.") from None
    # The signature covers sr exactly as the client encoded it.
    expected = _sign(key, f"{fields['sr']}\n{fields['se']}")
    if not hmac.compare_digest(expected.encode(), unquote_plus(fields["sig"]).encode()):
        raise TokenError("InvalidSignature: The token has an invalid signature.")
    if expires <= clock():
        raise TokenError(
            f"ExpiredToken: The token is expired. Expiration time: "
            f"'{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(expires))}Z'."
        )
    grant = Grant(resource_path(unquote_plus(fields["sr"])), expires)
    if not grant.covers(resource_path(audience), clock()):
        raise TokenError(
            f"InvalidAudience: the token's resource '{unquote_plus(fields['sr'])}' "
            f"does not cover '{audience}'."
        )
    return grant
