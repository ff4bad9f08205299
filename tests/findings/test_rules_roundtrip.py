"""--roundtrip beside the verdict (kprobe/findings/roundtrip.py), proven on plain data.

The lab proves the round trip itself (tests/probe/test_roundtrip.py); here each way the experiment and
the prediction can meet is written down: agreeing (no finding), a client failing where kprobe said
usable, a client working where kprobe said unusable, a broker refusing the request, and the run's
deadline cutting the round trip (RUN_INCOMPLETE, never a failure).
"""

from __future__ import annotations

import pytest
from observations import Case, answers_as, boot, brokers, case, check, endpoint, is_node, params

from kprobe.models import Identity, PartitionRoundtrip, Roundtrip, RoundtripStep
from kprobe.records import replace

THREE = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092)]
BOOT = boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=THREE, node_id=0)
HEALTHY = [endpoint(n, host, port, "192.0.2.10:9092") for n, host, port in THREE]
BROKER2_REFUSED = [*HEALTHY[:2], endpoint(2, "192.0.2.12", 9092, "192.0.2.10:9092", connect="refused")]
CLIENT = "librdkafka 2.16.0"


def ok(partition: int, leader: int) -> PartitionRoundtrip:
    return PartitionRoundtrip(partition=partition, leader=leader, status="ok", offset=7, produce_ms=3.0,
                              roundtrip_ms=9.0)


def lost(partition: int, leader: int, error: str = "Local: Message timed out (broker 2 at 192.0.2.12:9092)",
         status: str = "produce_failed") -> PartitionRoundtrip:
    return PartitionRoundtrip(partition=partition, leader=leader, status=status, error=error)  # type: ignore[arg-type]


def refused(partition: int, leader: int) -> PartitionRoundtrip:
    return PartitionRoundtrip(partition=partition, leader=leader, status="produce_failed",
                              error="Broker: Topic authorization failed", broker_error=True)


def cut(partition: int, leader: int) -> PartitionRoundtrip:
    return PartitionRoundtrip(partition=partition, leader=leader, status="unfinished",
                              error="the run's deadline came before the broker acknowledged the record")


def trip(*partitions: PartitionRoundtrip, status: str = "ok") -> Roundtrip:
    return Roundtrip(topic="canary", client=CLIENT, status=status, partitions=partitions)  # type: ignore[arg-type]


