"""Run-level findings and the order of all findings (kprobe/findings/diagnose.py), proven on plain data.

RUN_INCOMPLETE exists so that what the run's deadline (or Ctrl-C) cut off is never passed for
working: an endpoint that never answered, a TLS check that never ended. IDENTITY_NOT_CHECKED says
once, for the whole run, why the identity step could not tell which node answers. Both are
hard to time in the lab (a deadline lands where it lands); here the cut is written down.
"""

from __future__ import annotations

import pytest
from observations import (
    Case,
    boot,
    brokers,
    case,
    check,
    dead_boot,
    endpoint,
    failed,
    is_node,
    params,
    resolved,
)

from kprobe.findings.diagnose import diagnose
from kprobe.models import Identity, Remap, TlsResult

THREE = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092)]
BOOT = boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=THREE, node_id=0)
DEADLINE_DNS = failed("broker2.kafka.example.com", "timeout",
                      "broker2.kafka.example.com: not resolved before the run's deadline", unfinished=True)
TLS_CUT = TlsResult(status="not_checked", address="", error="not checked before the run's deadline", unfinished=True)
TLS_BOOT = boot("broker.tls.kprobe.test:9093", connected_to="192.0.2.30", advertises=[(0, "broker.tls.kprobe.test", 9093)],
                node_id=0, protocol="SSL")
NOT_AUTHORISED = ("not authorised to describe broker configs (CLUSTER_AUTHORIZATION_FAILED): grant DescribeConfigs on "
                  "the cluster")
UNSPOKEN = "kprobe speaks SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 itself, not GSSAPI"


def unchecked(detail: str) -> Identity:
    return Identity(status="unchecked", detail=detail)


