"""The KRaft controller quorum as admin tools reach it: `--controllers`, like `bootstrap.controllers`.

Since Kafka 3.7 (KIP-919) an admin client may bootstrap to the controllers instead of the brokers:
it asks a controller listener for DescribeCluster with EndpointType=2, is handed every controller's
advertised endpoint for that listener, and then talks to those endpoints. So each address given is
asked, on its own connection, exactly that; and each endpoint it hands out is resolved, connected to
and identity-checked like a broker endpoint (the same steps, the run's context and deadline), since
an admin tool fails on the first one it cannot reach as surely as a producer fails on a broker.

The security settings are the user's, as the admin client applies its one configuration to
`bootstrap.controllers` too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kprobe.kafka import codec
from kprobe.kafka.exchanges import fetch_controllers
from kprobe.kafka.mechanisms import MECHANISMS
from kprobe.kafka.security import Security
from kprobe.kafka.wire import WireError
from kprobe.models import (
    BootstrapAddress,
    ControllerBootstrapResult,
    ControllerStatus,
    Endpoint,
    EndpointResult,
    Identity,
)
from kprobe.probe.context import RunContext
from kprobe.probe.identity import IdentityChecks, identity_failed, identity_security
from kprobe.probe.pool import run_bounded
from kprobe.probe.reach import probe_endpoints

_WIRE_STATUS: dict[str, ControllerStatus] = {
    "refused": "refused", "timeout": "timeout", "unreachable": "error", "auth_failed": "auth_failed",
}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _judge(
    hostport: str, described: codec.DescribedCluster | None, versions: dict[int, tuple[int, int]],
) -> tuple[ControllerStatus, str | None]:
    """What one answer means: the quorum, or why an admin client gets none from this address."""
    if described is None:
        if codec.API_METADATA in versions:
            return "broker", ("it serves Metadata and offers no DescribeCluster v1: a broker listener (Kafka before "
                              "3.7)")
        if codec.is_controller_listener(versions):
            return "unsupported", "a KRaft controller listener that offers no DescribeCluster: Kafka before 3.7"
        return "error", "it answered ApiVersions without DescribeCluster or Metadata: not a Kafka node kprobe knows"
    code = described.error_code
    text = described.error_message or codec.error_name(code)
    if code == 0 and described.endpoint_type == codec.ENDPOINT_TYPE_CONTROLLERS:
        return "ok", None
    if code == 0:  # what the admin client refuses too (MismatchedEndpointTypeException)
        return "broker", f"it described endpoints of type {described.endpoint_type}, not controllers"
    if code == 114:  # MISMATCHED_ENDPOINT_TYPE: a broker asked about controllers
        return "broker", f"it answered MISMATCHED_ENDPOINT_TYPE ({text})"
    if code == 35:  # the controller's metadata.version predates controller registration (3.7-IV0)
        return "unsupported", (f"a controller whose metadata.version cannot describe controllers "
                               f"(UNSUPPORTED_VERSION: {text})")
    if code == 31:
        return "denied", ("it refused DescribeCluster (CLUSTER_AUTHORIZATION_FAILED): on a controller it needs ALTER "
                          "on the CLUSTER resource")
    return "error", f"{hostport} answered DescribeCluster with {codec.error_name(code)}: {text}"


def fetch_controller_bootstrap(
    address: BootstrapAddress, ctx: RunContext, *, identity: bool = True,
) -> ControllerBootstrapResult:
    """One --controllers address's answer, or why there is none; never raises for network trouble."""
    started = time.perf_counter()
    hostport = address.hostport
    security = ctx.security_of(address)
    if not security.spoken_by_kprobe:
        return ControllerBootstrapResult(
            address=hostport, status="error", protocol=security.protocol, ms=_ms(started),
            error=f"kprobe speaks SASL {', '.join(MECHANISMS)} itself to controllers, not {security.not_spoken_why}")
    dns = ctx.resolver.resolve(address.host)
    if dns.status != "ok" or not dns.addresses:
        return ControllerBootstrapResult(address=hostport, status="dns_failed", protocol=security.protocol,
                                         error=dns.error or f"{address.host} did not resolve", ms=_ms(started))
    failures: list[WireError] = []
    for ip in dns.addresses:
        if time.monotonic() >= ctx.deadline:
            failures.append(WireError("timeout", "run deadline reached", deadline=True))
            break
        try:
            described, versions, node_id, note = fetch_controllers(
                ip, address.port, timeout=ctx.timeout, deadline=ctx.deadline, security=security,
                server_hostname=address.host, identity=identity)
        except WireError as exc:
            failures.append(exc)
            if exc.kind in ("refused", "timeout", "unreachable") and not exc.awaiting_response:
                continue  # only a connection that never opened justifies the name's next address
            break
        status, error = _judge(hostport, described, versions)
        ok = described is not None and status == "ok"
        return ControllerBootstrapResult(
            address=hostport, status=status, error=error, connected_to=ip, ms=_ms(started), node_id=node_id,
            identity_note=note, protocol=security.protocol,
            cluster_id=described.cluster_id if ok and described else None,
            active_controller_id=described.controller_id if ok and described else None,
            controllers=described.nodes if ok and described else (),
            describe_cluster_version=codec.describe_cluster_version(versions))
    worst = failures[-1]
    return ControllerBootstrapResult(
        address=hostport, status=_WIRE_STATUS.get(worst.kind, "error"), protocol=security.protocol, ms=_ms(started),
        error="; ".join(dict.fromkeys(str(f) for f in failures)))


