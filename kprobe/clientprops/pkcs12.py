"""PKCS12 stores: the bags Java reads, opened with the ``cryptography`` package.

PKCS12 goes through the ``cryptography`` package (imported inside the functions that need it, never at
module import, so that a JKS or PEM store never imports it): its ``load_pkcs12`` checks the store's MAC
(the password) and decrypts keys and certificates, whatever cipher wrote them. It does not show a bag's
attributes, though, and Java's trust depends on one, so a small walker here reads the bags' attributes,
opening the PBES2/AES safes that keytool (JDK 12 and later) and OpenSSL 3 write; for a store whose
certificates use an older cipher (RC2-40 of JDK 8's keytool) it falls back on trusting every certificate
in the store.

Java's trust in a PKCS12 store (``sun.security.pkcs12.PKCS12KeyStore``): a certificate bag is a
trusted-certificate entry only when it carries Oracle's trusted-key-usage attribute
(2.16.840.1.113894.746875.1.1), which keytool writes; a store made by ``openssl pkcs12 -export -nokeys``
has none (before OpenSSL 3.2's ``-jdktrust``), and Java trusts nothing in it. Of a private-key entry,
only its end-entity certificate is trusted. Without a password Java skips the encrypted safes, which in
a keytool store hold every certificate.
"""

from __future__ import annotations

import hashlib

from kprobe.clientprops.der import MAX_DEPTH, Corrupt, expect, items, oid, tlv
from kprobe.clientprops.pem import cert_pem
from kprobe.clientprops.stores import KEY, KEY_PASSWORD, TRUST, KeyPair, Props, StoreError

TYPE_CHECKING = False  # typing's own flag without importing typing: this module runs on the start-up path
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12KeyAndCertificates
    from cryptography.x509 import Certificate

__all__ = ["looks_pkcs12", "pkcs12_pair", "pkcs12_trusted"]

_OID_DATA = oid("1.2.840.113549.1.7.1")
_OID_ENCRYPTED_DATA = oid("1.2.840.113549.1.7.6")
_OID_SHROUDED_KEY_BAG = oid("1.2.840.113549.1.12.10.1.2")
_OID_CERT_BAG = oid("1.2.840.113549.1.12.10.1.3")
_OID_X509_CERT = oid("1.2.840.113549.1.9.22.1")
_OID_FRIENDLY_NAME = oid("1.2.840.113549.1.9.20")
_OID_LOCAL_KEY_ID = oid("1.2.840.113549.1.9.21")
_OID_TRUSTED_KEY_USAGE = oid("2.16.840.1.113894.746875.1.1")
_OID_PBES2 = oid("1.2.840.113549.1.5.13")
_OID_PBKDF2 = oid("1.2.840.113549.1.5.12")
_PRF = {
    oid(f"1.2.840.113549.2.{n}"): name
    for n, name in ((7, "sha1"), (8, "sha224"), (9, "sha256"), (10, "sha384"), (11, "sha512"))
}
_AES_CBC = {oid(f"2.16.840.1.101.3.4.1.{n}"): size for n, size in ((2, 16), (22, 24), (42, 32))}


def looks_pkcs12(data: bytes) -> bool:
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


def _octets(data: bytes, item: tuple[int, int, int], depth: int = 0) -> bytes:
    """An OCTET STRING's bytes, primitive or constructed (BER), or an IMPLICIT one (tag [0]).

    A constructed string holds strings, which may be constructed in turn: past MAX_DEPTH levels the store
    is corrupt, so that a file of nested headers ends in one line and not in a RecursionError.
    """
    tag, start, end = item
    if tag in (0x04, 0x80):
        return data[start:end]
    if tag in (0x24, 0xA0) and depth < MAX_DEPTH:
        return b"".join(_octets(data, part, depth + 1) for part in items(data, start, end))
    raise Corrupt


def _p12_walk(data: bytes, password: str | None) -> _Walk:
    """Every bag of a PFX, with its attributes, opening what Java opens (sun.security.pkcs12.PKCS12KeyStore)."""
    _, start, end = expect(tlv(data, 0, len(data)), 0x30)
    parts = items(data, start, end)
    expect(parts[0], 0x02)
    _, cs, ce = expect(parts[1], 0x30)
    content_type, content = items(data, cs, ce)[:2]
    if data[content_type[1] : content_type[2]] != _OID_DATA:
        raise Corrupt  # a public-key protected PFX: Java does not read those either
    _, inner_s, inner_e = expect(content, 0xA0)
    safes = _octets(data, tlv(data, inner_s, inner_e))
    walk = _Walk([], skipped=False, unreadable=False)
    keys = [0]
    _, ss, se = expect(tlv(safes, 0, len(safes)), 0x30)
    for _, s, e in items(safes, ss, se):
        content_oid, body = items(safes, s, e)[:2]
        kind = safes[content_oid[1] : content_oid[2]]
        _, bs, be = expect(body, 0xA0)
        if kind == _OID_DATA:
            _p12_safe(_octets(safes, tlv(safes, bs, be)), walk, keys)
        elif kind == _OID_ENCRYPTED_DATA:
            if password is None:
                walk.skipped = True
                continue
            plain = _p12_decrypt(safes, tlv(safes, bs, be), password)
            if plain is None:
                walk.unreadable = True
                continue
            _p12_safe(plain, walk, keys)
        else:
            walk.unreadable = True
    return walk


