"""A Strimzi `Kafka` custom resource and its `KafkaNodePool`s: the listeners the operator will render.

Strimzi writes each broker's listener settings itself, so they are read here as the operator builds
them (its KafkaBrokerConfigurationBuilder and ListenersUtils), not from server.properties:
- every listener `spec.kafka.listeners[]` becomes `<NAME>-<PORT>` (PLAIN-9092), SSL where `tls: true`,
  SASL where its authentication is SCRAM, OAuth or custom SASL;
- an `internal` listener advertises each pod under the headless service,
  `<pod>.<cluster>-kafka-brokers.<namespace>.svc` (`.cluster.local` with `useServiceDnsDomain`);
- a `loadbalancer`, `nodeport`, `route` or `ingress` listener advertises an address the platform gives
  at deploy time (a load balancer's, a node's), unless `configuration.brokers[]` sets `advertisedHost`
  / `host` for each broker;
- the operator's own REPLICATION-9091 listener carries inter-broker traffic and CONTROLPLANE-9090 the
  controllers'.
`spec.kafka.config` is every broker's: the operator sets none of the internal topics' settings, so what it
leaves out is Kafka's default, and the brokers are the replicas of the node pools with the broker role (or
`spec.kafka.replicas` without pools).
Pods are `<cluster>-<pool>-<node id>` with node pools, `<cluster>-kafka-<n>` without; node ids go up
from 0 across the pools in the file's order (or as a pool's `strimzi.io/next-node-ids` says). Only
kafka.strimzi.io/v1beta2 and v1 are read: earlier versions describe listeners differently.
"""

from __future__ import annotations

import re
from typing import Any

from kprobe.check.deployments.common import excerpt, internal_topic_settings, mapping, node_count, secrets_of, sequence
from kprobe.check.listeners import Broker, ClientNetwork, Deployment, Exposure, HostPort, Listener
from kprobe.errors import UsageError

API_VERSIONS = ("kafka.strimzi.io/v1beta2", "kafka.strimzi.io/v1")
EXTERNAL: tuple[Exposure, ...] = ("loadbalancer", "nodeport", "route", "ingress")
_TYPES = ("internal", "cluster-ip", *EXTERNAL)
_IDS = re.compile(r"^\s*\[(?P<body>[0-9,\s-]*)\]\s*$")


