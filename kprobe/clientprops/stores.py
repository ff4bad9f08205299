"""What every key store reader shares: its error, its result, and the property names its messages cite.

Kept apart from :mod:`kprobe.clientprops.keystores`, which re-exports :class:`StoreError` and
:class:`KeyPair`, so that the format readers (``jks``, ``pkcs12``, ``pem``) can raise and return them
without importing the module that dispatches to them.
"""

from __future__ import annotations

from kprobe.records import record

__all__ = ["KEY", "KEY_PASSWORD", "TRUST", "KeyPair", "Props", "StoreError", "one_line"]


class StoreError(Exception):
    """One line: which store, what is wrong, what to do. Never contains a password."""


@record
class KeyPair:
    """The client's certificate chain and private key for mutual TLS, as PEM text held in memory only."""

    certificate_chain_pem: str  # leaf first
    private_key_pem: str  # unencrypted PKCS#8 PEM, held in memory only

    def __repr__(self) -> str:
        """Counts the certificates and never shows the key: a KeyPair may end up in a log or a traceback."""
        count = self.certificate_chain_pem.count("-----BEGIN CERTIFICATE-----")
        return f"KeyPair(certificates={count}, private_key=<hidden>)"


# --- the properties a message names ---------------------------------------------------------------


class Props:
    """The property names of one store, so that each message names the property to fix."""

    __slots__ = ("location", "password", "type")

    def __init__(self, role: str) -> None:
        self.location = f"ssl.{role}.location"
        self.type = f"ssl.{role}.type"
        self.password = f"ssl.{role}.password"


TRUST = Props("truststore")
KEY = Props("keystore")
KEY_PASSWORD = "ssl.key.password"


def one_line(text: str) -> str:
    """A file name as a message shows it: on one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
