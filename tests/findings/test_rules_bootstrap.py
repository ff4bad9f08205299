"""Bootstrap addresses that gave no metadata (kprobe/findings/bootstrap.py), proven on plain data.

Why pure: the lab stages a refused port and a wrong password, but not a name that resolves for
the broker's network only, nor a mix of a dead and a live bootstrap in every variant; the
message must also say whether clients can still start elsewhere, which depends on the others.
"""

from __future__ import annotations

import pytest
from observations import KAFKA0_DOCKER_IP, Case, boot, case, check, dead_boot, endpoint, params

BOB = "kafka0:29092"  # LISTENER_BOB, for clients inside the Docker network
FRED = "localhost:9092"  # LISTENER_FRED through the port Docker publishes on the host

BOB_HEALTHY = boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka0", 29092)], node_id=0)
BOB_ENDPOINT = endpoint(0, "kafka0", 29092, BOB, dns=[KAFKA0_DOCKER_IP])
FRED_FROM_HOST = boot(FRED, connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)], node_id=0)
FRED_ENDPOINT = endpoint(0, "localhost", 9092, FRED, dns=["127.0.0.1"])

CASES: list[Case] = [
    case(
        "bob-from-the-docker-host-name-does-not-resolve",
        [dead_boot(BOB, "dns_failed", "kafka0: Name or service not known")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "its name does not resolve from here"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "(kafka0: Name or service not known)"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "No client can start from here"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "Use a name this network resolves")],
    ),
    case(
        "one-dead-bootstrap-beside-one-that-answers-is-dead-weight",
        [dead_boot("localhost:9093", "refused", "ECONNREFUSED: Connection refused"), FRED_FROM_HOST],
        [FRED_ENDPOINT],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "the connection was refused"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "dead weight in bootstrap.servers"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "against the broker's `listeners`")],
        never_says=[("BOOTSTRAP_UNREACHABLE", None, "message", "No client can start")],
    ),
    case(
        "aws-public-name-firewalled-times-out",
        [dead_boot("ec2-34-211-52-10.us-west-2.compute.amazonaws.com:9092", "timeout", "timed out")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "did not answer in time"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "that the port is open")],
    ),
    case(
        "tls-bootstrap-without-the-ca",
        [dead_boot("broker.tls.kprobe.test:9093", "error",
                   "TLS certificate not accepted: unable to get local issuer certificate (certificate subject "
                   "broker.tls.kprobe.test, names broker.tls.kprobe.test, issuer kprobe test CA)", protocol="SSL")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "the TLS handshake failed"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "names broker.tls.kprobe.test"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "ssl.ca.location")],
    ),
    case(
        "an-http-server-answers-on-the-bootstrap-port",
        [dead_boot("kafka0:8080", "error", "response size 1213486160 is not plausible")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "the request failed")],
        never_says=[("BOOTSTRAP_UNREACHABLE", None, "fix", "ssl.ca.location")],
    ),
    case(
        "sasl-plain-wrong-password",
        [dead_boot("kafka-sasl:9094", "auth_failed",
                   "SASL authentication failed: Authentication failed: Invalid username or password",
                   protocol="SASL_PLAINTEXT")],
        [],
        [("AUTH_FAILED", "error", None, None)],
        says=[("AUTH_FAILED", None, "message", "it refused the credentials"),
              ("AUTH_FAILED", None, "fix", "sasl.mechanism, sasl.username and the password")],
    ),
    case(
        "bob-from-inside-the-docker-network-is-healthy",
        [BOB_HEALTHY], [BOB_ENDPOINT], [],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_bootstrap_rules(row: Case):
    check(row)


def test_a_dead_bootstrap_names_itself():
    """The finding's `bootstrap` is what a user edits (bootstrap.servers), so it must be the dead address."""
    [found] = check(CASES[1])
    assert found.bootstrap == "localhost:9093"
