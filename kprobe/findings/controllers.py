"""Findings on the KRaft controller quorum as admin tools reach it (`--controllers`, KIP-919).

An admin client set up with `bootstrap.controllers` asks one controller listener for the quorum
(DescribeCluster, EndpointType=2) and then sends its requests to the controller endpoints it was
handed, the active controller's above all. So the same gap as with brokers opens here: the address
answers, and what it advertises does not work from where the tool runs. The fixes name the
controller's settings (`advertised.listeners` for its controller listener, KIP-853), not a broker's.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.findings.common import source_of
from kprobe.models import SOME_ADDRESSES_FAIL, ControllerBootstrapResult, EndpointResult, Finding, Severity

_AFTER = ("admin tools that bootstrap to the controllers (bootstrap.controllers, e.g. kafka-features.sh "
          "--bootstrap-controller, kafka-metadata-quorum.sh) get the quorum from the address, then fail")


def controller_bootstrap_findings(result: ControllerBootstrapResult, answered_any: bool) -> list[Finding]:
    """Why one --controllers address gave no controller list: what it is instead, or what failed."""
    if result.status == "ok":
        return []
    where = result.address
    consequence = ("Another --controllers address answered, so tools that try it still start; this one is dead "
                   "weight in bootstrap.controllers." if answered_any
                   else "No admin tool can start from here with these controller addresses.")
    if result.status == "broker":
        return [finding(
            "CONTROLLER_IS_BROKER", ERROR,
            f"--controllers {where} is a broker listener, not a controller's: {result.error}. Admin clients with "
            f"bootstrap.controllers fail with MismatchedEndpointTypeException. {consequence}",
            f"Pass a KRaft controller listener to --controllers / bootstrap.controllers (the controllers' "
            f"controller.listener.names, often port 9093), or give {where} to -b / bootstrap.servers, where a broker "
            "belongs.", bootstrap=where)]
    if result.status == "unsupported":
        return [finding(
            "CONTROLLER_DESCRIBE_UNSUPPORTED", ERROR,
            f"--controllers {where} cannot describe the controller quorum: {result.error}. "
            "Controllers answer DescribeCluster for controllers from Kafka 3.7 with metadata.version 3.7-IV0 or "
            f"later (KIP-919); admin clients with bootstrap.controllers fail with UnsupportedVersionException. "
            f"{consequence}",
            "Upgrade the controllers to Kafka 3.7 or later and finalize the metadata.version (kafka-features.sh "
            "upgrade --metadata 3.7); until then bootstrap admin tools to the brokers (bootstrap.servers).",
            bootstrap=where)]
    what = {
        "dns_failed": "its name does not resolve from here",
        "refused": "the connection was refused (nothing listens there)",
        "timeout": "it did not answer in time (a firewall, a wrong address, or an overloaded controller)",
        "auth_failed": "it refused the credentials",
        "denied": "it refused to describe the quorum",
    }.get(result.status, "the request failed")
    fix = {
        "dns_failed": "Use a name this network resolves, or an IP address, in bootstrap.controllers.",
        "auth_failed": "Check the SASL settings: admin clients use the same ones for the controllers' listener, whose "
        "protocol and mechanisms are set in the controllers' listener.security.protocol.map and "
        "sasl.mechanism.controller.protocol.",
        "denied": "Grant the tool's principal ALTER on the CLUSTER resource (a controller demands it for "
        "DescribeCluster, unlike a broker), or use a super user for controller admin work.",
    }.get(result.status, "Check the address and port against the controllers' listeners (controller.listener.names), "
                         "and that the port is open between here and the controller.")
    return [finding(
        "CONTROLLER_BOOTSTRAP_FAILED", ERROR,
        f"--controllers {where} gave no controller list: {what} ({result.error}). {consequence}", fix,
        bootstrap=where)]


def controller_endpoint_findings(result: EndpointResult) -> list[Finding]:
    """What fails at one advertised controller endpoint: resolution, connection, or who answers."""
    ep = result.endpoint
    where = ep.hostport
    via = ", ".join(ep.advertised_by)
    node = ep.node_id
    setting = (f"Set controller {node}'s advertised.listeners for its controller listener (KIP-853, Kafka 3.9+; "
               "before, the controller advertises its `listeners` entry) to a host:port this network "
               "resolves and reaches")
    out: list[Finding] = []

    def add(code: str, severity: Severity, message: str, fix: str) -> None:
        out.append(finding(code, severity, message, fix, node_id=node, endpoint=where, bootstrap=source_of(result)))

    if result.status == "unresolvable" and not result.dns.unfinished:
        add("CONTROLLER_ENDPOINT_UNRESOLVABLE", ERROR,
            f"Controller {node} is advertised as {where} (via --controllers {via}), which does not resolve from "
            f"here ({result.dns.error or result.dns.status}): {_AFTER} on every request that controller must serve.",
            setting + "; or run the tool where that name resolves.")
    elif result.status in ("unreachable", *SOME_ADDRESSES_FAIL):
        failing = [t for t in result.tcp if t.status != "ok" and not t.unfinished]
        errors = "; ".join(f"{t.address}: {t.status}" + (f" ({t.error})" if t.error else "") for t in failing)
        if result.status in SOME_ADDRESSES_FAIL:  # degraded: one family fails (docs/dual-stack.md)
            add("CONTROLLER_ENDPOINT_UNREACHABLE", WARNING,
                f"Controller {node} is advertised as {where} (via --controllers {via}); only some of its addresses "
                f"connect ({errors}). Admin tools that try a failing address first are slow or fail.",
                "Remove the dead address records, or make the controller listen on them.")
        elif failing:
            add("CONTROLLER_ENDPOINT_UNREACHABLE", ERROR,
                f"Controller {node} is advertised as {where} (via --controllers {via}), which does not connect from "
                f"here ({errors}): {_AFTER} on every request that controller must serve.",
                setting + "; or open the port from this network.")
    ident = result.identity
    if ident is None:
        return out
    if ident.status in ("match", "mismatch") and not ident.kraft_controller:
        add("CONTROLLER_ENDPOINT_WRONG_NODE", ERROR,
            f"Controller {node} is advertised as {where}, but a broker listener answers there (node {ident.node_id}, "
            f"at {ident.address}): admin requests meant for the controller are refused by a broker.",
            setting + ": the controller's own listener, not a broker's.")
    elif ident.status == "mismatch":
        add("CONTROLLER_ENDPOINT_WRONG_NODE", ERROR,
            f"Controller {node} is advertised as {where}, but the controller answering there ({ident.address}) is "
            f"node {ident.node_id}: requests meant for controller {node} (the active controller's, when it leads) "
            f"go to node {ident.node_id}.",
            f"{setting}; check the port-forward / NAT rule that sends {where} to node {ident.node_id}.")
    elif ident.status in ("not_kafka", "silent"):
        add("CONTROLLER_ENDPOINT_WRONG_NODE", ERROR,
            f"Controller {node} is advertised as {where}: something accepts connections there but gives no controller "
            f"answer ({ident.detail}).",
            f"Find what holds {where} (a proxy with no backend, another service, a controller shutting down); "
            f"{setting[0].lower()}{setting[1:]}.")
    return out


def controllers_findings(
    controllers: Sequence[ControllerBootstrapResult], endpoints: Sequence[EndpointResult],
) -> list[Finding]:
    """Every --controllers finding: each address, then each controller endpoint it advertised."""
    answered = any(c.status == "ok" for c in controllers)
    out: list[Finding] = []
    for result in controllers:
        out.extend(controller_bootstrap_findings(result, answered))
    for endpoint in endpoints:
        out.extend(controller_endpoint_findings(endpoint))
    return out
