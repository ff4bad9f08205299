"""The SASL mechanisms kprobe speaks on its own connections: PLAIN, SCRAM (RFC 5802, RFC 7677, KIP-84)
and OAUTHBEARER (RFC 7628, KIP-255, KIP-342).

Why speak SCRAM here rather than fall back to librdkafka: managed clusters (Amazon MSK on 9096,
Confluent Platform, Aiven) mostly sit behind SCRAM, and librdkafka drops the bootstrap broker once
the advertised endpoints fail (design notes, section 7), which is exactly kprobe's case. SCRAM is
a few HMACs over a salted password; what is easy to get wrong is checked against the RFC's own
test vector (tests/kafka/test_sasl.py) and against real brokers (the lab's `scram` and `sasl` scenarios).
OAUTHBEARER is spoken here for the same reason (Confluent Cloud, Strimzi, Azure Event Hubs, and
Amazon MSK IAM, whose token AWS's signer makes): the message is the token in RFC 7628's framing;
getting the token is kprobe.kafka.oauth's business.

Each mechanism is a conversation of opaque messages: `start()` gives the first client message,
`step(server_message)` the next one (or None once the exchange is complete). Nothing here
touches a socket or formats a secret into a message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Protocol

from kprobe.kafka.mechanisms import MECHANISMS as MECHANISMS  # named here too, where the mechanisms are spoken
from kprobe.kafka.mechanisms import SCRAM_HASHES


class SaslError(Exception):
    """The server's SCRAM messages are malformed or its signature does not verify (never a secret in the text)."""


class Conversation(Protocol):
    """One client side of one SASL exchange."""

    def start(self) -> bytes:
        """The first client message."""

    def step(self, server: bytes) -> bytes | None:
        """The next client message, or None when the server's last message ended the exchange."""

    def refusal(self) -> str | None:
        """Why the server refused, in its words, when it said so inside the exchange (else None)."""

    def redact(self, text: str) -> str:
        """`text` (a server's words) with this exchange's secret replaced: a hostile server may echo it."""


def _redact(text: str, *secrets_: str) -> str:
    for secret in sorted((s for s in secrets_ if s), key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return text


class Plain:
    """RFC 4616: one message, `authzid NUL authcid NUL password`."""

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\x00" + username.encode() + b"\x00" + password.encode()
        self._password = password

    def start(self) -> bytes:
        """The whole exchange is this one message."""
        return self._token

    def step(self, server: bytes) -> bytes | None:
        """Nothing follows: the broker's answer says whether it worked."""
        return None

    def refusal(self) -> str | None:
        """PLAIN's refusal is the broker's error message, outside the exchange."""
        return None

    def redact(self, text: str) -> str:
        """The password, which PLAIN sends in clear, is never quoted back."""
        return _redact(text, self._password)


_DERIVING = threading.Lock()


@lru_cache(maxsize=32)
def _keys(hash_name: str, password: bytes, salt: bytes, iterations: int) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey): the PBKDF2 is the costly part, so it runs once per run.

    Every identity check of a run authenticates again with the same salt and iteration count;
    without the cache a 4096-iteration SHA-512 derivation would be paid per endpoint.
    """
    salted = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return client_key, stored_key, server_key


def _saslname(username: str) -> str:
    """RFC 5802 5.1: ',' and '=' in a user name are escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("the server's SCRAM message is not UTF-8") from None
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslError("the server's SCRAM message is malformed")
        out.setdefault(key, value)
    return out


