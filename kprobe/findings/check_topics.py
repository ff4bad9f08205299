"""`kprobe check`'s rules for the internal topics behind groups and transactions, from configuration alone.

A consumer in a group reads only through its group coordinator, a transactional producer starts only
through its transaction coordinator, and each serves only once its internal topic exists. A broker
creates `__consumer_offsets` or `__transaction_state` when a client first asks it for a coordinator,
with its own replication factor, and fails for as long as the cluster has fewer brokers than that: the
most common single-broker mistake, written in the file before anything runs. The live probe names the
same gap OFFSETS_TOPIC_UNCREATABLE and TRANSACTION_LOG_UNCREATABLE (kprobe.findings.application); here
it is predicted wherever the file says how many brokers there are (`Deployment.broker_count`). Apart
from the listener rules (kprobe.findings.check) because it judges other settings by another measure:
the cluster's size, not a client's network. Pure: a `Deployment` in, findings out.
"""

from __future__ import annotations

from collections import defaultdict

from kprobe.check.listeners import Broker, Deployment
from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.models import OFFSETS_TOPIC, TRANSACTIONS_TOPIC, Finding, Severity

_OFFSETS_RF, _TXN_RF, _TXN_ISR = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                                  "transaction.state.log.min.isr")
_MEETS = {
    OFFSETS_TOPIC: "consumers in a group (any client with a group.id) find no group coordinator "
                   "(COORDINATOR_NOT_AVAILABLE; \"group coordinator is unavailable\") and read nothing, while "
                   "producers work",
    TRANSACTIONS_TOPIC: "transactional producers time out in initTransactions(), while plain producers and consumers "
                        "work",
}
# What `kprobe probe` calls the same gap once the cluster runs.
_LIVE = {OFFSETS_TOPIC: "OFFSETS_TOPIC_UNCREATABLE", TRANSACTIONS_TOPIC: "TRANSACTION_LOG_UNCREATABLE"}
_RUNS = {"properties": "these server.properties files run", "compose": "this Compose file runs",
         "strimzi": "this Kafka resource runs", "bitnami": "these chart values run"}


def internal_topic_findings(dep: Deployment) -> list[Finding]:
    """INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS and TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION, one per topic.

    Whichever broker a client asks first creates the topic with its own settings, so the topic can never
    be created only when every broker's replication factor exceeds the brokers: where some broker's fits,
    a lookup it answers creates the topic and the others use it. The broker count must come from the file
    (`Deployment.broker_count`); a lone server.properties of a larger cluster gives none, and no prediction.
    A min ISR above the replication factor needs no count: the topic would be created, and its writes
    refused. A setting Kafka would not take (a template, an empty variable) predicts nothing.
    """
    brokers = [b for b in dep.brokers if b.is_broker]
    if not brokers:
        return []
    out: list[Finding] = []
    for topic, rf_key, isr_key, severity in ((OFFSETS_TOPIC, _OFFSETS_RF, None, ERROR),
                                             (TRANSACTIONS_TOPIC, _TXN_RF, _TXN_ISR, WARNING)):
        keys = (rf_key, isr_key) if isr_key else (rf_key,)
        if any(k in b.internal_topics.unreadable for b in brokers for k in keys):
            continue
        factors = [b.internal_topics.effective(rf_key) for b in brokers]
        count = dep.broker_count
        if count is not None and min(factors) > count:
            out.append(_uncreatable(dep, brokers, topic, rf_key, isr_key, severity, count))
            continue
        if isr_key is not None and all(b.internal_topics.effective(isr_key) > b.internal_topics.effective(rf_key)
                                       for b in brokers):
            out.append(_min_isr_above(dep, brokers, rf_key, isr_key))
    return out