def read_strimzi(path: str, documents: list[Any]) -> Deployment:
    """The brokers of the file's Kafka resource, with its node pools."""
    maps = [d for d in documents if isinstance(d, dict)]
    for d in maps:
        if d.get("kind") in ("Kafka", "KafkaNodePool") and d.get("apiVersion") not in API_VERSIONS:
            version = excerpt(d.get("apiVersion"), quote=False)
            raise UsageError(f"{path}: {d['kind']} {_name(d)} has apiVersion {version}: kprobe check "
                             f"reads {' and '.join(API_VERSIONS)} (convert older resources with Strimzi's "
                             "api-conversion tool)")
    kafkas = [d for d in maps if d.get("kind") == "Kafka"]
    if len(kafkas) != 1:
        raise UsageError(f"{path}: {'no' if not kafkas else len(kafkas)} Kafka resources: give one Kafka resource "
                         "(with its KafkaNodePools) per file")
    kafka = kafkas[0]
    cluster = _name(kafka)
    namespace = str(mapping(kafka.get("metadata"), f"{path}: Kafka metadata").get("namespace") or "<namespace>")
    spec = mapping(kafka.get("spec"), f"{path}: Kafka {cluster} spec")
    kspec = spec.get("kafka")
    if not isinstance(kspec, dict):
        raise UsageError(f"{path}: Kafka {cluster} has no spec.kafka map")
    raw_listeners = kspec.get("listeners")
    if not isinstance(raw_listeners, list) or not raw_listeners:
        raise UsageError(f"{path}: Kafka {cluster}: spec.kafka.listeners is not a list of listeners")
    pools = [d for d in maps if d.get("kind") == "KafkaNodePool"
             and str(_labels(path, d).get("strimzi.io/cluster")) == cluster]
    nodes = _nodes(path, cluster, kspec, pools)
    service = f"{cluster}-kafka-brokers"
    bootstrap = f"{cluster}-kafka-bootstrap.{namespace}.svc"
    config = {str(k): v for k, v in mapping(kspec.get("config"), f"{path}: spec.kafka.config").items()}
    secrets = secrets_of(config)
    # One spec.kafka.config for every broker (node pools set none): what the operator writes beside its own.
    internal = internal_topic_settings(config)
    names = [bootstrap, f"{bootstrap}.cluster.local"]
    brokers = []
    for pod, node_id, roles in nodes:
        fqdn = f"{pod}.{service}.{namespace}.svc"
        names += [fqdn, f"{fqdn}.cluster.local"]
        listeners: list[Listener] = []
        if "broker" in roles:
            listeners.append(Listener(name="REPLICATION-9091", protocol="SSL",
                                      bind=HostPort(host="0.0.0.0", port=9091),
                                      advertised=HostPort(host=fqdn, port=9091), advertised_from="operator",
                                      inter_broker=True, exposure="internal"))
            for index, raw in enumerate(raw_listeners):
                listener, found = _listener(path, cluster, index, raw, fqdn, node_id, bootstrap)
                secrets += found
                listeners.append(listener)
        if "controller" in roles:
            listeners.append(Listener(name="CONTROLPLANE-9090", protocol="SSL",
                                      bind=HostPort(host="0.0.0.0", port=9090), advertised=None,
                                      advertised_from="operator", controller=True, exposure="internal"))
        brokers.append(Broker(
            name=pod, source=path, node_id=node_id, roles=roles, listeners=tuple(listeners),
            own_names=(fqdn, f"{fqdn}.cluster.local"), hostname=pod,
            listener_names=tuple(x.name for x in listeners),
            advertised_names=tuple(x.name for x in listeners if x.advertised is not None),
            protocol_map=tuple((x.name, x.protocol or "PLAINTEXT") for x in listeners),
            inter_broker_name="REPLICATION-9091" if "broker" in roles else None,
            controller_names=("CONTROLPLANE-9090",) if "controller" in roles else (), internal_topics=internal))
    notes = [f"pods and node ids as Strimzi names them for a new cluster {cluster}"
             + ("; the namespace is the one it is applied to" if namespace == "<namespace>" else "")]
    return Deployment(source=path, kind="strimzi", platform="kubernetes", brokers=tuple(brokers),
                      network_names=(("cluster", tuple(names)),), operator="strimzi", notes=tuple(notes),
                      secrets=tuple(str(s) for s in secrets), broker_count=sum(b.is_broker for b in brokers),
                      settings_block="spec.kafka.config")


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    return excerpt((metadata.get("name") if isinstance(metadata, dict) else None) or "<unnamed>", 253, quote=False)


def _labels(path: str, document: dict[str, Any]) -> dict[str, Any]:
    kind = excerpt(document.get("kind"), 40, quote=False)
    metadata = mapping(document.get("metadata"), f"{path}: {kind} metadata")
    return mapping(metadata.get("labels"), f"{path}: {kind} {_name(document)} metadata.labels")


def _nodes(path: str, cluster: str, kspec: dict[str, Any],
           pools: list[dict[str, Any]]) -> list[tuple[str, int, tuple[str, ...]]]:
    """(pod, node id, roles) of every node: from the node pools, or spec.kafka.replicas without them."""
    out: list[tuple[str, int, tuple[str, ...]]] = []
    if not pools:
        replicas = node_count(path, _int(path, kspec.get("replicas", 0), f"Kafka {cluster} spec.kafka.replicas"),
                              f"Kafka {cluster} spec.kafka.replicas")
        if replicas < 1:
            raise UsageError(f"{path}: Kafka {cluster} has no KafkaNodePool (label strimzi.io/cluster: {cluster}) "
                             "and no spec.kafka.replicas: no broker to check")
        return [(f"{cluster}-kafka-{i}", i, ("broker",)) for i in range(replicas)]
    next_id = 0
    taken: set[int] = set()
    for pool in pools:
        name = _name(pool)
        pspec = mapping(pool.get("spec"), f"{path}: KafkaNodePool {name} spec")
        replicas = node_count(path, _int(path, pspec.get("replicas", 0), f"KafkaNodePool {name} spec.replicas"),
                              f"KafkaNodePool {name} spec.replicas")
        roles = tuple(str(r) for r in (sequence(pspec.get("roles"), f"{path}: KafkaNodePool {name} spec.roles")
                                       or ["broker"]))
        metadata = mapping(pool.get("metadata"), f"{path}: KafkaNodePool {name} metadata")
        annotations = mapping(metadata.get("annotations"), f"{path}: KafkaNodePool {name} metadata.annotations")
        wanted = _next_ids(path, name, annotations.get("strimzi.io/next-node-ids"))
        for _ in range(replicas):
            while wanted and wanted[0] in taken:
                wanted.pop(0)
            if wanted:
                node_id = wanted.pop(0)
            else:
                while next_id in taken:
                    next_id += 1
                node_id = next_id
            taken.add(node_id)
            out.append((f"{cluster}-{name}-{node_id}", node_id, roles))
    return out


