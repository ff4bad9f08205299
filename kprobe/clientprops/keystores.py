"""The trust and key stores a Java client's properties name, read into PEM text in memory.

Users hand kprobe the ``client.properties`` that Confluent Cloud, Amazon MSK and Aiven give out. It names
``ssl.truststore.*`` and, for mutual TLS, ``ssl.keystore.*`` / ``ssl.key.password``: JKS (Kafka's default
type), PKCS12, JCEKS or PEM. kprobe's own TLS client is Python's ``ssl`` module
(``SSLContext.load_verify_locations(cadata=...)``) and its round trip goes through librdkafka (``ssl.ca.pem``,
``ssl.certificate.pem``, ``ssl.key.pem``): both take PEM text, so every store becomes PEM text here, held in
memory only (an unencrypted private key is never written to disk by this module).

Why a JKS reader of our own, and not PyPI's pyjks: pyjks (20.0.0, last release 2020) costs 90-120 ms to
import, with byte code, on our machines, and needs a C compiler for its ``twofish`` dependency, while the
budget for reading a Java properties file with a JKS truststore is 30 ms in all. The JKS format is small
(magic 0xFEEDFEED, version 1 or 2, entries, then a keyed SHA-1 over the whole) and so is Sun's key
protector (a SHA-1 keystream XOR, checked by a SHA-1 digest), so both are written here against the format,
with the standard library only: reading a JKS truststore imports nothing else.

PKCS12 goes through the ``cryptography`` package (imported inside the functions that need it, never at
module import): its ``load_pkcs12`` checks the store's MAC (the password) and decrypts keys and
certificates, whatever cipher wrote them. It does not show a bag's attributes, though, and Java's trust
depends on one (below), so a small walker here reads the bags' attributes, opening the PBES2/AES safes
that keytool (JDK 12 and later) and OpenSSL 3 write; for a store whose certificates use an older cipher
(RC2-40 of JDK 8's keytool) it falls back on trusting every certificate in the store.

What Java does, and so what this module does (read in the JDK 17 sources and checked against its
``TrustManagerFactory``):

- The truststore: Java trusts every trusted-certificate entry, and the end-entity certificate (only)
  of every private-key entry (``sun.security.validator.TrustStoreUtil.getTrustedCerts``). The CA
  certificates of a key entry's chain are not trusted.
- PKCS12: a certificate bag is a trusted-certificate entry only when it carries Oracle's
  trusted-key-usage attribute (2.16.840.1.113894.746875.1.1), which keytool writes; a store made by
  ``openssl pkcs12 -export -nokeys`` has none (before OpenSSL 3.2's ``-jdktrust``), and Java trusts
  nothing in it: this module says so rather than trusting what Java would not.
- Without a password Java skips a JKS store's integrity check and still reads it (a truststore with no
  ``ssl.truststore.password``), while for PKCS12 it skips the encrypted parts, which in a keytool store
  hold every certificate.
- The store type: the JKS and PKCS12 types each open the other's files (``keystore.type.compat``), so a
  store is read by its content (its magic bytes), not by its declared type; but neither opens a JCEKS
  file, the JCEKS type opens JKS but not PKCS12, and none of them opens PEM (Kafka's PEM type opens only
  PEM). A store whose content its declared type would not open is refused, as Java refuses it.
- Kafka's own rules (``DefaultSslEngineFactory``): the type defaults to JKS; a keystore needs
  ``ssl.keystore.password`` unless it is PEM, where no store password may be set; the key password
  defaults to the store password; PEM keys are PKCS#8, encrypted exactly when ``ssl.key.password`` is set.

Errors are :class:`StoreError`: one line that names the store, what is wrong, and the property to fix.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from dataclasses import dataclass

TYPE_CHECKING = False  # typing's own flag without importing typing: this module runs on the start-up path
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12KeyAndCertificates
    from cryptography.x509 import Certificate

__all__ = ["KeyPair", "StoreError", "keystore_pair", "truststore_pem"]


class StoreError(Exception):
    """One line: which store, what is wrong, what to do. Never contains a password."""


@dataclass(frozen=True, repr=False)
class KeyPair:
    """The client's certificate chain and private key for mutual TLS, as PEM text held in memory only."""

    certificate_chain_pem: str  # leaf first
    private_key_pem: str  # unencrypted PKCS#8 PEM, held in memory only

    def __repr__(self) -> str:
        """Counts the certificates and never shows the key: a KeyPair may end up in a log or a traceback."""
        count = self.certificate_chain_pem.count("-----BEGIN CERTIFICATE-----")
        return f"KeyPair(certificates={count}, private_key=<hidden>)"


# --- the properties a message names ---------------------------------------------------------------