def _uncreatable(dep: Deployment, brokers: list[Broker], topic: str, rf_key: str, isr_key: str | None,
                 severity: Severity, count: int) -> Finding:
    lowest = [(rf_key, count)]
    if isr_key is not None and max(b.internal_topics.effective(isr_key) for b in brokers) > count:
        lowest.append((isr_key, count))
    needed = min(b.internal_topics.effective(rf_key) for b in brokers)
    return finding(
        "INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", severity,
        f"{topic} can never be created: {_values(brokers, rf_key)} asks for more replicas than the "
        f"{_brokers(dep, brokers, count)}. A broker creates the topic when a client first asks it for a coordinator "
        f"(FindCoordinator) and fails every time, so {_MEETS[topic]}. Once deployed, kprobe probe reports it as "
        f"{_LIVE[topic]}.",
        f"Set {_assignments(dep, brokers, lowest)} and restart {_them(brokers)}, or run at least {needed} brokers. "
        "The topic is created with the settings in force at the first coordinator lookup after that.")


def _min_isr_above(dep: Deployment, brokers: list[Broker], rf_key: str, isr_key: str) -> Finding:
    factor = min(b.internal_topics.effective(rf_key) for b in brokers)
    return finding(
        "TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION", WARNING,
        f"{TRANSACTIONS_TOPIC} will be created with {_values(brokers, rf_key)} but "
        f"{_values(brokers, isr_key)}: more in-sync replicas than it will have. Its writes will be refused "
        "(NOT_ENOUGH_REPLICAS), so transactional producers fail or time out in initTransactions(), while plain "
        "producers and consumers work. Once deployed, kprobe probe reports it as TRANSACTION_LOG_UNDER_MIN_ISR.",
        f"Set {_assignments(dep, brokers, [(isr_key, factor)])} (or raise {rf_key}, with as many brokers) and "
        f"restart {_them(brokers)} before the topic is first created: an existing topic keeps its "
        "min.insync.replicas (kafka-configs.sh --alter --entity-type topics changes it).")


def _them(brokers: list[Broker]) -> str:
    return "the broker" if len(brokers) == 1 else "the brokers"


def _values(brokers: list[Broker], prop: str) -> str:
    """`prop=3 (Kafka's default: ...)`, or per broker where the brokers differ."""
    groups: dict[tuple[int, bool], list[str]] = defaultdict(list)
    for b in brokers:
        groups[(b.internal_topics.effective(prop), b.internal_topics.value(prop) is None)].append(b.name)

    def one(value: int, default: bool) -> str:
        return f"{prop}={value}" + (" (Kafka's default: the file leaves it unset)" if default else "")

    if len(groups) == 1:
        [(value, default)] = groups
        return one(value, default)
    return "; ".join(f"{one(value, default)} on {', '.join(names)}" for (value, default), names in groups.items())


def _brokers(dep: Deployment, brokers: list[Broker], count: int) -> str:
    """How many brokers the file runs, and how it says so."""
    names = ", ".join(b.name for b in brokers[:5]) + (", ..." if len(brokers) > 5 else "")
    if dep.kind == "properties" and len(dep.brokers) == 1:
        return f"one broker of this one-node KRaft cluster ({names}: broker and controller, its quorum itself)"
    return f"{count} broker{'' if count == 1 else 's'} {_RUNS[dep.kind]} ({names})"


def _assignments(dep: Deployment, brokers: list[Broker], settings: list[tuple[str, int]]) -> str:
    """The settings to write, spelt as the file spells them, and where."""
    if dep.kind == "strimzi":
        return " and ".join(f"{k}: {v}" for k, v in settings) + " in spec.kafka.config of the Kafka resource"
    if dep.kind == "bitnami":
        lines = " and ".join(f"{k}={v}" for k, v in settings)
        pairs = " and ".join(f"{k}: {v}" for k, v in settings)
        if dep.settings_block == "config":
            return f"{lines} in config (the whole server.properties these values give the chart)"
        if dep.settings_block == "extraConfig":
            return f"{lines} in extraConfig (one line each)"
        if dep.settings_block == "overrideConfiguration":
            return f"{pairs} under overrideConfiguration"
        return (f"{pairs} under overrideConfiguration (the chart from version 32, Kafka 4; in earlier charts, "
                f"{lines} in extraConfig)")
    spelt = " and ".join(f"{brokers[0].setting(k)}={v}" for k, v in settings)
    if dep.kind == "compose":
        where = f"service {brokers[0].name}'s environment" if len(brokers) == 1 else "every Kafka service's environment"
    else:
        where = brokers[0].name if len(brokers) == 1 else "every server.properties"
    return f"{spelt} in {where}"
