"""The prediction beside the experiment: kprobe's verdict on each leader against --roundtrip.

A partition's record travels to its leader's advertised endpoint, so the verdict on that endpoint
predicts the partition: usable, the round trip should work; unusable, it should fail. Where the
two disagree, kprobe was wrong about this vantage (or the cluster changed between the two), and a
finding says so with both sides: the report is then a bug report waiting to be written.

A failure the broker itself answered (an authorization error, too few in-sync replicas) is not a
wrong verdict: the endpoint worked and the request did not. It gets its own finding, because a
client from here fails all the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.models import (
    OFFSETS_TOPIC,
    TRANSACTIONS_TOPIC,
    EndpointResult,
    Finding,
    PartitionRoundtrip,
    Roundtrip,
    is_usable,
)


def roundtrip_findings(roundtrip: Roundtrip | None, endpoints: Sequence[EndpointResult],
                       findings: Sequence[Finding]) -> list[Finding]:
    """ROUNDTRIP_DISAGREES and ROUNDTRIP_FAILED, one finding per leader, or ROUNDTRIP_NOT_RUN; `findings` are
    the verdict's.
    """
    if roundtrip is None:
        return []
    out_steps = _step_findings(roundtrip, findings)
    if roundtrip.status == "not_run":
        # Asked for and not made: the report's verdict lacks the proof the user asked for, and says why.
        return [finding(
            "ROUNDTRIP_NOT_RUN", ERROR,
            f"The round trip on topic {roundtrip.topic!r} did not run: {roundtrip.error}. Nothing was produced or "
            "read, so this report cannot say a client gets through.",
            "Act on the reason: a topic this principal may create (or --roundtrip-create with the right to create "
            "it), or an existing topic of your own; with no bootstrap answering, fix that first.")]
    by_leader: dict[int, list[PartitionRoundtrip]] = {}
    for p in roundtrip.partitions:
        if p.leader is not None:
            by_leader.setdefault(p.leader, []).append(p)
    out: list[Finding] = []
    spilled = any(f.code in _SPILLING and f.severity == ERROR for f in findings)
    for leader, partitions in sorted(by_leader.items()):
        verdict = _verdict(leader, endpoints, findings)
        failed = [p for p in partitions if p.status in ("produce_failed", "consume_failed")]
        refused = [p for p in failed if p.broker_error]
        lost = [p for p in failed if not p.broker_error]
        worked = [p for p in partitions if p.status == "ok"]
        where = ", ".join(verdict[1]) if verdict else ""
        # Judged unusable already (another broker answering there says NOT_LEADER, for one): that finding explains it.
        if refused and (verdict is None or verdict[0]):
            out.append(finding(
                "ROUNDTRIP_FAILED", ERROR,
                f"{roundtrip.client} reached broker {leader} and the broker refused the round trip on topic "
                f"{roundtrip.topic!r}, partition(s) {_numbers(refused)}: {refused[0].error}. The endpoint works; "
                "the request does not, so clients from here fail on those partitions all the same.",
                "Act on the broker's error: for an authorization error grant this principal Write and Read (and "
                "Describe) on the topic; for too few in-sync replicas bring the followers back or lower "
                "min.insync.replicas; for an unknown partition let the metadata settle and run again.",
                node_id=leader, endpoint=verdict[1][0] if verdict else None))
        if verdict is None:
            continue  # no endpoint judged for that leader, or the views disagree: nothing to set beside it
        usable, hostports = verdict
        if usable and lost and not spilled:
            out.append(finding(
                "ROUNDTRIP_DISAGREES", ERROR,
                f"kprobe judged broker {leader} usable at {where}, but {roundtrip.client} failed on topic "
                f"{roundtrip.topic!r}, partition(s) {_numbers(lost)}: {lost[0].error}. Clients from here fail "
                "where kprobe said they would work.",
                "Believe the round trip, and please report the disagreement to kprobe's maintainers with this "
                "run's JSON report attached (--json): kprobe missed a cause.",
                node_id=leader, endpoint=hostports[0]))
        elif not usable and worked and not failed and not _flips(leader, findings):
            out.append(finding(
                "ROUNDTRIP_DISAGREES", WARNING,
                f"kprobe judged broker {leader} unusable at {where}, yet {roundtrip.client} produced to and read "
                f"back from partition(s) {_numbers(worked)} it leads. The errors above about it may not hold for "
                "this client from here (another client, or another vantage, may still fail).",
                "Check the errors about that broker against your clients; if they work, please report the "
                "disagreement to kprobe's maintainers with this run's JSON report attached (--json).",
                node_id=leader, endpoint=hostports[0]))
    return out + out_steps


# The application findings that predict a failed step: its coordinator, or the internal topic behind it.
_PREDICTS = {"group": ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_UNREACHABLE", "OFFSETS_TOPIC_UNCREATABLE",
                       "OFFSETS_PARTITIONS_OFFLINE", "GROUP_PROTOCOL_UNSUPPORTED"),
             "transaction": ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_UNREACHABLE", "TRANSACTION_LOG_UNCREATABLE",
                             "TRANSACTION_LOG_OFFLINE", "TRANSACTION_LOG_UNDER_MIN_ISR")}


def _step_findings(roundtrip: Roundtrip, findings: Sequence[Finding]) -> list[Finding]:
    """ROUNDTRIP_STEP_FAILED: the application's group or transaction path, tried through a twin id, failed."""
    out = []
    for step in (roundtrip.group, roundtrip.transaction):
        if step is None or step.status != "failed":
            continue
        topic = OFFSETS_TOPIC if step.kind == "group" else TRANSACTIONS_TOPIC
        what = (f"joining and committing as your group {step.key!r} would" if step.kind == "group"
                else f"committing a transaction as your transactional id {step.key!r} would")
        predicted = any(f.code in _PREDICTS[step.kind] and f.severity == ERROR for f in findings)
        out.append(finding(
            "ROUNDTRIP_STEP_FAILED", ERROR,
            f"{roundtrip.client} failed at {what} (through {step.twin!r}, placed on the same partition "
            f"{step.partition} of {topic}, so the same coordinator): {step.error}. "
            + ("The findings above say why." if predicted else
               "kprobe found that coordinator usable: a cause it missed, or the cluster changed meanwhile."),
            "Act on the coordinator's findings above." if predicted else
            "Believe the step; please report it to kprobe's maintainers with this run's JSON report (--json)."))
    return out


