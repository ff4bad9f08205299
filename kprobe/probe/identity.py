"""Who really answers at each advertised endpoint, and what it advertises from there.

A TCP connect only proves that *something* listens. A port-forward or NAT rule can send
broker 2's endpoint to broker 0, another service can sit on the port, or the endpoint can
belong to a listener that advertises a different set. So for every endpoint that connects,
kprobe speaks Kafka to it: ApiVersions (is it Kafka?), Metadata (what does it advertise?) and
DescribeConfigs for the advertised node id (which node is it?).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kprobe.kafka.exchanges import fetch_and_identify
from kprobe.kafka.mechanisms import MECHANISMS
from kprobe.kafka.security import Security
from kprobe.kafka.wire import WireError
from kprobe.models import Endpoint, EndpointResult, Identity
from kprobe.probe.context import RunContext
from kprobe.probe.pool import BoundedPool
from kprobe.records import replace

# All endpoints at once (threads are cheap next to a timeout): with fewer workers, silent
# endpoints would cost one timeout per round of workers instead of one in all.
MAX_PARALLEL = 256


def identity_security(listener: Security) -> tuple[Security, Identity | None]:
    """The listener's security for asking who answers, or why kprobe cannot ask (an unchecked Identity).

    Trust and names are the TLS check's business, so they are not verified here: a broker with an
    untrusted certificate still says which node it is.
    """
    security = replace(listener, ssl_verify=False, ssl_verify_hostname=False)
    if not security.spoken_by_kprobe:
        return security, Identity(status="unchecked", detail=f"kprobe speaks SASL {', '.join(MECHANISMS)} itself, "
                                  f"not {security.not_spoken_why}")
    return security, None


def check_identity(
    endpoint: Endpoint, address: str, listener: Security, *, timeout: float, deadline: float,
) -> Identity:
    """Identity of one endpoint through one of its addresses that accepted a connection.

    `listener` is the security of the listener that advertised the endpoint (a `SSL://`
    bootstrap prefix, or security.protocol): the endpoint speaks the same.
    """
    security, unchecked = identity_security(listener)
    if unchecked is not None:
        return unchecked
    started = time.perf_counter()
    try:
        meta, node_id, why, _ = fetch_and_identify(
            address, endpoint.dial_port, timeout=timeout, deadline=deadline, security=security,
            server_hostname=endpoint.host, topics=[], expected=endpoint.node_id,
        )
    except WireError as exc:
        ms = (time.perf_counter() - started) * 1000
        if exc.kind == "controller":
            # Kafka, but a KRaft controller listener: it serves no client. Which node it is still says
            # whether the advertised id even belongs to it.
            if exc.node_id is None:
                return Identity(status="unchecked", detail=str(exc), address=address, ms=ms, kraft_controller=True)
            return Identity(status="match" if exc.node_id == endpoint.node_id else "mismatch", node_id=exc.node_id,
                            detail=str(exc), address=address, ms=ms, kraft_controller=True)
        return identity_failed(exc, address, endpoint.dial_port, ms)
    ms = (time.perf_counter() - started) * 1000
    if node_id is None:
        return Identity(status="unchecked", detail=why, address=address, advertised=meta.brokers, ms=ms)
    return Identity(status="match" if node_id == endpoint.node_id else "mismatch", node_id=node_id, address=address,
                    advertised=meta.brokers, ms=ms)


def identity_failed(exc: WireError, address: str, port: int, ms: float) -> Identity:
    """What a failed identity request proves; shared by broker and controller endpoints.

    Only bytes that are not Kafka prove "not Kafka". A connection closed or left unanswered proves
    only that no Kafka answer comes from there *now* (a proxy with no backend, a broker shutting down
    or overloaded): clients fail all the same, so it is a finding of its own, `silent`, and not a
    claim about what listens. The run's own deadline proves nothing.
    """
    if exc.tls_failure in ("client_certificate_required", "client_certificate_refused"):
        return Identity(status="unchecked", detail=str(exc), address=address, ms=ms, tls_failure=exc.tls_failure)
    if exc.kind == "protocol":
        return Identity(status="not_kafka", detail=str(exc), address=address, ms=ms)
    if exc.kind in ("closed", "timeout") and not exc.deadline:
        return Identity(status="silent", detail=f"{address}:{port} accepted the connection but gave "
                        f"no Kafka answer: {exc}", address=address, ms=ms)
    return Identity(status="unchecked", detail=str(exc), address=address, ms=ms, unfinished=exc.deadline)


class IdentityChecks:
    """Identity checks that start as soon as their endpoint connects.

    Why not after the connect step: that step lasts as long as its slowest attempt, a whole
    timeout when any endpoint is blackholed, and the checks of the endpoints that did connect
    would then add their own time on top. Started from the connect loop, they run during
    that wait. Each check gets one timeout (plus a second for its three requests); a check
    still going then is unchecked, not silent, since its own timeout had not passed.

    """

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._pool: BoundedPool[tuple[Endpoint, str, float], Identity] = BoundedPool(
            self._check, workers=MAX_PARALLEL)
        self._started: set[int] = set()
        self._last_deadline = 0.0

    def start(self, index: int, endpoint: Endpoint, address: str) -> None:
        """Check endpoint number `index` through `address`; only its first call counts."""
        if index in self._started:
            return
        self._started.add(index)
        check_deadline = min(self.ctx.deadline, time.monotonic() + self.ctx.timeout + 1.0)
        self._last_deadline = max(self._last_deadline, check_deadline)
        self._pool.submit(index, (endpoint, address, check_deadline), check_deadline)

    def _check(self, job: tuple[Endpoint, str, float]) -> Identity:
        endpoint, address, check_deadline = job
        return check_identity(endpoint, address, self.ctx.listener_security(endpoint), timeout=self.ctx.timeout,
                              deadline=check_deadline)

    def apply(self, results: Sequence[EndpointResult]) -> list[EndpointResult]:
        """`results` (in the order of the indexes given to `start`) with their identities."""
        reachable = set()
        for index, result in enumerate(results):
            ok = next((t for t in result.tcp if t.status == "ok"), None)
            if ok is not None:
                reachable.add(index)
                self.start(index, result.endpoint, ok.address)  # a no-op for a check already started
        found = self._pool.results(self._last_deadline)
        cut = Identity(status="unchecked", detail="not checked before the run's deadline", unfinished=True)
        return [
            replace(r, identity=found.get(i) or cut)
            if i in reachable else r
            for i, r in enumerate(results)
        ]