class Scram:
    """RFC 5802 client, as Kafka's SCRAM-SHA-256 and SCRAM-SHA-512 expect it (no channel binding)."""

    MIN_ITERATIONS = 4096  # Kafka's own floor: fewer is a server to distrust (RFC 7677 too)

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.hash_name = SCRAM_HASHES[mechanism]
        self._password = password.encode()
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def refusal(self) -> str | None:
        """SCRAM's refusals (`e=`) raise SaslError in `step`; the broker's error message says the rest."""
        return None

    def redact(self, text: str) -> str:
        """SCRAM never sends the password; a message holding it is scrubbed all the same."""
        return _redact(text, self._password.decode(errors="replace"))

    def start(self) -> bytes:
        """client-first-message: no channel binding, the user name and a fresh nonce."""
        return ("n,," + self._bare).encode()

    def step(self, server: bytes) -> bytes | None:
        """client-final-message after server-first; None once server-final's signature verifies."""
        if self._server_signature is None:
            return self._final(server)
        attrs = _attributes(server)
        if "e" in attrs:
            raise SaslError(f"the server refused the proof: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            raise SaslError("the server's signature is not base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslError("the server's signature does not verify: it does not know this password "
                            "(a man in the middle, or another user database)")
        return None

    def _final(self, server: bytes) -> bytes:
        attrs = _attributes(server)
        if "e" in attrs:
            raise SaslError(f"the server refused the first message: {attrs['e']}")
        nonce, salt_text, iterations_text = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslError("the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise SaslError("the server's salt or iteration count is malformed") from None
        if not self.MIN_ITERATIONS <= iterations <= 1_000_000:
            raise SaslError(f"the server asks for {iterations} iterations, outside 4096-1000000")
        with _DERIVING:  # concurrent bootstraps wait for one derivation, then share it from the cache
            client_key, stored_key, server_key = _keys(self.hash_name, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self._bare},{server.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.new(server_key, auth_message, self.hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


KVSEP = b"\x01"  # RFC 7628 3.1


class OAuthBearer:
    """RFC 7628 client: the token in a GS2 message, then KIP-255's refusal handshake if the broker refuses.

    The first message is `n,,` (no channel binding, no authorization id, as librdkafka and the
    Java client send it), `%x01auth=Bearer <token>%x01`, one `key=value%x01` per KIP-342
    extension, and a closing `%x01`. A broker that accepts answers with empty bytes. One that
    refuses answers with a JSON error (`{"status":"invalid_token"}`) as a *successful* step; the
    client must then send a lone `%x01` and the broker fails the exchange with a generic message
    ("Received %x01 response from client after it received our error"). So the JSON is kept
    here and `refusal()` gives it back: it is the only place the broker says why.
    """

    def __init__(self, token: str, extensions: tuple[tuple[str, str], ...] = (), *,
                 hints: Mapping[str, str] | None = None, about: str = "") -> None:
        self._message = client_first_message(token, extensions)
        self._token = token
        self._server_error: bytes | None = None
        # What a refusal's status means depends on who made the token (an OAuth server, AWS's signer).
        self._hints = OAUTH_STATUS_HINTS if hints is None else hints
        self._about = about

    def start(self) -> bytes:
        """The token and extensions, in RFC 7628's framing."""
        return self._message

    def step(self, server: bytes) -> bytes | None:
        """None when the broker took the token; the lone `%x01` after its JSON error; then the refusal."""
        if self._server_error is None:
            if not server:
                return None
            self._server_error = server
            return KVSEP
        raise SaslError(self.refusal() or "the broker refused the token")

    def refusal(self) -> str | None:
        """The broker's KIP-255 error, in its words, once it sent one (never with the token in it)."""
        if self._server_error is None:
            return None
        about = f"; {self._about}" if self._about else ""
        return self.redact(describe_oauth_error(self._server_error, self._hints) + about)

    def redact(self, text: str) -> str:
        """The token is a credential: a broker quoting it back does not get it printed."""
        return _redact(text, self._token)


def client_first_message(token: str, extensions: tuple[tuple[str, str], ...] = ()) -> bytes:
    """RFC 7628 3.1's client-resp: gs2-header kvsep `auth=Bearer token` kvsep *(key=value kvsep) kvsep."""
    pairs = b"".join(f"{key}={value}".encode() + KVSEP for key, value in extensions)
    return b"n,," + KVSEP + b"auth=Bearer " + token.encode() + KVSEP + pairs + KVSEP


OAUTH_STATUS_HINTS = {
    "invalid_token": "the token is expired, for another audience or issuer, signed with a key the broker's JWKS "
    "does not hold, or unsigned where signatures are checked; the broker's log names which",
    "insufficient_scope": "the token lacks a scope this listener requires",
}
# An MSK IAM token is a SigV4-presigned URL, not a JWT: audience, issuer and JWKS mean nothing to it.
MSK_IAM_STATUS_HINTS = {
    "invalid_token": "an Amazon MSK IAM token is refused when its signature does not verify (credentials IAM does not "
    "know or that expired, a region other than the cluster's, a clock far off) or when the IAM policy does not allow "
    "kafka-cluster:Connect on this cluster; a broker that is not MSK's IAM listener refuses any such token, since it "
    "is not a JWT",
}


def describe_oauth_error(raw: bytes, hints: Mapping[str, str] | None = None) -> str:
    """KIP-255's server error (`{"status":..., "scope":..., "openid-configuration":...}`) as one sentence.

    Kafka formats that JSON without escaping its values, so a value holding a quote makes it
    invalid JSON: the fields are then read one by one, and failing that the text is quoted as is.
    """
    text = raw.decode("utf-8", errors="replace")
    fields: dict[str, str] = {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        fields = {str(k): str(v) for k, v in data.items() if isinstance(v, (str, int, float))}
    else:
        fields = dict(re.findall(r'"([A-Za-z-]+)"\s*:\s*"([^"]*)"', text))
    status = fields.get("status")
    if not status:
        return f"the broker refused the token: {text[:300]}"
    out = f"the broker refused the token: {status}"
    if fields.get("scope"):
        out += f" (scope required: {fields['scope']})"
    hint = (OAUTH_STATUS_HINTS if hints is None else hints).get(status)
    if hint:
        out += f" ({hint})"
    if fields.get("openid-configuration"):
        out += f"; its OpenID configuration: {fields['openid-configuration']}"
    return out


def conversation(mechanism: str, username: str, password: str) -> Conversation:
    """The client side for PLAIN or SCRAM; OAUTHBEARER needs a token first (`OAuthBearer`)."""
    if mechanism == "PLAIN":
        return Plain(username, password)
    return Scram(mechanism, username, password)
