"""TLS at each advertised endpoint, judged against the name the broker *advertises*.

The classic mistake: the certificate names the external host, the listener advertises the
internal one. Clients verify the advertised name (librdkafka's
`ssl.endpoint.identification.algorithm=https` is the default), so bootstrap works and every
later connection fails the handshake. kprobe verifies the chain and the name separately, so it
can say which of the two is wrong, with the certificate's names in the message.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Sequence
from typing import Any

from kprobe.hostport import is_ip_literal
from kprobe.kafka.certs import cert_names, cert_sans, cert_subject, handshake, hostname_matches, unverified_cert
from kprobe.kafka.security import Security
from kprobe.kafka.tlscontext import TlsSettingsError, client_context
from kprobe.models import EndpointResult, TlsResult, TlsStatus
from kprobe.probe.context import RunContext
from kprobe.probe.pool import run_bounded
from kprobe.records import replace

DEADLINE_CUT = "not checked before the run's deadline"


def _cut(address: str) -> TlsResult:
    """A check the run's deadline ended: nothing is known of the certificate (RUN_INCOMPLETE)."""
    return TlsResult(status="not_checked", address=address, error=DEADLINE_CUT, unfinished=True)


def _first_open(result: EndpointResult) -> str | None:
    """The address a check handshakes with: the first that accepted a connection."""
    return next((t.address for t in result.tcp if t.status == "ok"), None)


def check_tls(
    result: EndpointResult, security: Security, *, timeout: float, expiry_days: float,
    deadline_cut: bool = False,
) -> TlsResult:
    """One handshake (two when the chain does not verify: the second only reads the names).

    The chain and the advertised name are always checked, whatever the client's settings, since
    other clients keep librdkafka's defaults; the result records whether *these* settings
    (`enable.ssl.certificate.verification`, `ssl.endpoint.identification.algorithm`) would let
    this client through anyway, so the finding can say who fails.

    `deadline_cut`: `timeout` is what was left of the run, shorter than the per-call timeout, so
    running out of it says nothing about the endpoint: the check is then unfinished, exactly as
    if the deadline had come before it ended, and never a handshake failure.
    """
    address = _first_open(result)
    if address is None:
        return TlsResult(status="not_checked", address="", error="no address accepts connections")
    started = time.monotonic()
    checked = _check(result, address, security, timeout, expiry_days, deadline_cut)
    if not checked.unfinished:  # a cut check has no duration worth reporting: the deadline chose it
        checked = replace(checked, ms=(time.monotonic() - started) * 1000)
    return _as_client(checked, security)


def _as_client(tls: TlsResult, security: Security) -> TlsResult:
    """Records whether this client's own settings check the chain and the name."""
    return replace(tls, client_verifies_chain=security.ssl_verify, client_verifies_name=security.ssl_verify_hostname)


def _check(result: EndpointResult, address: str, security: Security, timeout: float, expiry_days: float,
           deadline_cut: bool) -> TlsResult:
    """The handshake and its verdict, whatever the client's own settings would let through."""
    host = result.endpoint.host
    sni = None if is_ip_literal(host) else host
    try:
        # The chain always, the name below against the advertised host (to tell the two apart); the
        # client certificate too, which a listener with ssl.client.auth=required wants at every endpoint.
        ctx = client_context(security, verify=True)
    except TlsSettingsError as exc:  # its message names settings and files, never a key or a password
        return TlsResult(status="handshake_failed", address=address, error=str(exc))
    try:
        with handshake(address, result.endpoint.dial_port, sni, ctx, timeout) as tls:
            cert: dict[str, Any] = dict(tls.getpeercert() or {})
        trusted = True
        error = None
    except ssl.SSLCertVerificationError as exc:
        trusted = False
        error = exc.verify_message or str(exc)
        cert = unverified_cert(address, result.endpoint.dial_port, sni, timeout, security)
    except (ssl.SSLError, OSError) as exc:
        timed_out = isinstance(exc, (TimeoutError, socket.timeout))
        if timed_out and deadline_cut:
            return _cut(address)
        reason = "timed out" if timed_out else str(exc)
        return TlsResult(status="handshake_failed", address=address,
                         error=f"TLS handshake with {address}:{result.endpoint.dial_port} failed: {reason}")
    names = cert_names(cert)
    sans = cert_sans(cert)
    subject = cert_subject(cert, "subject")
    not_after = str(cert["notAfter"]) if cert.get("notAfter") else None
    days_left = None
    if not_after:
        days_left = round((ssl.cert_time_to_seconds(not_after) - time.time()) / 86400, 1)
    hostname_ok = hostname_matches(host, sans, subject) if names else None
    status: TlsStatus
    if not trusted:
        status = "untrusted"
    elif hostname_ok is False:
        status = "hostname_mismatch"
    elif days_left is not None and days_left < expiry_days:
        status = "expiring"
    else:
        status = "ok"
    return TlsResult(status=status, address=address, subject=subject, names=names, sans=sans,
                     issuer=cert_subject(cert, "issuer"), not_after=not_after, days_left=days_left, trusted=trusted,
                     hostname_ok=hostname_ok, error=error)


def check_all(
    results: Sequence[EndpointResult], ctx: RunContext, *, expiry_days: float,
) -> list[EndpointResult]:
    """TLS for every endpoint of a TLS listener that connects, concurrently, within the deadline.

    A check the deadline cut off is `not_checked` and `unfinished`: nothing is known of that
    certificate, so the run reports RUN_INCOMPLETE instead of passing it for a good one. Whether
    the pool gives up at the deadline first or the handshake's own timeout (cut to the deadline)
    fires first is a race the scheduler decides; both end as the same unfinished result, so the
    report does not depend on it (tests/probe/test_tls.py).
    """
    tls_sources = ctx.uses_tls
    chosen = [i for i, r in enumerate(results)
              if tls_sources.intersection(r.endpoint.advertised_by) and any(t.status == "ok" for t in r.tcp)]

    def work(index: int) -> TlsResult:
        result = results[index]
        cut_short = ctx.deadline < time.monotonic() + ctx.timeout
        return check_tls(result, ctx.listener_security(result.endpoint), timeout=ctx.remaining(ctx.timeout),
                         expiry_days=expiry_days, deadline_cut=cut_short)

    # All at once: one timeout in all, not one per round of workers.
    done = run_bounded(chosen, work, workers=256, deadline=ctx.deadline)
    found = {chosen[i]: tls for i, tls in done.items()}
    out = list(results)
    for i in chosen:
        cut = _as_client(_cut(_first_open(out[i]) or ""), ctx.listener_security(out[i].endpoint))
        out[i] = replace(out[i], tls=found.get(i, cut))
    return out
