"""PEM: blocks read from text, certificates and chains, PKCS#8 keys as Kafka's ``PemStore`` reads them.

Every store ends as PEM text (what ``ssl`` and librdkafka take), so the writing side lives here too. Only
an encrypted key needs the ``cryptography`` package, imported then.
"""

from __future__ import annotations

import base64
import re

from kprobe.clientprops.der import Corrupt, tlv
from kprobe.clientprops.stores import KEY_PASSWORD, KeyPair, StoreError

__all__ = ["cert_pem", "pem", "pem_certificates", "pem_pair"]


def pem(label: str, der: bytes) -> str:
    """The DER as a PEM block with this label, 64 characters a line."""
    b64 = base64.b64encode(der).decode("ascii")
    lines = "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def cert_pem(der: bytes) -> str:
    """A certificate's DER as a PEM block."""
    return pem("CERTIFICATE", der)


# A BEGIN or END line's armour, found where it starts (a lookahead, so that the dashes closing one line can
# open the next, as in the block pattern Kafka's PemStore and re.findall read alike).
_MARKER = r"(?=-----(BEGIN|END) ([A-Z0-9 ]+)-----)"  # compiled on first use (re caches it)


def _pem_blocks(text: str) -> list[tuple[str, bytes]]:
    """(label, DER) of each PEM block; header lines ("Proc-Type: ...") are dropped, as Kafka's parser does.

    A block runs from a BEGIN line to the first END line of its label after it; a BEGIN line that no END
    line of its label follows opens nothing. The armour is found in one scan and every BEGIN line is
    matched against the END lines of its label, in order, so a hostile file costs its length: a lazy
    ``BEGIN (label)-----(.*?)-----END`` pattern searched the rest of the text from every unmatched BEGIN
    line, quadratic in the lines.
    """
    markers = [(m.start(), m.group(1) == "BEGIN", m.group(2)) for m in re.finditer(_MARKER, text)]
    ends: dict[str, list[int]] = {}
    for start, begin, label in markers:
        if not begin:
            ends.setdefault(label, []).append(start)
    seen = dict.fromkeys(ends, 0)  # per label, how many of its END lines lie before the scan
    out = []
    after = 0  # where the last block ended: a BEGIN line inside a block is its content
    for start, begin, label in markers:
        if not begin or start < after or label not in ends:
            continue
        body_start = start + len(label) + 16  # "-----BEGIN " and "-----" around the label
        found, stop = seen[label], ends[label]
        while found < len(stop) and stop[found] < body_start:
            found += 1
        seen[label] = found
        if found == len(stop):
            continue
        body = text[body_start : stop[found]]
        after = stop[found] + len(label) + 14  # "-----END " and "-----"
        b64 = "".join(line.strip() for line in body.splitlines() if ":" not in line)
        try:
            out.append((label, base64.b64decode(b64, validate=True)))
        except ValueError:
            out.append((label, b""))
    return out


def _first_element(der: bytes) -> bytes:
    """The first DER element (an openssl TRUSTED CERTIFICATE block carries its trust settings after the cert)."""
    try:
        _, _, end = tlv(der, 0, len(der))
    except Corrupt:
        return der
    return der[:end]


def pem_certificates(text: str) -> list[bytes]:
    """The DER of every certificate block in the text (of a TRUSTED CERTIFICATE block, the certificate only)."""
    return [_first_element(der) for label, der in _pem_blocks(text) if label.endswith("CERTIFICATE") and der]


def pem_pair(chain_text: str, key_text: str, key_password: str | None, chain_where: str, key_where: str) -> KeyPair:
    """A PEM key and chain as Kafka's PemStore reads them: one PKCS#8 key, encrypted iff a key password is set."""
    keys = [(label, der) for label, der in _pem_blocks(key_text) if label.endswith("PRIVATE KEY")]
    certs = pem_certificates(chain_text)
    if not keys:
        raise StoreError(f"{key_where} (PEM): no -----BEGIN PRIVATE KEY----- block: add the client's private key")
    if len(keys) > 1:
        raise StoreError(f"{key_where} (PEM): {len(keys)} private keys, and Kafka expects one: keep the client's")
    if not certs:
        raise StoreError(
            f"{chain_where} (PEM): no -----BEGIN CERTIFICATE----- block: add the client certificate and its chain"
        )
    label, der = keys[0]
    chain_pem = "".join(cert_pem(d) for d in certs)
    if label == "PRIVATE KEY":
        if key_password is not None:
            raise StoreError(
                f"{key_where} (PEM): the key is not encrypted but {KEY_PASSWORD} is set, and Kafka then fails to "
                f"read it: remove {KEY_PASSWORD}"
            )
        return KeyPair(chain_pem, pem("PRIVATE KEY", der))
    if label != "ENCRYPTED PRIVATE KEY":
        raise StoreError(
            f"{key_where} (PEM): a '{label}' block, and Kafka reads PKCS#8 keys only: convert it with "
            f"openssl pkcs8 -topk8 -in KEY -out key.pk8.pem (-nocrypt for no password)"
        )
    if key_password is None:
        raise StoreError(f"{key_where} (PEM): the key is encrypted and {KEY_PASSWORD} is not set: set it")
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_der_private_key(der, key_password.encode("utf-8"))
    except (ValueError, TypeError):
        raise StoreError(
            f"{key_where} (PEM): the encrypted key does not open with {KEY_PASSWORD}: check {KEY_PASSWORD}"
        ) from None
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return KeyPair(chain_pem, key_pem)
