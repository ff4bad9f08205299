"""JKS and JCEKS stores, read against the format with the standard library only.

The JKS format is small (magic 0xFEEDFEED, version 1 or 2, entries, then a keyed SHA-1 over the whole)
and so is Sun's key protector (a SHA-1 keystream XOR, checked by a SHA-1 digest): both are written here,
so that reading a JKS truststore imports nothing but ``hashlib`` and ``struct`` (why not pyjks: see
:mod:`kprobe.clientprops.keystores`). JCEKS (magic 0xCECECECE) has the same layout; its certificates are
read, but not its private keys (another key protector) nor its secret keys, for which the messages say
how to convert the store to PKCS12.
"""

from __future__ import annotations

import hashlib
import struct

from kprobe.clientprops.der import Corrupt, expect, items, oid, tlv
from kprobe.clientprops.stores import KEY, KEY_PASSWORD, Props, StoreError, one_line

__all__ = ["JCEKS_CONVERT", "jks_recover", "jks_trusted", "read_jks"]

JCEKS_CONVERT = (
    "keytool -importkeystore -srckeystore {f} -srcstoretype JCEKS -destkeystore {f}.p12 -deststoretype PKCS12"
)
_OID_JKS_KEY_PROTECTOR = oid("1.3.6.1.4.1.42.2.17.1.1")


class _JksEntry:
    """One entry of a JKS or JCEKS store (plain classes here: a dataclass costs import time)."""

    __slots__ = ("alias", "chain", "protected_key")

    def __init__(self, alias: str, protected_key: bytes | None, chain: list[bytes]) -> None:
        self.alias = alias
        self.protected_key = protected_key  # EncryptedPrivateKeyInfo DER of a private-key entry; None: trusted cert
        self.chain = chain  # DER, leaf first; the one certificate of a trusted-cert entry


def read_jks(data: bytes, password: str | None, kind: str, location: str, props: Props) -> list[_JksEntry]:
    """The entries of a JKS or JCEKS store, after Java's integrity check when a password is given.

    Layout (sun.security.provider.JavaKeyStore, com.sun.crypto.provider.JceKeyStore): magic, version,
    count, then per entry a tag (1 private key, 2 trusted certificate, 3 JCEKS secret key), the alias
    (writeUTF), an 8-byte date, and the key and/or certificates, each an int length and bytes, a
    certificate preceded by its type (writeUTF) in version 2; then SHA-1 over the password as UTF-16BE,
    b"Mighty Aphrodite" and every byte before the digest.
    """
    where = f"{props.location}={one_line(location)}"
    entries: list[_JksEntry] = []
    try:
        _magic, version, count = struct.unpack_from(">III", data, 0)
        if version not in (1, 2):
            raise StoreError(f"{where} ({kind}): version {version} of the format is unknown to Java too: re-create it")
        pos = 12

        def read_int() -> int:
            nonlocal pos
            (value,) = struct.unpack_from(">i", data, pos)
            pos += 4
            return int(value)

        def read_bytes(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(data):
                raise Corrupt
            pos += n
            return data[pos - n : pos]

        def read_utf() -> str:
            nonlocal pos
            (n,) = struct.unpack_from(">H", data, pos)
            pos += 2
            return read_bytes(n).decode("utf-8", "replace")

        def read_cert() -> bytes:
            if version == 2:
                read_utf()  # the certificate type, "X.509"
            return read_bytes(read_int())

        for _ in range(count):
            tag = read_int()
            alias = read_utf()
            pos += 8  # the entry's date
            if tag == 1:
                protected = read_bytes(read_int())
                chain = [read_cert() for _ in range(read_int())]
                entries.append(_JksEntry(alias, protected, chain))
            elif tag == 2:
                entries.append(_JksEntry(alias, None, [read_cert()]))
            elif tag == 3 and kind == "JCEKS":
                raise StoreError(
                    f"{where} (JCEKS): entry '{alias}' is a secret key, which kprobe does not read; convert the "
                    f"store with " + JCEKS_CONVERT.format(f=one_line(location))
                )
            else:
                raise Corrupt
        if password is not None:
            digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + data[:pos]).digest()
            if data[pos : pos + 20] != digest:
                raise StoreError(
                    f"{where} ({kind}): Keystore was tampered with, or password was incorrect (Java's words): "
                    f"check {props.password}"
                )
    except (struct.error, Corrupt):
        raise StoreError(
            f"{where} ({kind}): the store is truncated or corrupt, and Java cannot read it either: "
            f"copy it again or re-create it"
        ) from None
    return entries


def jks_trusted(entries: list[_JksEntry]) -> list[bytes]:
    """Java's trust: every trusted-certificate entry and the leaf of every private-key entry."""
    return [e.chain[0] for e in entries if e.chain]


def jks_recover(protected: bytes, password: str, where: str, alias: str) -> bytes:
    """The PKCS#8 PrivateKeyInfo DER that Sun's key protector (sun.security.provider.KeyProtector) guards.

    The EncryptedPrivateKeyInfo's data is salt(20) || encrypted key || check(20); the keystream is
    d1 = SHA1(pw + salt), d(i+1) = SHA1(pw + d(i)), pw the password as UTF-16BE; SHA1(pw + plain)
    must equal the check, else Java says "Cannot recover key".
    """
    try:
        _, start, end = expect(tlv(protected, 0, len(protected)), 0x30)
        algorithm, octets = items(protected, start, end)[:2]
        expect(algorithm, 0x30)
        algorithm_oid = expect(tlv(protected, algorithm[1], algorithm[2]), 0x06)
        expect(octets, 0x04)
    except ValueError:
        raise StoreError(f"{where} (JKS): key entry '{alias}' is corrupt: re-create the store") from None
    if protected[algorithm_oid[1] : algorithm_oid[2]] != _OID_JKS_KEY_PROTECTOR:
        raise StoreError(
            f"{where} (JKS): key entry '{alias}' is protected by an algorithm other than Sun's JKS key protector: "
            f"convert the store with keytool -importkeystore -deststoretype PKCS12"
        )
    blob = protected[octets[1] : octets[2]]
    if len(blob) < 41:
        raise StoreError(f"{where} (JKS): key entry '{alias}' is corrupt: re-create the store")
    salt, encrypted, check = blob[:20], blob[20:-20], blob[-20:]
    pw = password.encode("utf-16-be")
    stream = bytearray()
    digest = salt
    while len(stream) < len(encrypted):
        digest = hashlib.sha1(pw + digest).digest()
        stream += digest
    n = len(encrypted)
    plain = (int.from_bytes(encrypted, "big") ^ int.from_bytes(stream[:n], "big")).to_bytes(n, "big")
    if hashlib.sha1(pw + plain).digest() != check:
        raise StoreError(
            f"{where} (JKS): Cannot recover key (Java's words) of entry '{alias}': check {KEY_PASSWORD} "
            f"(Java uses {KEY.password} when it is not set)"
        )
    return plain
