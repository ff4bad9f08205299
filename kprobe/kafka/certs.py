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

from kprobe.kafka.security import Security
from kprobe.kafka.tlscontext import TlsSettingsError, client_context
from kprobe.models import TlsFailure
from kprobe.net.sockets import family_of

# OpenSSL's X509_V_ERR_* codes that name the failure in the user's terms; any other is a chain problem.
_VERIFY_FAILURES: dict[int, TlsFailure] = {10: "expired", 62: "hostname_mismatch", 64: "hostname_mismatch"}


def verify_failure(code: int) -> TlsFailure:
    """What a refused certificate's verify code means for the user: the name, the date, or the chain."""
    return _VERIFY_FAILURES.get(code, "untrusted")


def hostname_matches(host: str, sans: Sequence[str], common_name: str | None = None) -> bool:
    """Whether a client that checks the name accepts a certificate for `host`, as Java and OpenSSL decide.

    `sans` are the certificate's typed subjectAltName entries (`DNS:name`, `IP:address`, from
    `cert_sans`). The type decides, not the text: an IP host matches only `IP:` entries, never a
    `DNS:` entry or a subject CN that spells the same address (Java's HostnameChecker.matchIP,
    OpenSSL's X509_check_ip_asc; librdkafka 2.16 refuses such a certificate with `certificate
    verify failed`, measured). A name matches `DNS:` entries, a wildcard covering exactly one
    left-most label (RFC 6125), and the subject CN only when the certificate has no `DNS:` entry
    at all (both Java and OpenSSL fall back to it then).
    """
    host = host.lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    typed = [san.partition(":")[::2] for san in sans]
    if ip is not None:
        return any(kind == "IP" and _same_ip(value, ip) for kind, value in typed)
    dns = [value for kind, value in typed if kind == "DNS"]
    if not dns and common_name:
        dns = [common_name]
    for name in dns:
        name = name.lower().rstrip(".")
        if name == host:
            return True
        if name.startswith("*.") and "." in host:
            label, _, rest = host.partition(".")
            if label and rest == name[2:]:
                return True
    return False


def _same_ip(text: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(text.strip().strip("[]")) == ip
    except ValueError:
        return False


def cert_sans(cert: dict[str, Any]) -> tuple[str, ...]:
    """The certificate's subjectAltName DNS and IP entries with their type, as OpenSSL prints them.

    `DNS:broker.example`, `IP:10.0.0.5`: the type is what a client matches on (see
    `hostname_matches`), and a `DNS:10.0.0.5` that looks like an address is the mistake a flat list
    of names hides. IP entries are written in their canonical form (the ssl module spells IPv6
    ones out in full).
    """
    out = []
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "DNS":
            out.append(f"DNS:{value}")
        elif kind == "IP Address":
            try:
                out.append(f"IP:{ipaddress.ip_address(str(value).strip())}")
            except ValueError:
                out.append(f"IP:{str(value).strip()}")
    return tuple(out)


def cert_names(cert: dict[str, Any]) -> tuple[str, ...]:
    """The names a client matches, without their type, for messages.

    The subjectAltName DNS and IP entries, else the subject CN.
    """
    names = [san.partition(":")[2] for san in cert_sans(cert)]
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


def unverified_cert(address: str, port: int, sni: str | None, timeout: float,
                    security: Security | None = None) -> dict[str, Any]:
    """The certificate at address:port read without judging it, only to name it in a message.

    The client certificate of `security` is sent: a listener that requires one ends a TLS 1.2
    handshake without it, before its own certificate could be read.
    """
    try:
        loose = client_context(security or Security(), verify=False)
    except TlsSettingsError:
        return {}
    try:
        with handshake(address, port, sni, loose, timeout) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return {}
    return _decode_der(der) if der else {}


def describe_peer(address: str, port: int, sni: str | None, timeout: float,
                  security: Security | None = None) -> str | None:
    """`subject S, names a, b, issuer I` of the certificate a verification refused, if readable.

    A refused certificate is where the user most needs its names (which host it was issued for,
    by whom), and the ssl module gives none of them for a certificate that did not verify.
    """
    cert = unverified_cert(address, port, sni, timeout, security)
    if not cert:
        return None
    return (f"certificate subject {cert_subject(cert, 'subject')}, names {', '.join(cert_names(cert)) or 'none'}, "
            f"issuer {cert_subject(cert, 'issuer')}")