CASES: list[Case] = [
    # -- RUN_INCOMPLETE ----------------------------------------------------------------------------------
    case(
        "deadline-before-a-name-resolved",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[*THREE[:2], (2, "broker2.kafka.example.com", 9092)])],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092"), endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092"),
         endpoint(2, "broker2.kafka.example.com", 9092, "192.0.2.10:9092", dns=DEADLINE_DNS)],
        # Not ADVERTISED_UNRESOLVABLE: the name was never answered for, so nothing is concluded of it.
        [("RUN_INCOMPLETE", "warning", None, None)],
        says=[("RUN_INCOMPLETE", None, "message", "before 1 advertised endpoint(s) answered: "
                                                   "broker2.kafka.example.com:9092"),
              ("RUN_INCOMPLETE", None, "message", "cannot say they work"),
              ("RUN_INCOMPLETE", None, "fix", "a longer --deadline")],
        never_says=[("RUN_INCOMPLETE", None, "message", "TLS")],
    ),
    case(
        "deadline-during-the-connect-to-a-blackholed-broker",
        [BOOT],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092"), endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092"),
         endpoint(2, "192.0.2.12", 9092, "192.0.2.10:9092", connect="timeout", unfinished=["192.0.2.12"])],
        # Not ADVERTISED_TIMEOUT: the deadline stopped the connect before its own timeout.
        [("RUN_INCOMPLETE", "warning", None, None)],
        says=[("RUN_INCOMPLETE", None, "message", "192.0.2.12:9092")],
    ),
    case(
        "deadline-before-the-tls-check-ended",
        [TLS_BOOT],
        [endpoint(0, "broker.tls.kprobe.test", 9093, TLS_BOOT.address, dns=["192.0.2.30"], tls=TLS_CUT)],
        [("RUN_INCOMPLETE", "warning", None, None)],
        says=[("RUN_INCOMPLETE", None, "message", "before the TLS check of 1 endpoint(s) ended: "
                                                   "broker.tls.kprobe.test:9093"),
              ("RUN_INCOMPLETE", None, "message", "cannot say clients accept them")],
        never_says=[("RUN_INCOMPLETE", None, "message", "advertised endpoint(s) answered")],
    ),
    case(
        "deadline-cut-both-an-endpoint-and-a-tls-check-one-finding",
        [boot("broker.tls.kprobe.test:9093", connected_to="192.0.2.30", protocol="SSL", node_id=0,
              advertises=[(0, "broker.tls.kprobe.test", 9093), (1, "broker1.tls.kprobe.test", 9093)])],
        [endpoint(0, "broker.tls.kprobe.test", 9093, "broker.tls.kprobe.test:9093", dns=["192.0.2.30"], tls=TLS_CUT),
         endpoint(1, "broker1.tls.kprobe.test", 9093, "broker.tls.kprobe.test:9093",
                  dns=failed("broker1.tls.kprobe.test", "timeout", "not resolved before the run's deadline",
                             unfinished=True))],
        [("RUN_INCOMPLETE", "warning", None, None)],
        says=[("RUN_INCOMPLETE", None, "message", "answered: broker1.tls.kprobe.test:9093"),
              ("RUN_INCOMPLETE", None, "message", "ended: broker.tls.kprobe.test:9093")],
    ),
    # -- IDENTITY_NOT_CHECKED ----------------------------------------------------------------------------
    case(
        "bob-may-read-metadata-but-not-describe-broker-configs",
        [boot("kafka-sasl:9095", connected_to="192.0.2.40", advertises=[(0, "kafka-sasl", 9095)], protocol="SASL_SSL")],
        [endpoint(0, "kafka-sasl", 9095, "kafka-sasl:9095", dns=["192.0.2.40"],
                  identity=Identity(status="unchecked", address="192.0.2.40", detail=NOT_AUTHORISED,
                                    advertised=brokers((0, "kafka-sasl", 9095))))],
        [("IDENTITY_NOT_CHECKED", "info", None, None)],
        says=[("IDENTITY_NOT_CHECKED", None, "message", f"Identity not checked: {NOT_AUTHORISED}."),
              ("IDENTITY_NOT_CHECKED", None, "message", "would go unseen"),
              ("IDENTITY_NOT_CHECKED", None, "fix", "grant DescribeConfigs on the cluster to the probe's principal")],
    ),
    case(
        "scram-through-librdkafka-one-finding-for-three-endpoints-with-one-reason",
        [boot("kafka-sasl:9096", connected_to=None, advertises=THREE)],
        [endpoint(n, h, p, "kafka-sasl:9096", identity=unchecked(UNSPOKEN)) for n, h, p in THREE],
        [("IDENTITY_NOT_CHECKED", "info", None, None)],
        says=[("IDENTITY_NOT_CHECKED", None, "message", f"Identity not checked: {UNSPOKEN}. Which node")],
    ),
    case(
        "two-reasons-are-both-given",
        [BOOT],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092", identity=unchecked(NOT_AUTHORISED)),
         endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092", identity=unchecked(UNSPOKEN)),
         endpoint(2, "192.0.2.12", 9092, "192.0.2.10:9092", identity=is_node(2, "192.0.2.12", THREE))],
        [("IDENTITY_NOT_CHECKED", "info", None, None)],
        says=[("IDENTITY_NOT_CHECKED", None, "message", f"{UNSPOKEN}; {NOT_AUTHORISED}")],
    ),
    case(
        "identity-skipped-with-no-identity-is-not-a-finding",
        [BOOT], [endpoint(n, h, p, "192.0.2.10:9092") for n, h, p in THREE], [],
    ),
    # -- REMAPPED_ENDPOINTS: a "what if" verdict says it is one ---------------------------------------
    case(
        "resolve-maps-an-unresolvable-name-and-it-works",
        # --resolve broker2.internal=192.0.2.12: the mapped address was dialled (a literal, no lookup).
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(2, "broker2.internal", 9092)])],
        [endpoint(2, "broker2.internal", 9092, "192.0.2.10:9092", dns=resolved("192.0.2.12", "192.0.2.12",
                                                                                source="literal"),
                  remap=Remap(host="192.0.2.12", port=9092, option="--resolve"))],
        [("REMAPPED_ENDPOINTS", "info", None, None)],
        says=[("REMAPPED_ENDPOINTS", None, "message", "broker2.internal:9092 -> 192.0.2.12:9092 (--resolve)"),
              ("REMAPPED_ENDPOINTS", None, "message", "holds only where the network maps them so"),
              ("REMAPPED_ENDPOINTS", None, "fix", "change advertised.listeners")],
    ),
    case(
        "connect-to-a-local-port-forward-is-not-a-loopback-advertisement",
        # kubectl port-forward pod/broker-2 19092:9092, tried with --connect-to broker2.internal:9092=127.0.0.1:19092.
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(2, "broker2.internal", 9092)])],
        [endpoint(2, "broker2.internal", 9092, "192.0.2.10:9092",
                  dns=resolved("127.0.0.1", "127.0.0.1", source="literal"),
                  remap=Remap(host="127.0.0.1", port=19092, option="--connect-to"))],
        [("REMAPPED_ENDPOINTS", "info", None, None)],
        says=[("REMAPPED_ENDPOINTS", None, "message", "broker2.internal:9092 -> 127.0.0.1:19092 (--connect-to)")],
    ),
    case(
        "connect-to-a-forward-that-refuses-is-still-a-gap",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(2, "broker2.internal", 9092)])],
        [endpoint(2, "broker2.internal", 9092, "192.0.2.10:9092", dns=["192.0.2.99"], connect="refused",
                  remap=Remap(host="forward.example.com", port=19092, option="--connect-to"))],
        [("ADVERTISED_REFUSED", "error", 2, "broker2.internal:9092"), ("REMAPPED_ENDPOINTS", "info", None, None)],
        says=[("REMAPPED_ENDPOINTS", None, "message",
               "1 advertised endpoint(s) were dialled elsewhere, as asked: broker2.internal:9092 -> "
               "forward.example.com:19092 (--connect-to)")],
    ),
]

