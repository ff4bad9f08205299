"""Two resolvers compared for each advertised name (kprobe/findings/dns.py), proven on plain data.

Split-horizon DNS is the cloud case of docs/design.md: the VPC resolves
ip-172-31-18-160.us-west-2.compute.internal, the internet does not. kprobe's
`--compare-nameserver` asks a second resolver beside the one in use, and a fix that works from
one network while failing from the other must be called out.
"""

from __future__ import annotations

import pytest
from observations import AWS_PRIVATE, AWS_PRIVATE_IP, Case, boot, case, check, endpoint, failed, params, resolved

from kprobe.models import DnsResult, EndpointResult

VPC_BOOT = boot(f"{AWS_PRIVATE}:9092", connected_to=AWS_PRIVATE_IP, advertises=[(0, AWS_PRIVATE, 9092)], node_id=0)
WHERE = f"{AWS_PRIVATE}:9092"
INTERNET_NS = "8.8.8.8:53"


def vpc_endpoint(mine: DnsResult, *compared: DnsResult) -> EndpointResult:
    """The private name's endpoint, resolved by the resolver in use (`mine`) and by the compared ones."""
    return endpoint(0, AWS_PRIVATE, 9092, f"{AWS_PRIVATE}:9092", dns=mine, compared=compared)


CASES: list[Case] = [
    case(
        "aws-private-name-from-the-vpc-compared-with-the-internet",
        [VPC_BOOT],
        [vpc_endpoint(resolved(AWS_PRIVATE, AWS_PRIVATE_IP),
                      failed(AWS_PRIVATE, "nxdomain", source="nameserver", server=INTERNET_NS))],
        [("DNS_VIEWS_DISAGREE", "warning", 0, WHERE)],
        says=[("DNS_VIEWS_DISAGREE", 0, "message",
               f"resolves to {AWS_PRIVATE_IP} through the system resolver but to nxdomain through nameserver "
               f"{INTERNET_NS}"),
              ("DNS_VIEWS_DISAGREE", 0, "message", "split-horizon DNS"),
              ("DNS_VIEWS_DISAGREE", 0, "fix", f"{AWS_PRIVATE} cannot serve both")],
    ),
    case(
        "stale-record-on-the-compared-nameserver",
        [VPC_BOOT],
        [vpc_endpoint(resolved(AWS_PRIVATE, AWS_PRIVATE_IP),
                      resolved(AWS_PRIVATE, "172.31.18.99", source="nameserver", server="172.31.0.2:53"))],
        [("DNS_VIEWS_DISAGREE", "warning", 0, WHERE)],
        says=[("DNS_VIEWS_DISAGREE", 0, "message", "but to 172.31.18.99 through nameserver 172.31.0.2:53")],
    ),
    case(
        "probe-through-a-nameserver-names-it-as-the-primary",
        [VPC_BOOT],
        [vpc_endpoint(resolved(AWS_PRIVATE, AWS_PRIVATE_IP, source="nameserver", server="172.31.0.2:53"),
                      failed(AWS_PRIVATE, "nxdomain", source="nameserver", server=INTERNET_NS))],
        [("DNS_VIEWS_DISAGREE", "warning", 0, WHERE)],
        says=[("DNS_VIEWS_DISAGREE", 0, "message", f"to {AWS_PRIVATE_IP} through the nameserver but to nxdomain")],
    ),
    case(
        "two-views-that-agree",
        [VPC_BOOT],
        [vpc_endpoint(resolved(AWS_PRIVATE, AWS_PRIVATE_IP),
                      resolved(AWS_PRIVATE, AWS_PRIVATE_IP, source="nameserver", server="172.31.0.2:53"))],
        [],
    ),
    case(
        "two-views-that-both-fail-differently-agree-for-a-client",
        # NXDOMAIN here, SERVFAIL there: no client resolves it from either network; that is one failure,
        # ADVERTISED_UNRESOLVABLE, not a disagreement between views.
        [boot("ec2-34-211-52-10.us-west-2.compute.amazonaws.com:9092", connected_to="34.211.52.10",
              advertises=[(0, AWS_PRIVATE, 9092)])],
        [endpoint(0, AWS_PRIVATE, 9092, "ec2-34-211-52-10.us-west-2.compute.amazonaws.com:9092",
                  dns=failed(AWS_PRIVATE, "nxdomain"),
                  compared=[failed(AWS_PRIVATE, "servfail", "SERVFAIL", source="nameserver", server=INTERNET_NS)])],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, WHERE)],
    ),
    case(
        "a-lookup-the-deadline-cut-is-no-view",
        # The run's deadline came before the resolver in use answered: its `timeout` is no answer at all.
        [VPC_BOOT],
        [vpc_endpoint(failed(AWS_PRIVATE, "timeout", f"{AWS_PRIVATE}: not resolved before the run's deadline",
                             unfinished=True),
                      resolved(AWS_PRIVATE, AWS_PRIVATE_IP, source="nameserver", server="172.31.0.2:53"))],
        [("RUN_INCOMPLETE", "warning", None, None)],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_dns_rules(row: Case):
    check(row)