def _next_ids(path: str, pool: str, value: Any) -> list[int]:
    """`[0-2]`, `[10, 11]`, `[1000-1002, 5]` (Strimzi's annotation) as a list; absent: empty."""
    if value is None:
        return []
    match = _IDS.match(value) if isinstance(value, str) else None
    if not match:
        raise UsageError(f"{path}: KafkaNodePool {pool}: bad strimzi.io/next-node-ids {excerpt(value)}")
    ids: list[int] = []
    for part in match.group("body").split(","):
        first, sep, last = part.strip().partition("-")
        if first:
            try:
                low, high = int(first), int(last) if sep else int(first)
            except ValueError:
                raise UsageError(f"{path}: KafkaNodePool {pool}: bad strimzi.io/next-node-ids {excerpt(value)}"
                                 ) from None
            node_count(path, len(ids) + high - low + 1, f"KafkaNodePool {pool}: the number of strimzi.io/next-node-ids")
            ids.extend(range(low, high + 1))
    return ids


def _int(path: str, value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{path}: {what} is not a number ({excerpt(value, 40)})") from None


def _listener(path: str, cluster: str, index: int, raw: Any, fqdn: str, node_id: int,
              bootstrap: str) -> tuple[Listener, list[str]]:
    """One spec.kafka.listeners[] entry as Strimzi renders it for one broker."""
    where = f"{path}: Kafka {cluster} spec.kafka.listeners[{index}]"
    if not isinstance(raw, dict) or "name" not in raw or "port" not in raw or "type" not in raw:
        raise UsageError(f"{where}: give name, port and type")
    kind = raw["type"]
    if kind not in _TYPES:
        raise UsageError(f"{where}: unknown type {excerpt(kind, 40)}: Strimzi's are {', '.join(_TYPES)}")
    port = _int(path, raw["port"], f"spec.kafka.listeners[{index}].port")
    name = f"{str(raw['name']).upper()}-{port}"
    auth = mapping(raw.get("authentication"), f"{where}.authentication")
    sasl = auth.get("type") in ("scram-sha-512", "oauth") or (auth.get("type") == "custom" and auth.get("sasl"))
    protocol = ("SASL_SSL" if sasl else "SSL") if raw.get("tls") else ("SASL_PLAINTEXT" if sasl else "PLAINTEXT")
    conf = mapping(raw.get("configuration"), f"{where}.configuration")
    secrets = secrets_of({str(k): v for k, v in mapping(auth.get("listenerConfig"),
                                                        f"{where}.authentication.listenerConfig").items()})
    exposure: Exposure = kind
    bootstraps: list[tuple[ClientNetwork, str]] = [("cluster", f"{bootstrap}:{port}")]
    if kind in ("internal", "cluster-ip"):
        internal = f"{fqdn}.cluster.local" if conf.get("useServiceDnsDomain") else fqdn
        return Listener(name=name, protocol=protocol, bind=HostPort(host="0.0.0.0", port=port),
                        advertised=HostPort(host=internal, port=port), advertised_from="operator", exposure=exposure,
                        bootstraps=tuple(bootstraps)), secrets
    mine = next((b for b in sequence(conf.get("brokers"), f"{where}.configuration.brokers")
                 if isinstance(b, dict) and b.get("broker") == node_id), {})
    host = mine.get("advertisedHost") or (mine.get("host") if kind in ("route", "ingress") else None)
    default_port = {"loadbalancer": port, "route": 443, "ingress": 443}.get(kind)
    adv_port = mine.get("advertisedPort") or (mine.get("nodePort") if kind == "nodeport" else None) or default_port
    boot = mapping(conf.get("bootstrap"), f"{where}.configuration.bootstrap")
    outside = boot.get("host") or boot.get("loadBalancerIP") or f"<the {kind} address of {cluster}'s bootstrap>"
    outside_port = {"route": 443, "ingress": 443}.get(kind) or boot.get("nodePort") or port
    bootstraps.append(("outside", f"{outside}:{outside_port}"))
    advertised = HostPort(host=str(host) if host else f"<the {kind} address of broker {node_id}>",
                          port=_int(path, adv_port, f"{where}: the advertised port") if adv_port else 0)
    return Listener(name=name, protocol=protocol, bind=HostPort(host="0.0.0.0", port=port), advertised=advertised,
                    advertised_from="operator", exposure=exposure, deploy_time=host is None or not adv_port,
                    bootstraps=tuple(bootstraps)), secrets