def _p12_safe(safe: bytes, walk: _Walk, keys: list[int]) -> None:
    _, start, end = expect(tlv(safe, 0, len(safe)), 0x30)
    for index, (_, s, e) in enumerate(items(safe, start, end)):
        parts = items(safe, s, e)
        bag_id = safe[parts[0][1] : parts[0][2]]
        _, vs, ve = expect(parts[1], 0xA0)
        alias = None
        local_key_id = None
        trusted = False
        if len(parts) > 2 and parts[2][0] == 0x31:
            for _, as_, ae in items(safe, parts[2][1], parts[2][2]):
                attr_oid, values = items(safe, as_, ae)[:2]
                attr = safe[attr_oid[1] : attr_oid[2]]
                first = items(safe, values[1], values[2])
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
            _, cs, ce = expect(tlv(safe, vs, ve), 0x30)
            cert_id, cert_value = items(safe, cs, ce)[:2]
            if safe[cert_id[1] : cert_id[2]] != _OID_X509_CERT:
                continue
            _, xs, xe = expect(cert_value, 0xA0)
            der = _octets(safe, tlv(safe, xs, xe))
            walk.bags.append(_Bag(False, der, local_key_id, alias, trusted, index, keys[0]))


def _p12_decrypt(data: bytes, item: tuple[int, int, int], password: str) -> bytes | None:
    """An EncryptedData's SafeContents, for PBES2 (PBKDF2, AES-CBC) only; None for another cipher."""
    _, start, end = expect(item, 0x30)
    _version, info = items(data, start, end)[:2]
    _, is_, ie = expect(info, 0x30)
    parts = items(data, is_, ie)
    if len(parts) < 3:
        raise Corrupt
    _, as_, ae = expect(parts[1], 0x30)
    algorithm = items(data, as_, ae)
    if data[algorithm[0][1] : algorithm[0][2]] != _OID_PBES2 or len(algorithm) < 2:
        return None
    kdf, scheme = items(data, algorithm[1][1], algorithm[1][2])[:2]
    kdf_oid, kdf_params = items(data, kdf[1], kdf[2])[:2]
    if data[kdf_oid[1] : kdf_oid[2]] != _OID_PBKDF2:
        return None
    fields = items(data, kdf_params[1], kdf_params[2])
    salt = data[fields[0][1] : fields[0][2]]
    iterations = int.from_bytes(data[fields[1][1] : fields[1][2]], "big")
    prf = "sha1"
    for f in fields[2:]:
        if f[0] == 0x30:
            prf_oid = tlv(data, f[1], f[2])
            prf = _PRF.get(data[prf_oid[1] : prf_oid[2]], "")
    scheme_oid, iv = items(data, scheme[1], scheme[2])[:2]
    size = _AES_CBC.get(data[scheme_oid[1] : scheme_oid[2]])
    if not prf or size is None or iterations > 5_000_000:
        return None
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = hashlib.pbkdf2_hmac(prf, password.encode("utf-8"), salt, iterations, size)
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[iv[1] : iv[2]])).decryptor()
    plain = decryptor.update(_octets(data, parts[2])) + decryptor.finalize()
    pad = plain[-1] if plain else 0
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise Corrupt
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
    # A key's leaf as Java finds it among the loose certificates: of those with the key's localKeyId, the
    # first that also has its alias, else the last; else the last with its alias. Looked up, not scanned
    # for each key: keys x certificates is seconds for a hostile 1 MiB store.
    by_id_and_alias: dict[tuple[bytes, str], _Bag] = {}
    by_id: dict[bytes, _Bag] = {}
    by_alias: dict[str, _Bag] = {}
    for cert, cert_id in loose:
        name = cert.alias.lower() if cert.alias is not None else None
        if cert_id is not None:
            by_id[cert_id] = cert
            if name is not None:
                by_id_and_alias.setdefault((cert_id, name), cert)
        if name is not None:
            by_alias[name] = cert
    trusted: list[bytes] = []
    for alias, (kind, bag, key_id) in entries.items():
        if kind == "cert":
            trusted.append(bag.value)
            continue
        assert key_id is not None  # a key without localKeyId has "01" (above)
        leaf = by_id_and_alias.get((key_id, alias)) or by_id.get(key_id) or by_alias.get(alias)
        if leaf is not None:
            trusted.append(leaf.value)
    return trusted


def _load_pkcs12(data: bytes, password: str, where: str, props: Props) -> PKCS12KeyAndCertificates:
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


def pkcs12_trusted(data: bytes, password: str | None, where: str) -> list[bytes]:
    """The DER of every certificate Java trusts in a PKCS12 truststore (see the module doc)."""
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
                f"{where} (PKCS12): its certificates are encrypted and {TRUST.password} is not set, so Java "
                f"trusts none of them: set {TRUST.password}"
            )
        return trusted
    loaded = _load_pkcs12(data, password, where, TRUST)
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


def pkcs12_pair(data: bytes, store_password: str, key_password: str, where: str) -> KeyPair:
    """The first key of a PKCS12 keystore and its chain as Java builds it, as PEM text."""
    from cryptography.hazmat.primitives import serialization

    loaded = _load_pkcs12(data, store_password, where, KEY)
    key = loaded.key
    if key is None:
        raise StoreError(
            f"{where} (PKCS12): no private key entry, only certificates (a truststore?): "
            f"point {KEY.location} at the store with the client's key"
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
                    f"{KEY_PASSWORD} differs from {KEY.password}, and the key has the store's password: "
                    f"remove {KEY_PASSWORD} or set it to the store password"
                ) from None
    leaf = loaded.cert.certificate
    chain = [leaf, *_issuers(leaf, [c.certificate for c in loaded.additional_certs])]
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return KeyPair("".join(cert_pem(c.public_bytes(serialization.Encoding.DER)) for c in chain), key_pem)


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