class _Props:
    """The property names of one store, so that each message names the property to fix."""

    __slots__ = ("location", "password", "type")

    def __init__(self, role: str) -> None:
        self.location = f"ssl.{role}.location"
        self.type = f"ssl.{role}.type"
        self.password = f"ssl.{role}.password"


_TRUST = _Props("truststore")
_KEY = _Props("keystore")
_KEY_PASSWORD = "ssl.key.password"
_TRUST_CERTS = "ssl.truststore.certificates"
_KEY_CHAIN = "ssl.keystore.certificate.chain"
_KEY_KEY = "ssl.keystore.key"

# Which content each declared type opens in Java 9+ (measured with JDK 17's KeyStore.load).
_OPENS = {
    "JKS": ("JKS", "PKCS12"),
    "PKCS12": ("PKCS12", "JKS"),
    "JCEKS": ("JCEKS", "JKS"),
    "PEM": ("PEM",),
}
_JCEKS_CONVERT = (
    "keytool -importkeystore -srckeystore {f} -srcstoretype JCEKS -destkeystore {f}.p12 -deststoretype PKCS12"
)


# --- public API -----------------------------------------------------------------------------------


def truststore_pem(
    location: str | None, store_type: str | None, password: str | None, *, certificates: str | None = None
) -> str:
    """PEM text of every certificate Java's TrustManager would trust in this truststore, each once.

    That is, as the JDK does it (``TrustStoreUtil.getTrustedCerts``): every trusted-certificate entry
    (JKS/JCEKS tag 2; PKCS12 certificate bags with Oracle's trusted-key-usage attribute) and the
    end-entity certificate of every private-key entry; or every certificate of the inline
    ``ssl.truststore.certificates`` (type PEM). ``store_type`` None is Kafka's default, JKS; the content
    decides how the file is read. ``password`` None: a JKS store is read without its integrity check, as
    Java does; a PKCS12 store's encrypted certificates are then out of reach, as they are for Java.
    """
    declared = _declared_type(store_type, _TRUST)
    if certificates is not None:
        if location is not None:
            raise StoreError(
                f"both {_TRUST.location} and {_TRUST_CERTS} are set, and Kafka refuses that: keep one of them"
            )
        if declared != "PEM":
            raise StoreError(f"{_TRUST_CERTS} is set but {_type_said(store_type, _TRUST)}: set {_TRUST.type}=PEM")
        if password is not None:
            raise StoreError(f"{_TRUST.password} is set with PEM certificates, and Kafka refuses that: remove it")
        ders = _pem_certificates(certificates)
        if not ders:
            raise StoreError(f"{_TRUST_CERTS}: no -----BEGIN CERTIFICATE----- block: paste the CA certificate(s)")
        return "".join(_cert_pem(d) for d in _unique(ders))
    if location is None:
        raise StoreError(
            f"neither {_TRUST.location} nor {_TRUST_CERTS} is set: Java then trusts its JVM's default cacerts"
        )
    data = _read(location, _TRUST)
    content = _content_type(data, location, _TRUST)
    where = f"{_TRUST.location}={_one_line(location)}"
    _check_opens(declared, store_type, content, where, _TRUST)
    if content == "PEM":
        if password is not None:
            raise StoreError(f"{_TRUST.password} is set with a PEM truststore, and Kafka refuses that: remove it")
        ders = _pem_certificates(data.decode("utf-8", "replace"))
    elif content in ("JKS", "JCEKS"):
        ders = _jks_trusted(_read_jks(data, password, content, location, _TRUST))
    else:
        ders = _pkcs12_trusted(data, password, where)
    if not ders:
        raise StoreError(
            f"{where} ({content}): no trusted certificate in the store, so Java fails with "
            f'"the trustAnchors parameter must be non-empty": import the CA with keytool -importcert'
            + (" (keytool marks it trusted; openssl pkcs12 -export does not)" if content == "PKCS12" else "")
        )
    return "".join(_cert_pem(d) for d in _unique(ders))


