"""The SASL mechanisms kprobe speaks on its own connections: PLAIN and SCRAM (RFC 5802, RFC 7677, KIP-84).

Why speak SCRAM here rather than fall back to librdkafka: managed clusters (Amazon MSK on 9096,
Confluent Platform, Aiven) mostly sit behind SCRAM, and librdkafka drops the bootstrap broker once
the advertised endpoints fail (design notes, section 7), which is exactly kprobe's case. SCRAM is
a few HMACs over a salted password; what is easy to get wrong is checked against the RFC's own
test vector (tests/test_sasl.py) and against real brokers (the lab's `scram` and `sasl` scenarios).

Each mechanism is a conversation of opaque messages: `start()` gives the first client message,
`step(server_message)` the next one (or None once the exchange is complete). Nothing here
touches a socket or formats a secret into a message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from functools import lru_cache
from typing import Protocol

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES)


class SaslError(Exception):
    """The server's SCRAM messages are malformed or its signature does not verify (never a secret in the text)."""


class Conversation(Protocol):
    """One client side of one SASL exchange."""

    def start(self) -> bytes:
        """The first client message."""

    def step(self, server: bytes) -> bytes | None:
        """The next client message, or None when the server's last message ended the exchange."""


class Plain:
    """RFC 4616: one message, `authzid NUL authcid NUL password`."""

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\x00" + username.encode() + b"\x00" + password.encode()

    def start(self) -> bytes:
        """The whole exchange is this one message."""
        return self._token

    def step(self, server: bytes) -> bytes | None:
        """Nothing follows: the broker's answer says whether it worked."""
        return None


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
        client_key, stored_key, server_key = _keys(self.hash_name, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self._bare},{server.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.new(server_key, auth_message, self.hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def conversation(mechanism: str, username: str, password: str) -> Conversation:
    """The client side for one of MECHANISMS."""
    if mechanism == "PLAIN":
        return Plain(username, password)
    return Scram(mechanism, username, password)