# Errors whose harm reaches past the broker they name: a broker advertising a controller's endpoint sends
# clients' metadata requests there, and both the Java producer and librdkafka then sometimes fail records
# of other brokers' partitions too (measured, tests/runs/test_probe_agreement.py). A loss elsewhere is explained.
_SPILLING = ("ENDPOINT_IS_CONTROLLER",)

# Where the client's metadata flips between two listeners' views, a record to that broker gets through
# when the last refresh came from the listener that advertises it well: a success by luck, not a verdict
# contradicted (the finding already says clients flip).
_FLIPS = ("ENDPOINT_ADVERTISES_DIFFERENTLY",)


def _flips(leader: int, findings: Sequence[Finding]) -> bool:
    return any(f.code in _FLIPS and f.node_id == leader for f in findings)


def _verdict(leader: int, endpoints: Sequence[EndpointResult],
             findings: Sequence[Finding]) -> tuple[bool, list[str]] | None:
    """Whether every endpoint advertised for `leader` is usable (True) or none is (False); None otherwise.

    Several bootstraps on different listeners advertise several endpoints per broker, and a client
    uses the one of the listener it reached: only an agreeing set predicts its outcome.
    """
    mine = [r for r in endpoints if r.endpoint.node_id == leader]
    if not mine:
        return None
    judged = {is_usable(r, findings) for r in mine}
    if len(judged) != 1:
        return None
    return judged.pop(), [r.endpoint.hostport for r in mine]


def _numbers(partitions: Sequence[PartitionRoundtrip]) -> str:
    numbers = [str(p.partition) for p in partitions]
    return ", ".join(numbers[:20]) + (f" and {len(numbers) - 20} more" if len(numbers) > 20 else "")