def keystore_pair(
    location: str | None,
    store_type: str | None,
    store_password: str | None,
    key_password: str | None,
    *,
    chain: str | None = None,
    key: str | None = None,
) -> KeyPair:
    """The client's certificate chain and key for mutual TLS, from ``ssl.keystore.*`` and ``ssl.key.password``.

    Java's key password defaults to the store password (Kafka's ``keyPassword()``). ``chain`` and ``key``
    are the inline ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key`` (type PEM).

    A store with several key entries: Java's client picks one during the handshake, by the issuers the
    broker says it accepts, which cannot be known before the handshake; this function takes the first key
    entry in alias order (JKS), or the first key in the file (PKCS12, as ``cryptography`` reads it).
    """
    declared = _declared_type(store_type, _KEY)
    if key is not None or chain is not None:
        if key is None or chain is None:
            missing = _KEY_KEY if key is None else _KEY_CHAIN
            raise StoreError(f"{missing} is not set but the other of {_KEY_KEY}/{_KEY_CHAIN} is: Kafka needs both")
        if location is not None:
            raise StoreError(f"both {_KEY.location} and {_KEY_KEY} are set, and Kafka refuses that: keep one of them")
        if declared != "PEM":
            raise StoreError(f"{_KEY_KEY} is set but {_type_said(store_type, _KEY)}: set {_KEY.type}=PEM")
        if store_password is not None:
            raise StoreError(f"{_KEY.password} is set with a PEM key, and Kafka refuses that: remove it")
        return _pem_pair(chain, key, key_password, _KEY_CHAIN, _KEY_KEY)
    if location is None:
        raise StoreError(f"neither {_KEY.location} nor {_KEY_KEY} is set: no client certificate for mutual TLS")
    data = _read(location, _KEY)
    content = _content_type(data, location, _KEY)
    where = f"{_KEY.location}={_one_line(location)}"
    _check_opens(declared, store_type, content, where, _KEY)
    if content == "PEM":
        if store_password is not None:
            raise StoreError(f"{_KEY.password} is set with a PEM keystore, and Kafka refuses that: remove it")
        text = data.decode("utf-8", "replace")
        return _pem_pair(text, text, key_password, where, where)
    if store_password is None:
        raise StoreError(f"{where} ({content}): {_KEY.password} is not set, and Kafka needs it: set it")
    key_pw = key_password if key_password is not None else store_password
    if content == "PKCS12":
        return _pkcs12_pair(data, store_password, key_pw, where)
    entries = _read_jks(data, store_password, content, location, _KEY)
    keys = sorted((e for e in entries if e.protected_key is not None), key=lambda e: e.alias)
    if not keys:
        raise StoreError(
            f"{where} ({content}): no private key entry, only trusted certificates (a truststore?): "
            f"point {_KEY.location} at the store with the client's key"
        )
    entry = keys[0]
    if content == "JCEKS":
        raise StoreError(
            f"{where} (JCEKS): JCEKS private keys are not read; convert the store with "
            + _JCEKS_CONVERT.format(f=_one_line(location))
        )
    plain = _jks_recover(entry.protected_key or b"", key_pw, where, entry.alias)
    if not entry.chain:
        raise StoreError(f"{where} (JKS): key entry '{entry.alias}' has no certificate: re-import its certificate")
    return KeyPair("".join(_cert_pem(d) for d in entry.chain), _pem("PRIVATE KEY", plain))


# --- files, types, messages -----------------------------------------------------------------------


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _declared_type(store_type: str | None, props: _Props) -> str:
    declared = (store_type or "JKS").strip().upper()
    if declared not in _OPENS:
        raise StoreError(
            f"{props.type}={_one_line(store_type or '')}: kprobe reads JKS, PKCS12, JCEKS and PEM stores: "
            f"convert the store to PKCS12 with keytool -importkeystore"
        )
    return declared


def _type_said(store_type: str | None, props: _Props) -> str:
    if store_type is None:
        return f"{props.type} is not set (Kafka's default: JKS)"
    return f"{props.type} is {_one_line(store_type)}"


def _check_opens(declared: str, store_type: str | None, content: str, where: str, props: _Props) -> None:
    if content not in _OPENS[declared]:
        raise StoreError(
            f"{where}: a {content} store, but {_type_said(store_type, props)} and Java's {declared} type "
            f"does not open {content} files: set {props.type}={content}"
        )


def _read(location: str, props: _Props) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise StoreError(f"{props.location}={_one_line(location)}: no such file: fix {props.location}") from None
    except OSError as e:
        why = e.strerror or type(e).__name__
        where = f"{props.location}={_one_line(location)}"
        raise StoreError(f"{where}: cannot read it ({why}): fix {props.location}") from None


def _content_type(data: bytes, location: str, props: _Props) -> str:
    """The store's kind by its content: magic bytes, a PFX's version 3, or PEM armour."""
    head = data[:4]
    if head == b"\xfe\xed\xfe\xed":
        return "JKS"
    if head == b"\xce\xce\xce\xce":
        return "JCEKS"
    if _looks_pkcs12(data):
        return "PKCS12"
    if b"-----BEGIN" in data:
        return "PEM"
    raise StoreError(
        f"{props.location}={_one_line(location)}: not a key store (neither JKS, JCEKS, PKCS12 nor PEM by its "
        f"content): point {props.location} at the store"
    )


def _unique(ders: list[bytes]) -> list[bytes]:
    return list(dict.fromkeys(ders))