# Every rule at once, one finding of each severity at least: the order a reader sees them in.
EVERYTHING = case(
    "everything-at-once",
    [dead_boot("192.0.2.9:9092", "refused", "ECONNREFUSED: Connection refused"),
     boot("192.0.2.10:9092", connected_to="192.0.2.10", node_id=0,
          advertises=[(0, "broker0.kafka.internal", 9092), (1, "192.0.2.10", 9093), (2, "192.0.2.12", 9092),
                      (3, "broker3.kafka.example.com", 9092), (4, "broker4.kafka.example.com", 9092)])],
    [endpoint(0, "broker0.kafka.internal", 9092, "192.0.2.10:9092", dns=failed("broker0.kafka.internal", "nxdomain")),
     endpoint(1, "192.0.2.10", 9093, "192.0.2.10:9092", identity=unchecked(NOT_AUTHORISED)),
     endpoint(2, "192.0.2.12", 9092, "192.0.2.10:9092", connect="refused"),
     endpoint(3, "broker3.kafka.example.com", 9092, "192.0.2.10:9092", dns=["2001:db8::13", "192.0.2.13"],
              connect={"2001:db8::13": "unreachable", "192.0.2.13": "ok"}),
     endpoint(4, "broker4.kafka.example.com", 9092, "192.0.2.10:9092",
              dns=failed("broker4.kafka.example.com", "timeout", "not resolved before the run's deadline",
                         unfinished=True))],
    [("BOOTSTRAP_UNREACHABLE", "error", None, None),
     ("ADVERTISED_UNRESOLVABLE", "error", 0, "broker0.kafka.internal:9092"),
     ("ADVERTISED_REFUSED", "error", 2, "192.0.2.12:9092"),
     ("RUN_INCOMPLETE", "warning", None, None),
     ("ADVERTISED_ONE_FAMILY_FAILS", "warning", 3, "broker3.kafka.example.com:9092"),
     ("IDENTITY_NOT_CHECKED", "info", None, None),
     ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 1, "192.0.2.10:9093")],
)
CASES.append(EVERYTHING)


@pytest.mark.parametrize("row", params(CASES))
def test_run_rules(row: Case):
    check(row)


def test_findings_come_errors_first_then_by_node_then_by_code():
    """Every output lists findings in diagnose()'s order, so the first line a user reads is the worst problem;
    run-level findings (no node) lead their severity."""
    found = check(EVERYTHING)
    assert [(f.code, f.node_id) for f in found] == [(code, node) for code, _, node, _ in EVERYTHING.expect]


def test_the_order_does_not_depend_on_the_order_of_the_observations():
    """A report must read the same whichever endpoint answered first."""
    forward = diagnose(EVERYTHING.bootstraps, EVERYTHING.endpoints)
    backward = diagnose(EVERYTHING.bootstraps[::-1], EVERYTHING.endpoints[::-1])
    assert [(f.code, f.node_id) for f in backward] == [(f.code, f.node_id) for f in forward]


def test_an_identity_check_the_deadline_cut_makes_the_run_incomplete():
    """kprobe.probe.identity records a cut check as Identity(status="unchecked", detail="not checked before the
    run's deadline"): nothing is known of who answers there, exactly as for a TLS check cut short."""
    cut = Identity(status="unchecked", detail="not checked before the run's deadline", unfinished=True)
    found = diagnose([BOOT], [endpoint(n, h, p, "192.0.2.10:9092", identity=cut) for n, h, p in THREE])
    assert "RUN_INCOMPLETE" in {f.code for f in found}
    assert not any("grant DescribeConfigs" in f.fix for f in found)
