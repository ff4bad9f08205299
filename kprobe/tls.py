"""TLS at each advertised endpoint, judged against the name the broker *advertises*.

The classic mistake: the certificate names the external host, the listener advertises the
internal one. Clients verify the advertised name (librdkafka's
`ssl.endpoint.identification.algorithm=https` is the default), so bootstrap works and every
later connection fails the handshake. kprobe verifies the chain and the name separately, so it
can say which of the two is wrong, with the certificate's names in the message.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kprobe.models import EndpointResult, TlsResult
from kprobe.pool import run_bounded
from kprobe.resolve import is_ip_literal
from kprobe.wire import Security

EXPIRY_DAYS = 30.0


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


def _names(cert: dict[str, Any]) -> tuple[str, ...]:
    names = [value for kind, value in cert.get("subjectAltName", ()) if kind in ("DNS", "IP Address")]
    if not names:  # no SAN: clients fall back to the subject CN (and modern ones refuse)
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    names.append(value)
    return tuple(names)


def _subject(cert: dict[str, Any], field: str) -> str | None:
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


def _handshake(address: str, port: int, sni: str | None, ctx: ssl.SSLContext, timeout: float) -> ssl.SSLSocket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    raw = socket.socket(family, socket.SOCK_STREAM)
    raw.settimeout(timeout)
    try:
        raw.connect((address, port))
        return ctx.wrap_socket(raw, server_hostname=sni)
    except BaseException:
        raw.close()
        raise


def _unverified_cert(address: str, port: int, sni: str | None, timeout: float) -> dict[str, Any]:
    """The certificate at address:port read without judging it, only to name it in a message."""
    loose = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    loose.check_hostname = False
    loose.verify_mode = ssl.CERT_NONE
    try:
        with _handshake(address, port, sni, loose, timeout) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return {}
    return _decode_der(der) if der else {}


def describe_peer(address: str, port: int, sni: str | None, timeout: float) -> str | None:
    """`subject S, names a, b, issuer I` of the certificate a verification refused, if readable.

    A refused certificate is where the user most needs its names (which host it was issued for,
    by whom), and the ssl module gives none of them for a certificate that did not verify.
    """
    cert = _unverified_cert(address, port, sni, timeout)
    if not cert:
        return None
    return (f"certificate subject {_subject(cert, 'subject')}, names {', '.join(_names(cert)) or 'none'}, "
            f"issuer {_subject(cert, 'issuer')}")


def check_tls(
    result: EndpointResult, props: Mapping[str, str], *, timeout: float, expiry_days: float = EXPIRY_DAYS
) -> TlsResult:
    """One handshake (two when the chain does not verify: the second only reads the names).

    The chain and the advertised name are always checked, whatever the client's settings, since
    other clients keep librdkafka's defaults; the result records whether *these* settings
    (`enable.ssl.certificate.verification`, `ssl.endpoint.identification.algorithm`) would let
    this client through anyway, so the finding can say who fails.
    """
    from kprobe.config import security_from

    ok = [t for t in result.tcp if t.status == "ok"]
    if not ok:
        return TlsResult("not_checked", "", error="no address accepts connections")
    security = security_from(props)
    checked = _check(result, ok[0].address, props, security, timeout, expiry_days)
    return replace(checked, client_verifies_chain=security.ssl_verify,
                   client_verifies_name=security.ssl_verify_hostname)


def _check(
    result: EndpointResult, address: str, props: Mapping[str, str], security: Security, timeout: float,
    expiry_days: float,
) -> TlsResult:
    """The handshake and its verdict, whatever the client's own settings would let through."""
    host = result.endpoint.host
    sni = None if is_ip_literal(host) else host
    cafile = props.get("ssl.ca.location")
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        return TlsResult("handshake_failed", address, error=f"cannot load ssl.ca.location {cafile}: {exc}")
    ctx.check_hostname = False  # checked below against the advertised name, to tell the cases apart
    if security.ssl_certfile:  # a listener with ssl.client.auth=required wants the client's certificate
        try:
            ctx.load_cert_chain(security.ssl_certfile, security.ssl_keyfile, password=security.ssl_key_password)
        except (OSError, ssl.SSLError) as exc:  # the message names files, never the key password
            return TlsResult("handshake_failed", address, error=f"cannot load the client certificate "
                             f"{security.ssl_certfile}: {exc.__class__.__name__}")
    try:
        with _handshake(address, result.endpoint.port, sni, ctx, timeout) as tls:
            cert: dict[str, Any] = dict(tls.getpeercert() or {})
        trusted = True
        error = None
    except ssl.SSLCertVerificationError as exc:
        trusted = False
        error = exc.verify_message or str(exc)
        cert = _unverified_cert(address, result.endpoint.port, sni, timeout)
    except (ssl.SSLError, OSError) as exc:
        reason = "timed out" if isinstance(exc, (TimeoutError, socket.timeout)) else str(exc)
        return TlsResult("handshake_failed", address, error=f"TLS handshake with {address}:{result.endpoint.port} "
                         f"failed: {reason}")
    names = _names(cert)
    not_after = str(cert["notAfter"]) if cert.get("notAfter") else None
    days_left = None
    if not_after:
        days_left = round((ssl.cert_time_to_seconds(not_after) - time.time()) / 86400, 1)
    hostname_ok = hostname_matches(host, names) if names else None
    if not trusted:
        status = "untrusted"
    elif hostname_ok is False:
        status = "hostname_mismatch"
    elif days_left is not None and days_left < expiry_days:
        status = "expiring"
    else:
        status = "ok"
    return TlsResult(status, address, _subject(cert, "subject"), names, _subject(cert, "issuer"),
                     not_after, days_left, trusted, hostname_ok, error)


def check_all(
    results: Sequence[EndpointResult], props: Mapping[str, str], *, timeout: float, deadline: float,
    expiry_days: float = EXPIRY_DAYS,
) -> list[EndpointResult]:
    """TLS for every endpoint that connects, concurrently, within the deadline."""
    chosen = [i for i, r in enumerate(results) if any(t.status == "ok" for t in r.tcp)]

    def work(index: int) -> TlsResult:
        wait = max(0.1, min(timeout, deadline - time.monotonic()))
        return check_tls(results[index], props, timeout=wait, expiry_days=expiry_days)

    done = run_bounded(chosen, work, workers=256, deadline=deadline)  # all at once: one timeout, not one per round
    found = {chosen[i]: tls for i, tls in done.items()}
    return [replace(r, tls=found[i]) if i in found else r for i, r in enumerate(results)]
