"""Who really answers at each advertised endpoint, and what it advertises from there.

A TCP connect only proves that *something* listens. A port-forward or NAT rule can send
broker 2's endpoint to broker 0, another service can sit on the port, or the endpoint can
belong to a listener that advertises a different set. So for every endpoint that connects,
kprobe speaks Kafka to it: ApiVersions (is it Kafka?), Metadata (what does it advertise?) and
DescribeConfigs for the advertised node id (which node is it?).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from kprobe.config import security_from
from kprobe.metadata import NATIVE_SASL
from kprobe.models import EndpointResult, Identity
from kprobe.pool import run_bounded
from kprobe.wire import WireError, fetch_and_identify

# All endpoints at once (threads are cheap next to a timeout): with fewer workers, silent
# endpoints would cost one timeout per round of workers instead of one in all.
MAX_PARALLEL = 256


def check_identity(
    result: EndpointResult, props: Mapping[str, str], *, timeout: float, deadline: float,
    protocol: str | None = None,
) -> Identity:
    """Identity of one endpoint through its first address that connected.

    `protocol` is the security protocol of the listener that advertised the endpoint (a
    `SSL://` bootstrap prefix, or security.protocol): the endpoint speaks the same.
    """
    ok = [t for t in result.tcp if t.status == "ok"]
    if not ok:
        return Identity("unchecked", detail="no address of this endpoint accepts connections")
    # Trust and names are the TLS check's business; here only "who answers" matters.
    security = replace(security_from(props), ssl_verify=False, ssl_verify_hostname=False)
    if protocol:
        security = replace(security, protocol=protocol)
    if security.uses_sasl and security.sasl_mechanism not in NATIVE_SASL:
        return Identity("unchecked", detail=f"kprobe speaks SASL/PLAIN itself, not {security.sasl_mechanism}")
    address = ok[0].address
    started = time.perf_counter()
    try:
        meta, node_id, why = fetch_and_identify(
            address, result.endpoint.port, timeout=timeout, deadline=deadline, security=security,
            server_hostname=result.endpoint.host, topics=[], expected=result.endpoint.node_id,
        )
    except WireError as exc:
        ms = (time.perf_counter() - started) * 1000
        # Only bytes that are not Kafka prove "not Kafka". A connection closed or left unanswered
        # proves only that no Kafka answer comes from there *now* (a proxy with no backend, a broker
        # shutting down or overloaded): clients fail all the same, so it is a finding of its own,
        # `silent`, and not a claim about what listens. The run's own deadline proves nothing.
        if exc.kind == "protocol":
            return Identity("not_kafka", detail=str(exc), address=address, ms=ms)
        if exc.kind in ("closed", "timeout") and "deadline" not in str(exc):
            return Identity("silent", detail=f"{address}:{result.endpoint.port} accepted the connection but gave "
                            f"no Kafka answer: {exc}", address=address, ms=ms)
        return Identity("unchecked", detail=str(exc), address=address, ms=ms)
    ms = (time.perf_counter() - started) * 1000
    if node_id is None:
        return Identity("unchecked", detail=why, address=address, advertised=meta.brokers, ms=ms)
    status = "match" if node_id == result.endpoint.node_id else "mismatch"
    return Identity(status, node_id, None, address, meta.brokers, ms)


def check_all(
    results: Sequence[EndpointResult], props: Mapping[str, str], *, timeout: float, deadline: float,
    protocols: Mapping[str, str] | None = None,
) -> list[EndpointResult]:
    """Every reachable endpoint's identity, concurrently, within the deadline.

    `protocols` maps each bootstrap (`host:port`) to its listener's security protocol.
    """
    chosen = [i for i, r in enumerate(results) if any(t.status == "ok" for t in r.tcp)]
    # The whole phase costs about one timeout (every check runs at once); a check still going
    # then is unchecked, not silent, since its own timeout had not passed.
    phase_deadline = min(deadline, time.monotonic() + timeout + 1.0)

    def work(index: int) -> Identity:
        result = results[index]
        sources = result.endpoint.advertised_by
        protocol = (protocols or {}).get(sources[0]) if sources else None
        try:
            return check_identity(result, props, timeout=timeout, deadline=phase_deadline, protocol=protocol)
        except Exception as exc:  # a bug must cost one identity, not the report
            return Identity("unchecked", detail=f"internal error: {exc.__class__.__name__}")

    found = run_bounded(chosen, work, workers=MAX_PARALLEL, deadline=phase_deadline)
    identities = {chosen[i]: ident for i, ident in found.items()}
    out = []
    for index, result in enumerate(results):
        if any(t.status == "ok" for t in result.tcp):
            identity = identities.get(index) or Identity("unchecked", detail="not checked before the run's deadline")
            out.append(replace(result, identity=identity))
        else:
            out.append(result)
    return out
