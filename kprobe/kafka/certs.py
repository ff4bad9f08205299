"""What a broker's certificate says, read with or without trusting it.

Shared by the Kafka connection (a refused bootstrap certificate is named in its error) and the
TLS step (every advertised endpoint's certificate judged against its advertised name); a leaf,
so neither has to import the other.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Sequence
from typing import Any

from kprobe.models import TlsFailure
from kprobe.sockets import family_of

# OpenSSL's X509_V_ERR_* codes that name the failure in the user's terms; any other is a chain problem.
_VERIFY_FAILURES: dict[int, TlsFailure] = {10: "expired", 62: "hostname_mismatch", 64: "hostname_mismatch"}


def verify_failure(code: int) -> TlsFailure:
    """What a refused certificate's verify code means for the user: the name, the date, or the chain."""
    return _VERIFY_FAILURES.get(code, "untrusted")


def hostname_matches(host: str, names: Sequence[str]) -> bool:
    """RFC 6125 matching of a host against certificate names (DNS and IP SANs).

    A wildcard matches exactly one left-most label; IP literals match only IP entries.
    """
    host = host.lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    for name in names:
        name = name.lower().rstrip(".")
        if ip is not None:
            try:
                if ipaddress.ip_address(name) == ip:
                    return True
            except ValueError:
                continue
            continue
        if name == host:
            return True
        if name.startswith("*.") and "." in host:
            label, _, rest = host.partition(".")
            if label and rest == name[2:]:
                return True
    return False


def cert_names(cert: dict[str, Any]) -> tuple[str, ...]:
    """The names a client matches: subjectAltName DNS and IP entries, else the subject CN."""
    names = [value for kind, value in cert.get("subjectAltName", ()) if kind in ("DNS", "IP Address")]
    if not names:  # no SAN: clients fall back to the subject CN (and modern ones refuse)
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    names.append(value)
    return tuple(names)


def cert_subject(cert: dict[str, Any], field: str) -> str | None:
    """The common name of a certificate's `subject` or `issuer`."""
    for rdn in cert.get(field, ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _decode_der(der: bytes) -> dict[str, Any]:
    """Parse a certificate that did not verify, to name it in the finding.

    The ssl module only parses verified certificates; CPython's own test helper decodes a PEM
    file. If it is missing, the finding simply carries no names.
    """
    decoder = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decoder is None:
        return {}
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(ssl.DER_cert_to_PEM_cert(der))
        decoded: dict[str, Any] = decoder(path)
        return decoded
    except (OSError, ValueError, ssl.SSLError):
        return {}
    finally:
        os.unlink(path)


def handshake(address: str, port: int, sni: str | None, ctx: ssl.SSLContext, timeout: float) -> ssl.SSLSocket:
    """Connect and complete a TLS handshake, bounded by `timeout`; the socket is closed on failure."""
    raw = socket.socket(family_of(address), socket.SOCK_STREAM)
    raw.settimeout(timeout)
    try:
        raw.connect((address, port))
        return ctx.wrap_socket(raw, server_hostname=sni)
    except BaseException:
        raw.close()
        raise


def unverified_cert(address: str, port: int, sni: str | None, timeout: float) -> dict[str, Any]:
    """The certificate at address:port read without judging it, only to name it in a message."""
    loose = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    loose.check_hostname = False
    loose.verify_mode = ssl.CERT_NONE
    try:
        with handshake(address, port, sni, loose, timeout) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return {}
    return _decode_der(der) if der else {}


def describe_peer(address: str, port: int, sni: str | None, timeout: float) -> str | None:
    """`subject S, names a, b, issuer I` of the certificate a verification refused, if readable.

    A refused certificate is where the user most needs its names (which host it was issued for,
    by whom), and the ssl module gives none of them for a certificate that did not verify.
    """
    cert = unverified_cert(address, port, sni, timeout)
    if not cert:
        return None
    return (f"certificate subject {cert_subject(cert, 'subject')}, names {', '.join(cert_names(cert)) or 'none'}, "
            f"issuer {cert_subject(cert, 'issuer')}")