def _pem(label: str, der: bytes) -> str:
    b64 = base64.b64encode(der).decode("ascii")
    lines = "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def _cert_pem(der: bytes) -> str:
    return _pem("CERTIFICATE", der)


# --- DER, the little that is needed ---------------------------------------------------------------


class _Corrupt(ValueError):
    """A structure ended early or had an unexpected tag."""


def _tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at pos (definite lengths only)."""
    if pos + 2 > end:
        raise _Corrupt
    tag, n = data[pos], data[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > end:
            raise _Corrupt
        n = int.from_bytes(data[pos : pos + k], "big")
        pos += k
    if pos + n > end:
        raise _Corrupt
    return tag, pos, pos + n


def _items(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """The elements inside a constructed element's content."""
    out = []
    pos = start
    while pos < end:
        item = _tlv(data, pos, end)
        out.append(item)
        pos = item[2]
    return out


def _expect(item: tuple[int, int, int], tag: int) -> tuple[int, int, int]:
    if item[0] != tag:
        raise _Corrupt
    return item


def _oid(dotted: str) -> bytes:
    """The content bytes of an OBJECT IDENTIFIER, to compare with what a store holds."""
    parts = [int(p) for p in dotted.split(".")]
    out = bytearray([parts[0] * 40 + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.append(0x80 | (p & 0x7F))
            p >>= 7
        out += bytes(reversed(chunk))
    return bytes(out)


_OID_JKS_KEY_PROTECTOR = _oid("1.3.6.1.4.1.42.2.17.1.1")
_OID_DATA = _oid("1.2.840.113549.1.7.1")
_OID_ENCRYPTED_DATA = _oid("1.2.840.113549.1.7.6")
_OID_SHROUDED_KEY_BAG = _oid("1.2.840.113549.1.12.10.1.2")
_OID_CERT_BAG = _oid("1.2.840.113549.1.12.10.1.3")
_OID_X509_CERT = _oid("1.2.840.113549.1.9.22.1")
_OID_FRIENDLY_NAME = _oid("1.2.840.113549.1.9.20")
_OID_LOCAL_KEY_ID = _oid("1.2.840.113549.1.9.21")
_OID_TRUSTED_KEY_USAGE = _oid("2.16.840.1.113894.746875.1.1")
_OID_PBES2 = _oid("1.2.840.113549.1.5.13")
_OID_PBKDF2 = _oid("1.2.840.113549.1.5.12")
_PRF = {
    _oid(f"1.2.840.113549.2.{n}"): name
    for n, name in ((7, "sha1"), (8, "sha224"), (9, "sha256"), (10, "sha384"), (11, "sha512"))
}
_AES_CBC = {_oid(f"2.16.840.1.101.3.4.1.{n}"): size for n, size in ((2, 16), (22, 24), (42, 32))}


# --- JKS and JCEKS --------------------------------------------------------------------------------


class _JksEntry:
    """One entry of a JKS or JCEKS store (plain classes here: a dataclass costs import time)."""

    __slots__ = ("alias", "chain", "protected_key")

    def __init__(self, alias: str, protected_key: bytes | None, chain: list[bytes]) -> None:
        self.alias = alias
        self.protected_key = protected_key  # EncryptedPrivateKeyInfo DER of a private-key entry; None: trusted cert
        self.chain = chain  # DER, leaf first; the one certificate of a trusted-cert entry


def _read_jks(data: bytes, password: str | None, kind: str, location: str, props: _Props) -> list[_JksEntry]:
    """The entries of a JKS or JCEKS store, after Java's integrity check when a password is given.

    Layout (sun.security.provider.JavaKeyStore, com.sun.crypto.provider.JceKeyStore): magic, version,
    count, then per entry a tag (1 private key, 2 trusted certificate, 3 JCEKS secret key), the alias
    (writeUTF), an 8-byte date, and the key and/or certificates, each an int length and bytes, a
    certificate preceded by its type (writeUTF) in version 2; then SHA-1 over the password as UTF-16BE,
    b"Mighty Aphrodite" and every byte before the digest.
    """
    where = f"{props.location}={_one_line(location)}"
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
                raise _Corrupt
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
                    f"store with " + _JCEKS_CONVERT.format(f=_one_line(location))
                )
            else:
                raise _Corrupt
        if password is not None:
            digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + data[:pos]).digest()
            if data[pos : pos + 20] != digest:
                raise StoreError(
                    f"{where} ({kind}): Keystore was tampered with, or password was incorrect (Java's words): "
                    f"check {props.password}"
                )
    except (struct.error, _Corrupt):
        raise StoreError(
            f"{where} ({kind}): the store is truncated or corrupt, and Java cannot read it either: "
            f"copy it again or re-create it"
        ) from None
    return entries


