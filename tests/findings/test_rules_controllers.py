"""KRaft controllers (kprobe/findings/controllers.py, and the controller rows of bootstrap and identity), on plain data.

The observations copy what Kafka 4.1 answered in the `controllers` lab (recorded in
tests/data/kafka_responses.json): a controller listener's DescribeCluster for controllers hands
out `controller-0.kraft.internal:9093`; a broker asked the same answers MISMATCHED_ENDPOINT_TYPE;
a controller listener's ApiVersions has no Metadata, so a Metadata request gets the connection
closed. Documentation addresses (192.0.2.0/24) stand for the cluster's network.
"""

from __future__ import annotations

import pytest
from observations import Case, boot, brokers, case, check, endpoint, failed, params

from kprobe.findings.diagnose import diagnose
from kprobe.models import BootstrapResult, ControllerBootstrapResult, Identity
from kprobe.records import replace

CONTROLLER_NAME = "controller-0.kraft.internal"
CONTROLLER_ADDRESS = "192.0.2.40:9093"
QUORUM = brokers((9, CONTROLLER_NAME, 9093))
CLIENT_SET = [(1, "192.0.2.41", 9092), (2, "192.0.2.42", 9092)]
LEAK_SET = [(1, "192.0.2.40", 9093), (2, "192.0.2.42", 9092)]  # broker 1 advertises the controller's listener


def answered(address: str = CONTROLLER_ADDRESS, quorum=QUORUM) -> ControllerBootstrapResult:
    """A --controllers address that described the quorum, as kprobe.probe.controllers records it."""
    return ControllerBootstrapResult(address=address, status="ok", connected_to=address.rsplit(":", 1)[0],
                                     cluster_id="MkU3OEVBNTcwNTJENDM2Qk", active_controller_id=9, controllers=quorum,
                                     ms=3.3, node_id=9, describe_cluster_version=2)


def refused_by(status, error: str, address: str = CONTROLLER_ADDRESS) -> ControllerBootstrapResult:
    """A --controllers address that gave no quorum."""
    return ControllerBootstrapResult(address=address, status=status, error=error, ms=2.1)


def controller_is(node_id: int, address: str, *, controller: bool = True) -> Identity:
    """What the identity step says of a controller endpoint (DescribeConfigs named `node_id`)."""
    return Identity(status="match" if node_id == 9 else "mismatch", node_id=node_id, address=address,
                    advertised=QUORUM if controller else None, ms=2.0, kraft_controller=controller)


def controller_endpoint(**kw):
    """Controller 9's advertised endpoint, advertised through CONTROLLER_ADDRESS."""
    kw.setdefault("dns", ["192.0.2.40"])
    return endpoint(9, CONTROLLER_NAME, 9093, CONTROLLER_ADDRESS, **kw)


CONTROLLER_BOOT = BootstrapResult(
    address=CONTROLLER_ADDRESS, status="error", ms=4.6, kraft_controller=True, node_id=9, connected_to="192.0.2.40",
    error="a KRaft controller listener answers here (node 9): it offers no Metadata, so clients fail with "
          "\"The node does not support METADATA\"")

