"""server.properties files: one broker each, read as Java reads a properties file.

Several files given together are one cluster (one broker per file): that is how duplicate endpoints
across brokers, or two brokers advertising one name, are seen before deployment. The network a
plain server.properties runs on is not in the file, so its listeners are judged from here (the
machine kprobe runs on, or the network --nameserver stands for).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kprobe.check.deployments.common import broker_from_settings, secrets_of
from kprobe.check.listeners import Broker, Deployment
from kprobe.clientprops.javaprops import java_logical_lines, parse_java_properties
from kprobe.errors import UsageError
from kprobe.hostport import is_loopback_ip, is_loopback_name

# java.lang.String.trim(): every character up to U+0020, the control characters included.
_JAVA_TRIM = "".join(chr(code) for code in range(0x21))


def logical_lines(text: str) -> list[str]:
    """Non-comment lines with backslash continuations joined, as java.util.Properties reads them."""
    return java_logical_lines(text)


def parse_properties(text: str, *, source: str = "server.properties") -> dict[str, str]:
    r"""The broker's settings as Kafka sees them: java.util.Properties' pairs, each value trimmed.

    Kafka's ConfigDef trims every value it parses (String.trim), so `listeners=...   ` is the
    listeners without the spaces; keys are Java's, later keys win. A malformed `\u` escape is bad
    input naming the line of `source`.
    """
    return {key: value.strip(_JAVA_TRIM) for key, value in parse_java_properties(text, source=source).items()}


def read_properties(files: Sequence[tuple[str, str]]) -> Deployment:
    """One Deployment of one broker per file (a cluster), judged from here.

    Several files are the cluster as the user gives it, so its brokers are counted; one file counts as
    a cluster only when it is a one-node KRaft cluster (broker and controller, its quorum itself). Any
    other single file is one broker of a cluster the file does not size.
    """
    brokers = []
    secrets: list[str] = []
    alone = False
    for path, text in files:
        settings = parse_properties(text, source=path)
        secrets += secrets_of(settings)
        if not any(k in settings for k in ("listeners", "advertised.listeners", "process.roles", "node.id",
                                             "broker.id", "zookeeper.connect")):
            raise UsageError(f"{path}: no broker settings (listeners, advertised.listeners, process.roles, node.id): "
                             "is it a client's properties file? kprobe check reads a broker's server.properties")
        broker = broker_from_settings(settings, name=Path(path).name, source=path, where=path)
        brokers.append(broker)
        alone = one_node_kraft(settings, broker)
    notes: tuple[str, ...] = ()
    if any(b.listeners and b.listeners[0].advertised_from == "listeners" for b in brokers):
        notes = ("advertised.listeners is unset in some file, so Kafka advertises the listeners themselves "
                 "(an empty host as the machine's own name)",)
    count = sum(b.is_broker for b in brokers) if len(brokers) > 1 or alone else None
    return Deployment(source=", ".join(p for p, _ in files), kind="properties", platform="host",
                      brokers=tuple(brokers), notes=notes, secrets=tuple(secrets), broker_count=count)


def one_node_kraft(settings: dict[str, str], broker: Broker) -> bool:
    """Whether one server.properties is a whole cluster: broker and controller, its quorum only itself.

    `controller.quorum.voters` names itself when its one voter has this node's id;
    `controller.quorum.bootstrap.servers` when its one address is a controller listener's own (the same
    port, and the listener's host or a loopback name: Kafka's own server.properties writes
    localhost:9093). Any other address may be another machine's, so the cluster's size stays unknown.
    """
    if not broker.is_broker or "controller" not in broker.roles or broker.node_id is None:
        return False
    voters = [v.strip() for v in settings.get("controller.quorum.voters", "").split(",") if v.strip()]
    if voters:
        node, _, _ = voters[0].partition("@")
        return len(voters) == 1 and node.strip() == str(broker.node_id)
    servers = [v.strip() for v in settings.get("controller.quorum.bootstrap.servers", "").split(",") if v.strip()]
    if len(servers) != 1:
        return False
    host, _, port = servers[0].rpartition(":")
    host = host.strip("[]").lower()
    return any(lst.controller and lst.bind is not None and str(lst.bind.port) == port.strip()
               and (host == lst.bind.host.lower() or is_loopback_name(host) or is_loopback_ip(host))
               for lst in broker.listeners)