def _jks_trusted(entries: list[_JksEntry]) -> list[bytes]:
    """Java's trust: every trusted-certificate entry and the leaf of every private-key entry."""
    return [e.chain[0] for e in entries if e.chain]


def _jks_recover(protected: bytes, password: str, where: str, alias: str) -> bytes:
    """The PKCS#8 PrivateKeyInfo DER that Sun's key protector (sun.security.provider.KeyProtector) guards.

    The EncryptedPrivateKeyInfo's data is salt(20) || encrypted key || check(20); the keystream is
    d1 = SHA1(pw + salt), d(i+1) = SHA1(pw + d(i)), pw the password as UTF-16BE; SHA1(pw + plain)
    must equal the check, else Java says "Cannot recover key".
    """
    try:
        _, start, end = _expect(_tlv(protected, 0, len(protected)), 0x30)
        algorithm, octets = _items(protected, start, end)[:2]
        _expect(algorithm, 0x30)
        oid = _expect(_tlv(protected, algorithm[1], algorithm[2]), 0x06)
        _expect(octets, 0x04)
    except ValueError:
        raise StoreError(f"{where} (JKS): key entry '{alias}' is corrupt: re-create the store") from None
    if protected[oid[1] : oid[2]] != _OID_JKS_KEY_PROTECTOR:
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
            f"{where} (JKS): Cannot recover key (Java's words) of entry '{alias}': check {_KEY_PASSWORD} "
            f"(Java uses {_KEY.password} when it is not set)"
        )
    return plain


# --- PKCS12 ---------------------------------------------------------------------------------------


def _looks_pkcs12(data: bytes) -> bool:
    """A PFX: a SEQUENCE whose first element is INTEGER 3 (BER's indefinite length too)."""
    if len(data) < 8 or data[0] != 0x30:
        return False
    n = data[1]
    pos = 2 if n < 0x80 else 2 + (n & 0x7F)
    return data[pos : pos + 3] == b"\x02\x01\x03"


class _Bag:
    """One bag of a PKCS12 store, with what Java reads of its attributes."""

    __slots__ = ("alias", "index", "key", "keys_so_far", "local_key_id", "trusted", "value")

    def __init__(
        self,
        key: bool,
        value: bytes,
        local_key_id: bytes | None,
        alias: str | None,
        trusted: bool,
        index: int,
        keys_so_far: int,
    ) -> None:
        self.key = key  # a PKCS#8 shrouded key bag (Java reads no other kind of key bag)
        self.value = value  # the certificate's DER, or the EncryptedPrivateKeyInfo DER
        self.local_key_id = local_key_id
        self.alias = alias
        self.trusted = trusted  # Oracle's trusted-key-usage attribute: keytool's mark of a trusted certificate
        self.index = index  # the bag's place in its SafeContents
        self.keys_so_far = keys_so_far  # Java's privateKeyCount when it reads this bag


class _Walk:
    """The bags of a PKCS12 store, and whether some of its safes stayed closed."""

    __slots__ = ("bags", "skipped", "unreadable")

    def __init__(self, bags: list[_Bag], *, skipped: bool, unreadable: bool) -> None:
        self.bags = bags
        self.skipped = skipped  # encrypted safes left closed: no password, as Java does
        self.unreadable = unreadable  # encrypted safes this walker cannot open (a cipher other than PBES2/AES)


def _octets(data: bytes, item: tuple[int, int, int]) -> bytes:
    """An OCTET STRING's bytes, primitive or constructed (BER), or an IMPLICIT one (tag [0])."""
    tag, start, end = item
    if tag in (0x04, 0x80):
        return data[start:end]
    if tag in (0x24, 0xA0):
        return b"".join(_octets(data, part) for part in _items(data, start, end))
    raise _Corrupt


def _p12_walk(data: bytes, password: str | None) -> _Walk:
    """Every bag of a PFX, with its attributes, opening what Java opens (sun.security.pkcs12.PKCS12KeyStore)."""
    _, start, end = _expect(_tlv(data, 0, len(data)), 0x30)
    parts = _items(data, start, end)
    _expect(parts[0], 0x02)
    _, cs, ce = _expect(parts[1], 0x30)
    content_type, content = _items(data, cs, ce)[:2]
    if data[content_type[1] : content_type[2]] != _OID_DATA:
        raise _Corrupt  # a public-key protected PFX: Java does not read those either
    _, inner_s, inner_e = _expect(content, 0xA0)
    safes = _octets(data, _tlv(data, inner_s, inner_e))
    walk = _Walk([], skipped=False, unreadable=False)
    keys = [0]
    _, ss, se = _expect(_tlv(safes, 0, len(safes)), 0x30)
    for _, s, e in _items(safes, ss, se):
        oid, body = _items(safes, s, e)[:2]
        kind = safes[oid[1] : oid[2]]
        _, bs, be = _expect(body, 0xA0)
        if kind == _OID_DATA:
            _p12_safe(_octets(safes, _tlv(safes, bs, be)), walk, keys)
        elif kind == _OID_ENCRYPTED_DATA:
            if password is None:
                walk.skipped = True
                continue
            plain = _p12_decrypt(safes, _tlv(safes, bs, be), password)
            if plain is None:
                walk.unreadable = True
                continue
            _p12_safe(plain, walk, keys)
        else:
            walk.unreadable = True
    return walk