CASES: list[Case] = [
    case("healthy: the quorum resolves and answers, no finding",
         [], [], [], controllers=[answered()],
         controller_endpoints=[controller_endpoint(identity=controller_is(9, "192.0.2.40"))]),
    case("the controller's advertised name resolves only inside the cluster",
         [], [], [("CONTROLLER_ENDPOINT_UNRESOLVABLE", "error", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()],
         controller_endpoints=[controller_endpoint(dns=failed(CONTROLLER_NAME, "nxdomain"))],
         says=[("CONTROLLER_ENDPOINT_UNRESOLVABLE", 9, "fix", "advertised.listeners for its controller listener"),
               ("CONTROLLER_ENDPOINT_UNRESOLVABLE", 9, "message", "bootstrap.controllers")]),
    case("the controller's endpoint is firewalled from here",
         [], [], [("CONTROLLER_ENDPOINT_UNREACHABLE", "error", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()], controller_endpoints=[controller_endpoint(connect="timeout")],
         says=[("CONTROLLER_ENDPOINT_UNREACHABLE", 9, "message", "192.0.2.40: timeout")]),
    case("one of the controller name's two addresses refuses",
         [], [], [("CONTROLLER_ENDPOINT_UNREACHABLE", "warning", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()],
         controller_endpoints=[controller_endpoint(dns=["192.0.2.40", "192.0.2.49"],
                                                   connect={"192.0.2.40": "ok", "192.0.2.49": "refused"},
                                                   identity=controller_is(9, "192.0.2.40"))]),
    case("the controller name's IPv6 address refuses beside a working IPv4 one (degraded): still said",
         [], [], [("CONTROLLER_ENDPOINT_UNREACHABLE", "warning", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()],
         controller_endpoints=[controller_endpoint(dns=["192.0.2.40", "2001:db8::40"],
                                                   connect={"192.0.2.40": "ok", "2001:db8::40": "refused"},
                                                   identity=controller_is(9, "192.0.2.40"))],
         says=[("CONTROLLER_ENDPOINT_UNREACHABLE", 9, "message", "2001:db8::40: refused")]),
    case("a broker listener answers at the controller's advertised endpoint",
         [], [], [("CONTROLLER_ENDPOINT_WRONG_NODE", "error", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()],
         controller_endpoints=[controller_endpoint(identity=controller_is(1, "192.0.2.40", controller=False))],
         says=[("CONTROLLER_ENDPOINT_WRONG_NODE", 9, "message", "a broker listener answers there (node 1")]),
    case("another controller answers at controller 9's endpoint (a NAT rule)",
         [], [], [("CONTROLLER_ENDPOINT_WRONG_NODE", "error", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()], controller_endpoints=[controller_endpoint(identity=controller_is(10, "192.0.2.40"))],
         says=[("CONTROLLER_ENDPOINT_WRONG_NODE", 9, "message", "is node 10")]),
    case("a proxy with no backend holds the controller's endpoint",
         [], [], [("CONTROLLER_ENDPOINT_WRONG_NODE", "error", 9, f"{CONTROLLER_NAME}:9093")],
         controllers=[answered()],
         controller_endpoints=[controller_endpoint(identity=Identity(
             status="silent", address="192.0.2.40", detail="connection closed by the broker before a full response"))]),
    case("--controllers names a broker listener",
         [], [], [("CONTROLLER_IS_BROKER", "error", None, None)],
         controllers=[refused_by("broker", "it answered MISMATCHED_ENDPOINT_TYPE (The request was sent to an endpoint "
                                 "of type BROKER, but we wanted an endpoint of type CONTROLLER)", "192.0.2.41:9092")],
         says=[("CONTROLLER_IS_BROKER", None, "message", "MismatchedEndpointTypeException"),
               ("CONTROLLER_IS_BROKER", None, "fix", "bootstrap.servers")]),
    case("a Kafka 3.6 controller cannot describe the quorum",
         [], [], [("CONTROLLER_DESCRIBE_UNSUPPORTED", "error", None, None)],
         controllers=[refused_by("unsupported", "a KRaft controller listener that offers no DescribeCluster: Kafka "
                                 "before 3.7")],
         says=[("CONTROLLER_DESCRIBE_UNSUPPORTED", None, "fix", "3.7")]),
    case("the controller's name does not resolve, the second address answers",
         [], [], [("CONTROLLER_BOOTSTRAP_FAILED", "error", None, None)],
         controllers=[refused_by("dns_failed", "controller-1.kraft.internal: Name or service not known",
                                 "controller-1.kraft.internal:9093"), answered()],
         controller_endpoints=[controller_endpoint(identity=controller_is(9, "192.0.2.40"))],
         says=[("CONTROLLER_BOOTSTRAP_FAILED", None, "message", "Another --controllers address answered")]),
    case("the controller refuses DescribeCluster without ALTER on the cluster",
         [], [], [("CONTROLLER_BOOTSTRAP_FAILED", "error", None, None)],
         controllers=[refused_by("denied", "it refused DescribeCluster (CLUSTER_AUTHORIZATION_FAILED): on a "
                                 "controller it needs ALTER on the CLUSTER resource")],
         says=[("CONTROLLER_BOOTSTRAP_FAILED", None, "fix", "ALTER on the CLUSTER resource")]),
    case("-b names a controller listener",
         [CONTROLLER_BOOT], [], [("BOOTSTRAP_IS_CONTROLLER", "error", None, None)],
         says=[("BOOTSTRAP_IS_CONTROLLER", None, "fix", "--controllers"),
               ("BOOTSTRAP_IS_CONTROLLER", None, "message", "The node does not support METADATA")]),
    case("broker 1 advertises the controller's listener to clients (KAFKA-16612)",
         [boot("192.0.2.42:9092", connected_to="192.0.2.42", advertises=LEAK_SET, node_id=2)],
         [endpoint(1, "192.0.2.40", 9093, "192.0.2.42:9092", identity=Identity(
             status="mismatch", node_id=9, address="192.0.2.40", kraft_controller=True,
             detail="a KRaft controller listener answers here (node 9)")),
          endpoint(2, "192.0.2.42", 9092, "192.0.2.42:9092", identity=Identity(
              status="match", node_id=2, address="192.0.2.42", advertised=brokers(*LEAK_SET)))],
         [("ENDPOINT_IS_CONTROLLER", "error", 1, "192.0.2.40:9093")],
         says=[("ENDPOINT_IS_CONTROLLER", 1, "fix", "advertised.listeners")]),
]


@pytest.mark.parametrize("row", params(CASES))
def test_controller_rules(row: Case):
    check(row)


def test_a_controller_whose_id_is_unknown_is_still_a_controller_and_not_an_unchecked_identity():
    """A controller that will not say its id (no DescribeConfigs permission) is still flagged, and
    IDENTITY_NOT_CHECKED does not blame the missing permission for it."""
    ident = Identity(status="unchecked", address="192.0.2.40", kraft_controller=True, detail="a KRaft controller")
    found = diagnose([boot("192.0.2.42:9092", connected_to="192.0.2.42", advertises=LEAK_SET, node_id=2)],
                     [endpoint(1, "192.0.2.40", 9093, "192.0.2.42:9092", identity=ident)])
    assert [f.code for f in found] == ["ENDPOINT_IS_CONTROLLER"]


def test_controller_findings_follow_the_run_level_rules():
    """A controller endpoint the deadline cut is RUN_INCOMPLETE, never called fine."""
    cut = replace(controller_endpoint(connect="timeout", unfinished=["192.0.2.40"]))
    found = diagnose([], [], [answered()], [cut])
    assert [f.code for f in found] == ["RUN_INCOMPLETE"]
