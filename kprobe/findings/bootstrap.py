"""Findings on bootstrap addresses that gave no metadata."""

from __future__ import annotations

from kprobe.findings.catalogue import ERROR, finding
from kprobe.models import BootstrapResult, Finding


def bootstrap_finding(b: BootstrapResult, answered_any: bool) -> Finding:
    """Why one bootstrap address gave no metadata, and whether clients can still start elsewhere."""
    what = {
        "dns_failed": "its name does not resolve from here",
        "refused": "the connection was refused (nothing listens there)",
        "timeout": "it did not answer in time (a firewall, a wrong address, or an overloaded broker)",
        "auth_failed": "it refused the credentials",
    }.get(b.status, "the request failed")
    consequence = (
        "The other bootstrap addresses answered, so clients that try them will still start, but "
        "this one is dead weight in bootstrap.servers."
        if answered_any else "No client can start from here with this bootstrap list."
    )
    tls_problem = (b.error or "").startswith("TLS")
    if tls_problem:
        what = "the TLS handshake failed"
    fix = {
        "auth_failed": "Check sasl.mechanism, sasl.username and the password, and that the listener's "
        "protocol matches security.protocol.",
        "dns_failed": "Use a name this network resolves, or an IP address, in bootstrap.servers.",
    }.get(
        b.status,
        "Check the address and port against the broker's `listeners`, and that the port is open "
        "between here and the broker.",
    )
    if tls_problem:
        fix = ("Give the client the CA that signed the broker certificate (-X ssl.ca.location=...), and bootstrap "
               "with a name the certificate holds; check that the port is a TLS listener.")
    code = "AUTH_FAILED" if b.status == "auth_failed" else "BOOTSTRAP_UNREACHABLE"
    return finding(code, ERROR, f"Bootstrap {b.address} gave no metadata: {what} ({b.error}). {consequence}",
                   fix, bootstrap=b.address)