def _p12_safe(safe: bytes, walk: _Walk, keys: list[int]) -> None:
    _, start, end = _expect(_tlv(safe, 0, len(safe)), 0x30)
    for index, (_, s, e) in enumerate(_items(safe, start, end)):
        parts = _items(safe, s, e)
        bag_id = safe[parts[0][1] : parts[0][2]]
        _, vs, ve = _expect(parts[1], 0xA0)
        alias = None
        local_key_id = None
        trusted = False
        if len(parts) > 2 and parts[2][0] == 0x31:
            for _, as_, ae in _items(safe, parts[2][1], parts[2][2]):
                attr_oid, values = _items(safe, as_, ae)[:2]
                attr = safe[attr_oid[1] : attr_oid[2]]
                first = _items(safe, values[1], values[2])
                if attr == _OID_FRIENDLY_NAME and first:
                    alias = safe[first[0][1] : first[0][2]].decode("utf-16-be", "replace")
                elif attr == _OID_LOCAL_KEY_ID and first:
                    local_key_id = safe[first[0][1] : first[0][2]]
                elif attr == _OID_TRUSTED_KEY_USAGE:
                    trusted = True
        if bag_id == _OID_SHROUDED_KEY_BAG:
            keys[0] += 1
            value = safe[vs:ve]
            walk.bags.append(_Bag(True, value, local_key_id, alias, False, index, keys[0]))
        elif bag_id == _OID_CERT_BAG:
            _, cs, ce = _expect(_tlv(safe, vs, ve), 0x30)
            cert_id, cert_value = _items(safe, cs, ce)[:2]
            if safe[cert_id[1] : cert_id[2]] != _OID_X509_CERT:
                continue
            _, xs, xe = _expect(cert_value, 0xA0)
            der = _octets(safe, _tlv(safe, xs, xe))
            walk.bags.append(_Bag(False, der, local_key_id, alias, trusted, index, keys[0]))


def _p12_decrypt(data: bytes, item: tuple[int, int, int], password: str) -> bytes | None:
    """An EncryptedData's SafeContents, for PBES2 (PBKDF2, AES-CBC) only; None for another cipher."""
    _, start, end = _expect(item, 0x30)
    _version, info = _items(data, start, end)[:2]
    _, is_, ie = _expect(info, 0x30)
    parts = _items(data, is_, ie)
    if len(parts) < 3:
        raise _Corrupt
    _, as_, ae = _expect(parts[1], 0x30)
    algorithm = _items(data, as_, ae)
    if data[algorithm[0][1] : algorithm[0][2]] != _OID_PBES2 or len(algorithm) < 2:
        return None
    kdf, scheme = _items(data, algorithm[1][1], algorithm[1][2])[:2]
    kdf_oid, kdf_params = _items(data, kdf[1], kdf[2])[:2]
    if data[kdf_oid[1] : kdf_oid[2]] != _OID_PBKDF2:
        return None
    fields = _items(data, kdf_params[1], kdf_params[2])
    salt = data[fields[0][1] : fields[0][2]]
    iterations = int.from_bytes(data[fields[1][1] : fields[1][2]], "big")
    prf = "sha1"
    for f in fields[2:]:
        if f[0] == 0x30:
            prf_oid = _tlv(data, f[1], f[2])
            prf = _PRF.get(data[prf_oid[1] : prf_oid[2]], "")
    scheme_oid, iv = _items(data, scheme[1], scheme[2])[:2]
    size = _AES_CBC.get(data[scheme_oid[1] : scheme_oid[2]])
    if not prf or size is None or iterations > 5_000_000:
        return None
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = hashlib.pbkdf2_hmac(prf, password.encode("utf-8"), salt, iterations, size)
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[iv[1] : iv[2]])).decryptor()
    plain = decryptor.update(_octets(data, parts[2])) + decryptor.finalize()
    pad = plain[-1] if plain else 0
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise _Corrupt
    return plain[:-pad]


