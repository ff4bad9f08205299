"""The trust and key stores a Java client's properties name, read into PEM text in memory.

Users hand kprobe the ``client.properties`` that Confluent Cloud, Amazon MSK and Aiven give out. It names
``ssl.truststore.*`` and, for mutual TLS, ``ssl.keystore.*`` / ``ssl.key.password``: JKS (Kafka's default
type), PKCS12, JCEKS or PEM. kprobe's own TLS client is Python's ``ssl`` module
(``SSLContext.load_verify_locations(cadata=...)``) and its round trip goes through librdkafka (``ssl.ca.pem``,
``ssl.certificate.pem``, ``ssl.key.pem``): both take PEM text, so every store becomes PEM text here, held in
memory only (an unencrypted private key is never written to disk by this module or the readers it uses).

This module is the public API, the checks of Kafka's and Java's rules on the properties, and the dispatch
by the store's content to one reader per format: :mod:`kprobe.clientprops.jks` (JKS and JCEKS),
:mod:`kprobe.clientprops.pkcs12`, :mod:`kprobe.clientprops.pem`, on the DER of
:mod:`kprobe.clientprops.der`; :class:`StoreError` and :class:`KeyPair` live in
:mod:`kprobe.clientprops.stores` and are re-exported here.

Why a JKS reader of our own, and not PyPI's pyjks: pyjks (20.0.0, last release 2020) takes longer to
import than reading a Java properties file with a JKS truststore should take in all, and needs a C compiler
for its ``twofish`` dependency. The JKS format is small
(magic 0xFEEDFEED, version 1 or 2, entries, then a keyed SHA-1 over the whole) and so is Sun's key
protector (a SHA-1 keystream XOR, checked by a SHA-1 digest), so both are written against the format in
:mod:`kprobe.clientprops.jks`, with the standard library only: reading a JKS truststore imports nothing
else. PKCS12 goes through the ``cryptography`` package, imported only when a PKCS12 store (or an
encrypted PEM key) is read (:mod:`kprobe.clientprops.pkcs12`).

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

from kprobe.clientprops.jks import JCEKS_CONVERT, jks_recover, jks_trusted, read_jks
from kprobe.clientprops.pem import cert_pem, pem, pem_certificates, pem_pair
from kprobe.clientprops.pkcs12 import looks_pkcs12, pkcs12_pair, pkcs12_trusted
from kprobe.clientprops.stores import KEY, TRUST, KeyPair, Props, StoreError, one_line

__all__ = ["KeyPair", "StoreError", "keystore_pair", "truststore_pem"]


# --- the properties a message names (those the format readers cite too are in stores.py) ----------

MAX_STORE_BYTES = 16 * 1024 * 1024  # far above any real store (a JDK cacerts is about 200 KB), far below harm
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
    declared = _declared_type(store_type, TRUST)
    if certificates is not None:
        if location is not None:
            raise StoreError(
                f"both {TRUST.location} and {_TRUST_CERTS} are set, and Kafka refuses that: keep one of them"
            )
        if declared != "PEM":
            raise StoreError(f"{_TRUST_CERTS} is set but {_type_said(store_type, TRUST)}: set {TRUST.type}=PEM")
        if password is not None:
            raise StoreError(f"{TRUST.password} is set with PEM certificates, and Kafka refuses that: remove it")
        ders = pem_certificates(certificates)
        if not ders:
            raise StoreError(f"{_TRUST_CERTS}: no -----BEGIN CERTIFICATE----- block: paste the CA certificate(s)")
        return "".join(cert_pem(d) for d in _unique(ders))
    if location is None:
        raise StoreError(
            f"neither {TRUST.location} nor {_TRUST_CERTS} is set: Java then trusts its JVM's default cacerts"
        )
    data, content, where = _open_store(location, declared, store_type, TRUST)
    if content == "PEM":
        if password is not None:
            raise StoreError(f"{TRUST.password} is set with a PEM truststore, and Kafka refuses that: remove it")
        ders = pem_certificates(data.decode("utf-8", "replace"))
    elif content in ("JKS", "JCEKS"):
        ders = jks_trusted(read_jks(data, password, content, location, TRUST))
    else:
        ders = pkcs12_trusted(data, password, where)
    if not ders:
        raise StoreError(
            f"{where} ({content}): no trusted certificate in the store, so Java fails with "
            f'"the trustAnchors parameter must be non-empty": import the CA with keytool -importcert'
            + (" (keytool marks it trusted; openssl pkcs12 -export does not)" if content == "PKCS12" else "")
        )
    return "".join(cert_pem(d) for d in _unique(ders))


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
    declared = _declared_type(store_type, KEY)
    if key is not None or chain is not None:
        if key is None or chain is None:
            missing = _KEY_KEY if key is None else _KEY_CHAIN
            raise StoreError(f"{missing} is not set but the other of {_KEY_KEY}/{_KEY_CHAIN} is: Kafka needs both")
        if location is not None:
            raise StoreError(f"both {KEY.location} and {_KEY_KEY} are set, and Kafka refuses that: keep one of them")
        if declared != "PEM":
            raise StoreError(f"{_KEY_KEY} is set but {_type_said(store_type, KEY)}: set {KEY.type}=PEM")
        if store_password is not None:
            raise StoreError(f"{KEY.password} is set with a PEM key, and Kafka refuses that: remove it")
        return pem_pair(chain, key, key_password, _KEY_CHAIN, _KEY_KEY)
    if location is None:
        raise StoreError(f"neither {KEY.location} nor {_KEY_KEY} is set: no client certificate for mutual TLS")
    data, content, where = _open_store(location, declared, store_type, KEY)
    if content == "PEM":
        if store_password is not None:
            raise StoreError(f"{KEY.password} is set with a PEM keystore, and Kafka refuses that: remove it")
        text = data.decode("utf-8", "replace")
        return pem_pair(text, text, key_password, where, where)
    if store_password is None:
        raise StoreError(f"{where} ({content}): {KEY.password} is not set, and Kafka needs it: set it")
    key_pw = key_password if key_password is not None else store_password
    if content == "PKCS12":
        return pkcs12_pair(data, store_password, key_pw, where)
    entries = read_jks(data, store_password, content, location, KEY)
    keys = sorted((e for e in entries if e.protected_key is not None), key=lambda e: e.alias)
    if not keys:
        raise StoreError(
            f"{where} ({content}): no private key entry, only trusted certificates (a truststore?): "
            f"point {KEY.location} at the store with the client's key"
        )
    entry = keys[0]
    if content == "JCEKS":
        raise StoreError(
            f"{where} (JCEKS): JCEKS private keys are not read; convert the store with "
            + JCEKS_CONVERT.format(f=one_line(location))
        )
    plain = jks_recover(entry.protected_key or b"", key_pw, where, entry.alias)
    if not entry.chain:
        raise StoreError(f"{where} (JKS): key entry '{entry.alias}' has no certificate: re-import its certificate")
    return KeyPair("".join(cert_pem(d) for d in entry.chain), pem("PRIVATE KEY", plain))


# --- files, types, messages -----------------------------------------------------------------------


def _declared_type(store_type: str | None, props: Props) -> str:
    declared = (store_type or "JKS").strip().upper()
    if declared not in _OPENS:
        raise StoreError(
            f"{props.type}={one_line(store_type or '')}: kprobe reads JKS, PKCS12, JCEKS and PEM stores: "
            f"convert the store to PKCS12 with keytool -importkeystore"
        )
    return declared


def _type_said(store_type: str | None, props: Props) -> str:
    if store_type is None:
        return f"{props.type} is not set (Kafka's default: JKS)"
    return f"{props.type} is {one_line(store_type)}"


def _open_store(location: str, declared: str, store_type: str | None, props: Props) -> tuple[bytes, str, str]:
    """A store's bytes, the format they are (by content), and how messages name it; refused where Java
    would not open that content under the declared type. The same for trust and key stores.
    """
    data = _read(location, props)
    content = _content_type(data, location, props)
    where = f"{props.location}={one_line(location)}"
    _check_opens(declared, store_type, content, where, props)
    return data, content, where


def _check_opens(declared: str, store_type: str | None, content: str, where: str, props: Props) -> None:
    if content not in _OPENS[declared]:
        raise StoreError(
            f"{where}: a {content} store, but {_type_said(store_type, props)} and Java's {declared} type "
            f"does not open {content} files: set {props.type}={content}"
        )


def _read(location: str, props: Props) -> bytes:
    """The store's bytes, at most MAX_STORE_BYTES (a JDK's whole cacerts is about 200 KB): never a device's endless
    stream read into memory.
    """
    try:
        with open(location, "rb") as f:
            data = f.read(MAX_STORE_BYTES + 1)
        if len(data) > MAX_STORE_BYTES:
            raise StoreError(f"{props.location}={one_line(location)}: more than {MAX_STORE_BYTES // (1024 * 1024)} "
                             f"MiB, too big for a key store: fix {props.location}")
        return data
    except FileNotFoundError:
        raise StoreError(f"{props.location}={one_line(location)}: no such file: fix {props.location}") from None
    except OSError as e:
        why = e.strerror or type(e).__name__
        where = f"{props.location}={one_line(location)}"
        raise StoreError(f"{where}: cannot read it ({why}): fix {props.location}") from None


def _content_type(data: bytes, location: str, props: Props) -> str:
    """The store's kind by its content: magic bytes, a PFX's version 3, or PEM armour."""
    head = data[:4]
    if head == b"\xfe\xed\xfe\xed":
        return "JKS"
    if head == b"\xce\xce\xce\xce":
        return "JCEKS"
    if looks_pkcs12(data):
        return "PKCS12"
    if b"-----BEGIN" in data:
        return "PEM"
    raise StoreError(
        f"{props.location}={one_line(location)}: not a key store (neither JKS, JCEKS, PKCS12 nor PEM by its "
        f"content): point {props.location} at the store"
    )


def _unique(ders: list[bytes]) -> list[bytes]:
    return list(dict.fromkeys(ders))
