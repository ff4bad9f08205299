"""The socket facts every network step shares: which family an address needs, and what an errno means.

One place, because the connect loop, the Kafka connection and the TLS check each open sockets
and classify their failures, and two classifiers that disagree (one counting ENETDOWN as
unreachable, one not) would make the same broker `unreachable` in one column and `error` in
the next.
"""

from __future__ import annotations

import errno
import socket

from kprobe.models import TcpStatus

_REFUSED = {errno.ECONNREFUSED}
_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL, errno.ENETDOWN}
_TIMEOUT = {errno.ETIMEDOUT}
_DROPPED = {errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE}


def family_of(address: str) -> socket.AddressFamily:
    """AF_INET6 for an IPv6 literal, AF_INET otherwise (resolved addresses only, never names)."""
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def classify_errno(code: int) -> TcpStatus:
    """A connect's errno in the report's TCP vocabulary (a reset at connect is an `error`, named)."""
    if code == 0:
        return "ok"
    if code in _REFUSED:
        return "refused"
    if code in _UNREACHABLE:
        return "unreachable"
    if code in _TIMEOUT:
        return "timeout"
    return "error"


def classify_os_error(exc: BaseException) -> str:
    """An exception from a blocking socket call: refused, closed, timeout, unreachable or error.

    `closed` (accepted, then dropped by the peer) exists only here: a connect loop never gets
    that far, while a conversation that was accepted and then reset is not a refusal.
    """
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(exc, OSError) and exc.errno in _DROPPED:
        return "closed"
    if isinstance(exc, OSError) and exc.errno is not None:
        status = classify_errno(exc.errno)
        return "error" if status == "ok" else status
    return "error"