def _p12_java_trusted(bags: list[_Bag]) -> list[bytes]:
    """What Java's PKCS12KeyStore makes of the bags, then what its TrustManager trusts (see the module doc).

    Entries are keyed by alias, a later one replacing an earlier one; a key without localKeyId is kept
    only when it is the only key so far ("01"), and then so is the first bag of a safe, a certificate.
    """
    entries: dict[str, tuple[str, _Bag, bytes | None]] = {}
    loose: list[tuple[_Bag, bytes | None]] = []  # certificates without the trusted attribute
    unnamed = 0
    for bag in bags:
        key_id = bag.local_key_id
        if bag.key:
            if key_id is None:
                if bag.keys_so_far != 1:
                    continue
                key_id = b"01"
        elif key_id is None and bag.keys_so_far == 1 and bag.index == 0:
            key_id = b"01"
        if bag.key or bag.trusted:
            alias = bag.alias
            if alias is None:
                unnamed += 1
                alias = f"\0unfriendly {unnamed}"
            entries[alias.lower()] = ("key" if bag.key else "cert", bag, key_id)
        else:
            loose.append((bag, key_id))
    trusted: list[bytes] = []
    for alias, (kind, bag, key_id) in entries.items():
        if kind == "cert":
            trusted.append(bag.value)
            continue
        by_id = by_alias = None
        for cert, cert_id in loose:
            if cert_id == key_id:
                by_id = cert  # Java keeps the last keyId match, and stops at one that has the alias too
                if cert.alias is not None and cert.alias.lower() == alias:
                    break
            elif cert.alias is not None and cert.alias.lower() == alias:
                by_alias = cert
        leaf = by_id or by_alias
        if leaf is not None:
            trusted.append(leaf.value)
    return trusted


def _load_pkcs12(data: bytes, password: str, where: str, props: _Props) -> PKCS12KeyAndCertificates:
    """The store as the cryptography package reads it: MAC checked with the password, all decrypted."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode("utf-8"))
    except ValueError:
        try:
            _p12_walk(data, None)
        except (ValueError, IndexError):
            raise StoreError(
                f"{where} (PKCS12): the store is truncated or corrupt, and Java cannot read it either: "
                f"copy it again or re-create it"
            ) from None
        raise StoreError(
            f"{where} (PKCS12): keystore password was incorrect (Java's words): check {props.password}"
        ) from None


def _pkcs12_trusted(data: bytes, password: str | None, where: str) -> list[bytes]:
    corrupt = StoreError(
        f"{where} (PKCS12): the store is truncated or corrupt, and Java cannot read it either: "
        f"copy it again or re-create it"
    )
    if password is None:
        try:
            walk = _p12_walk(data, None)
        except (ValueError, IndexError):
            raise corrupt from None
        trusted = _p12_java_trusted(walk.bags)
        if not trusted and walk.skipped:
            raise StoreError(
                f"{where} (PKCS12): its certificates are encrypted and {_TRUST.password} is not set, so Java "
                f"trusts none of them: set {_TRUST.password}"
            )
        return trusted
    loaded = _load_pkcs12(data, password, where, _TRUST)
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        walk = _p12_walk(data, password)
    except (ValueError, IndexError):
        walk = _Walk([], skipped=False, unreadable=True)
    if walk.unreadable:
        # An older cipher this walker does not open: trust every certificate cryptography read.
        certs = ([loaded.cert] if loaded.cert is not None else []) + list(loaded.additional_certs)
        return [c.certificate.public_bytes(Encoding.DER) for c in certs]
    return _p12_java_trusted(walk.bags)


def _pkcs12_pair(data: bytes, store_password: str, key_password: str, where: str) -> KeyPair:
    from cryptography.hazmat.primitives import serialization

    loaded = _load_pkcs12(data, store_password, where, _KEY)
    key = loaded.key
    if key is None:
        raise StoreError(
            f"{where} (PKCS12): no private key entry, only certificates (a truststore?): "
            f"point {_KEY.location} at the store with the client's key"
        )
    if loaded.cert is None:
        raise StoreError(f"{where} (PKCS12): the private key has no certificate: re-create the store with it")
    if key_password != store_password:
        # keytool and openssl write one password for both; a key under another one is opened with it here.
        try:
            walk = _p12_walk(data, store_password)
        except (ValueError, IndexError):
            walk = _Walk([], skipped=False, unreadable=True)
        shrouded = [b.value for b in walk.bags if b.key]
        if shrouded:
            try:
                key = serialization.load_der_private_key(shrouded[0], key_password.encode("utf-8"))
            except (ValueError, TypeError):
                raise StoreError(
                    f"{where} (PKCS12): Cannot recover key (Java: 'Given final block not properly padded'): "
                    f"{_KEY_PASSWORD} differs from {_KEY.password}, and the key has the store's password: "
                    f"remove {_KEY_PASSWORD} or set it to the store password"
                ) from None
    leaf = loaded.cert.certificate
    chain = [leaf, *_issuers(leaf, [c.certificate for c in loaded.additional_certs])]
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return KeyPair("".join(_cert_pem(c.public_bytes(serialization.Encoding.DER)) for c in chain), key_pem)


def _issuers(leaf: Certificate, pool: list[Certificate]) -> list[Certificate]:
    """The chain above leaf among the store's certificates, as Java's PKCS12KeyStore builds it (findIssuer).

    An issuer is a certificate whose subject is the issuer's name; with an authority key identifier, the
    one whose subject key identifier matches, else one without a subject key identifier. The chain ends
    at a self-signed certificate, a missing issuer, or a loop.
    """
    from cryptography import x509

    def authority_id(cert: Certificate) -> bytes | None:
        try:
            return cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
        except x509.ExtensionNotFound:
            return None

    def subject_id(cert: Certificate) -> bytes | None:
        try:
            return cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
        except x509.ExtensionNotFound:
            return None

    chain: list[Certificate] = []
    cert = leaf
    while cert.issuer != cert.subject:
        wanted = authority_id(cert)
        found: Certificate | None = None
        fallback: Certificate | None = None
        for other in pool:
            if other.subject != cert.issuer:
                continue
            if wanted is None:
                found = other
                break
            have = subject_id(other)
            if have == wanted:
                found = other
                break
            if have is None:
                fallback = other
        issuer = found or fallback
        if issuer is None or issuer in chain or issuer == leaf:
            break
        chain.append(issuer)
        cert = issuer
    return chain


# --- PEM ------------------------------------------------------------------------------------------

_PEM_BLOCK = r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----"  # compiled on first use (re caches it)


def _pem_blocks(text: str) -> list[tuple[str, bytes]]:
    """(label, DER) of each PEM block; header lines ("Proc-Type: ...") are dropped, as Kafka's parser does."""
    out = []
    for label, body in re.findall(_PEM_BLOCK, text, re.DOTALL):
        b64 = "".join(line.strip() for line in body.splitlines() if ":" not in line)
        try:
            out.append((label, base64.b64decode(b64, validate=True)))
        except ValueError:
            out.append((label, b""))
    return out