def collect_controller_endpoints(results: Sequence[ControllerBootstrapResult]) -> list[Endpoint]:
    """The distinct advertised controller endpoints, in node-id order, with the addresses that named each."""
    seen: dict[tuple[int, str, int], list[str]] = {}
    for result in results:
        for node in result.controllers:
            sources = seen.setdefault((node.node_id, node.host, node.port), [])
            if result.address not in sources:
                sources.append(result.address)
    return [Endpoint(node_id=n, host=h, port=p, advertised_by=tuple(seen[(n, h, p)])) for n, h, p in sorted(seen)]


def check_controller_identity(
    endpoint: Endpoint, address: str, listener: Security, *, timeout: float, deadline: float,
) -> Identity:
    """Who answers at one advertised controller endpoint: a controller, and the one advertised?

    Asked as the admin client asks it (DescribeCluster for controllers) plus DescribeConfigs for the
    advertised id, which a controller answers for its own id only, as a broker does.
    """
    security, unchecked = identity_security(listener)
    if unchecked is not None:
        return unchecked
    started = time.perf_counter()
    try:
        described, versions, node_id, why = fetch_controllers(
            address, endpoint.dial_port, timeout=timeout, deadline=deadline, security=security,
            server_hostname=endpoint.host, expected=endpoint.node_id)
    except WireError as exc:
        return identity_failed(exc, address, endpoint.dial_port, (time.perf_counter() - started) * 1000)
    ms = (time.perf_counter() - started) * 1000
    controller = codec.is_controller_listener(versions)
    advertised = described.nodes if described is not None and described.error_code == 0 else None
    if node_id is None:
        return Identity(status="unchecked", detail=why, address=address, advertised=advertised, ms=ms,
                        kraft_controller=controller)
    return Identity(status="match" if node_id == endpoint.node_id else "mismatch", node_id=node_id, address=address,
                    advertised=advertised, ms=ms, kraft_controller=controller)


class ControllerIdentityChecks(IdentityChecks):
    """The identity step for controller endpoints: started as each connects, like the brokers'."""

    def _check(self, job: tuple[Endpoint, str, float]) -> Identity:
        endpoint, address, check_deadline = job
        return check_controller_identity(endpoint, address, self.ctx.listener_security(endpoint),
                                         timeout=self.ctx.timeout, deadline=check_deadline)


def check_controllers(
    addresses: Sequence[BootstrapAddress], ctx: RunContext, *, identity: bool = True,
) -> tuple[list[ControllerBootstrapResult], list[EndpointResult]]:
    """Every --controllers address (in parallel), then every controller endpoint they advertise."""
    done = run_bounded(list(addresses), lambda a: fetch_controller_bootstrap(a, ctx, identity=identity),
                       workers=64, deadline=ctx.deadline + 0.05)
    answers = [done.get(i) or ControllerBootstrapResult(address=a.hostport, status="timeout",
                                                        error="no answer before the run's deadline")
               for i, a in enumerate(addresses)]
    endpoints = [ctx.remap(e) for e in collect_controller_endpoints(answers)]
    checks = ControllerIdentityChecks(ctx) if identity else None
    results = probe_endpoints(endpoints, ctx, on_connected=checks.start if checks else None)
    if checks is not None:
        results = checks.apply(results)
    return answers, results