CASES: list[Case] = [
    case("agrees-healthy", [BOOT], HEALTHY, [], roundtrip=trip(ok(0, 0), ok(1, 1), ok(2, 2))),
    case(
        # The verdict already says broker 2 is unusable, and the client fails there: nothing new to say.
        "agrees-broker-refused", [BOOT], BROKER2_REFUSED, [("ADVERTISED_REFUSED", "error", 2, "192.0.2.12:9092")],
        roundtrip=trip(ok(0, 0), ok(1, 1), lost(2, 2), status="failed"),
    ),
    case(
        "client-fails-where-kprobe-said-usable", [BOOT], HEALTHY,
        [("ROUNDTRIP_DISAGREES", "error", 2, "192.0.2.12:9092")],
        roundtrip=trip(ok(0, 0), ok(1, 1), lost(2, 2), lost(5, 2, status="consume_failed"), status="failed"),
        says=[("ROUNDTRIP_DISAGREES", 2, "message", "judged broker 2 usable at 192.0.2.12:9092"),
              ("ROUNDTRIP_DISAGREES", 2, "message", "partition(s) 2, 5"),
              ("ROUNDTRIP_DISAGREES", 2, "message", CLIENT),
              ("ROUNDTRIP_DISAGREES", 2, "message", "Local: Message timed out"),
              ("ROUNDTRIP_DISAGREES", 2, "fix", "Believe the round trip")],
    ),
    case(
        "client-works-where-kprobe-said-unusable", [BOOT], BROKER2_REFUSED,
        [("ADVERTISED_REFUSED", "error", 2, "192.0.2.12:9092"), ("ROUNDTRIP_DISAGREES", "warning", 2, "192.0.2.12:9092")],
        roundtrip=trip(ok(0, 0), ok(1, 1), ok(2, 2)),
        says=[("ROUNDTRIP_DISAGREES", 2, "message", "judged broker 2 unusable"),
              ("ROUNDTRIP_DISAGREES", 2, "message", "read back from partition(s) 2")],
    ),
    case(
        # Broker 2 advertises, through this listener, broker 0's endpoint on another listener: the metadata a
        # client gets there advertises broker 2 well, so its record may get through after a refresh. Luck,
        # which ENDPOINT_ADVERTISES_DIFFERENTLY already explains: not a contradicted verdict.
        "flipping-metadata-success-is-luck-not-disagreement", [BOOT],
        [*HEALTHY[:2], endpoint(2, "192.0.2.10", 9094, "192.0.2.10:9092", identity=Identity(
            status="mismatch", node_id=0, address="192.0.2.10", ms=4.0,
            advertised=brokers((0, "192.0.2.10", 9094), (1, "192.0.2.11", 9094), (2, "192.0.2.12", 9094))))],
        [("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9094"),
         ("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 2, "192.0.2.10:9094"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 2, "192.0.2.10:9094")],
        roundtrip=trip(ok(0, 0), ok(1, 1), ok(2, 2)),
    ),
    case(
        # The endpoint works; the broker said no. Not a wrong verdict, but clients fail all the same.
        "broker-refuses-the-request", [BOOT], HEALTHY, [("ROUNDTRIP_FAILED", "error", 1, "192.0.2.11:9092")],
        roundtrip=trip(ok(0, 0), refused(1, 1), ok(2, 2), status="failed"),
        says=[("ROUNDTRIP_FAILED", 1, "message", "Topic authorization failed"),
              ("ROUNDTRIP_FAILED", 1, "fix", "grant this principal Write and Read")],
        never_says=[("ROUNDTRIP_FAILED", 1, "message", "usable at")],
    ),
    case(
        # Broker 2 advertises broker 0's endpoint: broker 0 answers NOT_LEADER for broker 2's partitions, a
        # broker's error, already explained by the verdict on that endpoint.
        "broker-error-where-kprobe-said-unusable", [BOOT],
        [*HEALTHY[:2], endpoint(2, "192.0.2.10", 9094, "192.0.2.10:9092",
                                identity=answers_as(0, "192.0.2.10", THREE))],
        [("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9094"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 2, "192.0.2.10:9094")],
        roundtrip=trip(ok(0, 0), ok(1, 1), PartitionRoundtrip(partition=2, leader=2, status="produce_failed",
                                                              error="Broker: Not leader for partition",
                                                              broker_error=True), status="failed"),
    ),
    case(
        # Brokers 0 and 2 advertise one endpoint and broker 0 answers there: broker 0's partitions work for a
        # real client, so the duplicate is held against broker 2 only, and the round trip agrees.
        "twin-endpoint-held-against-the-broker-that-does-not-answer", [BOOT],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092", identity=is_node(0, "192.0.2.10", THREE)),
         HEALTHY[1], endpoint(2, "192.0.2.10", 9092, "192.0.2.10:9092", identity=answers_as(0, "192.0.2.10", THREE))],
        [("DUPLICATE_ENDPOINT", "error", 2, "192.0.2.10:9092"), ("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9092")],
        roundtrip=trip(ok(0, 0), ok(1, 1), lost(2, 2), status="failed"),
    ),
    case(
        # Broker 0 advertises a controller's endpoint: clients send metadata requests there too, and a record for
        # broker 1's partition can time out. The error on broker 0 explains it: not a contradicted verdict.
        "controller-leak-spills-to-another-broker", [BOOT],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092", identity=Identity(
            status="unchecked", node_id=9, address="192.0.2.10", kraft_controller=True)), *HEALTHY[1:]],
        [("ENDPOINT_IS_CONTROLLER", "error", 0, "192.0.2.10:9092")],
        roundtrip=trip(lost(0, 0), lost(1, 1), ok(2, 2), status="failed"),
    ),
    case(
        "deadline-cuts-the-round-trip", [BOOT], HEALTHY, [("RUN_INCOMPLETE", "warning", None, None)],
        roundtrip=trip(ok(0, 0), ok(1, 1), cut(2, 2), status="unfinished"),
        says=[("RUN_INCOMPLETE", None, "message", "round trip on topic 'canary' did, for 1 partition(s): 2")],
    ),
    case(
        "run-ended-before-the-round-trip-began", [BOOT], HEALTHY, [("RUN_INCOMPLETE", "warning", None, None)],
        roundtrip=Roundtrip(topic="canary", client="librdkafka", status="unfinished",
                            error="the run ended before the round trip"),
        says=[("RUN_INCOMPLETE", None, "message", "for every partition")],
    ),
    case(
        # Two listeners advertise broker 2 differently and only one works: which one a client uses depends
        # on the bootstrap it reached, so the round trip is set beside neither.
        "views-disagree-no-comparison",
        [BOOT, boot("192.0.2.10:9093", connected_to="192.0.2.10", advertises=[*[(n, h, 9093) for n, h, _ in THREE]],
                    node_id=0)],
        [*HEALTHY, *[endpoint(n, h, 9093, "192.0.2.10:9093") for n, h, _ in THREE[:2]],
         endpoint(2, "192.0.2.12", 9093, "192.0.2.10:9093", connect="refused")],
        [("ADVERTISED_REFUSED", "error", 2, "192.0.2.12:9093")],
        roundtrip=trip(ok(0, 0), ok(1, 1), lost(2, 2), status="failed"),
    ),
    case(
        # The partitions went through; the group placed as the application's never got an assignment, and
        # nothing predicted it.
        "group-step-failed-unpredicted", [BOOT], HEALTHY, [("ROUNDTRIP_STEP_FAILED", "error", None, None)],
        roundtrip=replace(trip(ok(0, 0), ok(1, 1), ok(2, 2), status="failed"), group=RoundtripStep(
            kind="group", key="billing", twin="kprobe-roundtrip-group-laptop-7", partition=12, status="failed",
            error="no assignment from the group coordinator in 9.8 s: the group was never joined")),
        says=[("ROUNDTRIP_STEP_FAILED", None, "message", "as your group 'billing' would"),
              ("ROUNDTRIP_STEP_FAILED", None, "message", "partition 12 of __consumer_offsets"),
              ("ROUNDTRIP_STEP_FAILED", None, "message", "kprobe found that coordinator usable"),
              ("ROUNDTRIP_STEP_FAILED", None, "fix", "report it")],
    ),
    case(
        "steps-that-worked-say-nothing", [BOOT], HEALTHY, [],
        roundtrip=replace(trip(ok(0, 0), ok(1, 1), ok(2, 2)), transaction=RoundtripStep(
            kind="transaction", key="payments", twin="kprobe-roundtrip-tx-laptop-3", partition=4, status="ok")),
    ),
    case("not-run-is-an-error-that-says-why", [BOOT], HEALTHY, [("ROUNDTRIP_NOT_RUN", "error", None, None)],
         roundtrip=Roundtrip(topic="canary", client=CLIENT, status="not_run",
                             error="CreateTopics refused: Broker: Topic authorization failed"),
         says=[("ROUNDTRIP_NOT_RUN", None, "message", "did not run: CreateTopics refused: Broker: Topic authorization "
                "failed")]),
]


@pytest.mark.parametrize("row", params(CASES))
def test_roundtrip_rules(row: Case):
    check(row)