def _first_element(der: bytes) -> bytes:
    """The first DER element (an openssl TRUSTED CERTIFICATE block carries its trust settings after the cert)."""
    try:
        _, _, end = _tlv(der, 0, len(der))
    except _Corrupt:
        return der
    return der[:end]


def _pem_certificates(text: str) -> list[bytes]:
    return [_first_element(der) for label, der in _pem_blocks(text) if label.endswith("CERTIFICATE") and der]


def _pem_pair(chain_text: str, key_text: str, key_password: str | None, chain_where: str, key_where: str) -> KeyPair:
    """A PEM key and chain as Kafka's PemStore reads them: one PKCS#8 key, encrypted iff a key password is set."""
    keys = [(label, der) for label, der in _pem_blocks(key_text) if label.endswith("PRIVATE KEY")]
    certs = _pem_certificates(chain_text)
    if not keys:
        raise StoreError(f"{key_where} (PEM): no -----BEGIN PRIVATE KEY----- block: add the client's private key")
    if len(keys) > 1:
        raise StoreError(f"{key_where} (PEM): {len(keys)} private keys, and Kafka expects one: keep the client's")
    if not certs:
        raise StoreError(
            f"{chain_where} (PEM): no -----BEGIN CERTIFICATE----- block: add the client certificate and its chain"
        )
    label, der = keys[0]
    chain_pem = "".join(_cert_pem(d) for d in certs)
    if label == "PRIVATE KEY":
        if key_password is not None:
            raise StoreError(
                f"{key_where} (PEM): the key is not encrypted but {_KEY_PASSWORD} is set, and Kafka then fails to "
                f"read it: remove {_KEY_PASSWORD}"
            )
        return KeyPair(chain_pem, _pem("PRIVATE KEY", der))
    if label != "ENCRYPTED PRIVATE KEY":
        raise StoreError(
            f"{key_where} (PEM): a '{label}' block, and Kafka reads PKCS#8 keys only: convert it with "
            f"openssl pkcs8 -topk8 -in KEY -out key.pk8.pem (-nocrypt for no password)"
        )
    if key_password is None:
        raise StoreError(f"{key_where} (PEM): the key is encrypted and {_KEY_PASSWORD} is not set: set it")
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_der_private_key(der, key_password.encode("utf-8"))
    except (ValueError, TypeError):
        raise StoreError(
            f"{key_where} (PEM): the encrypted key does not open with {_KEY_PASSWORD}: check {_KEY_PASSWORD}"
        ) from None
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return KeyPair(chain_pem, key_pem)
