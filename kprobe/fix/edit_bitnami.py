"""The change written into Bitnami Kafka chart values: `externalAccess.*`, and nothing else.

The chart gives each pod an EXTERNAL listener when `externalAccess.enabled` is true, advertising its own
Service's address, per role (`controller` for the controller-eligible pods that are brokers too,
`broker` for the broker-only ones) under `externalAccess.<role>.service`:
- NodePort: the host is `domain` (one for every pod; `externalIPs[i]` where each pod has its own) and
  the port `nodePorts[i]`;
- LoadBalancer: the host is `loadBalancerIPs[i]`, the port `ports.external` (one for every pod).
A replaced address sets those keys for the broker's pod (a list written whole, each pod in order). An
added listener turns external access on for the roles whose pods need it: NodePort at the node the
clients reached, with a new node port per pod, or LoadBalancer with the chart's auto-discovery of the
addresses (and the RBAC it needs). `listeners.*`, the client and inter-broker listeners, are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kprobe.check.deployments.bitnami import DEFAULTS, merged
from kprobe.check.listeners import Deployment
from kprobe.errors import UsageError
from kprobe.fix.kubernetes import NODE_PORTS, pod_of
from kprobe.fix.model import Change, ListenerEdit
from kprobe.fix.yamltext import YamlText


def edit_bitnami(dep: Deployment, path: str, text: str, edits: Sequence[ListenerEdit]) -> tuple[str, list[Change]]:
    """The values' new text and each setting changed."""
    doc = YamlText(path, text)
    values = merged(DEFAULTS, doc.value([]) or {})
    pods: dict[str, int] = {}
    for broker in dep.brokers:
        if broker.is_broker:
            role, index = pod_of(broker)
            pods[role] = max(pods.get(role, 0), index + 1)
    changes: list[Change] = []
    by_role: dict[str, list[ListenerEdit]] = {}
    for edit in edits:
        broker = next(b for b in dep.brokers if b.name == edit.broker)
        by_role.setdefault(pod_of(broker)[0], []).append(edit)
    for role, mine in by_role.items():
        service = values["externalAccess"].get(role, {}).get("service", {}) or {}
        replaced = [e for e in mine if e.action == "replace"]
        added = [e for e in mine if e.action == "add"]
        if replaced:
            changes += _replace(doc, dep, role, service, pods[role], replaced)
        if added:
            changes += _add(doc, dep, role, values, pods[role], added)
    return doc.text, changes


def _index(dep: Deployment, edit: ListenerEdit) -> int:
    return pod_of(next(b for b in dep.brokers if b.name == edit.broker))[1]


def _change(edit: ListenerEdit, setting: str, old: Any, new: Any) -> Change:
    return Change(broker=edit.broker, node_id=edit.node_id, listener=edit.listener, action=edit.action,
                  setting=setting, old=None if old in (None, "", []) else str(old), new=str(new))


def _replace(doc: YamlText, dep: Deployment, role: str, service: dict[str, Any], count: int,
             edits: list[ListenerEdit]) -> list[Change]:
    """Each broker's advertised host and port, in its role's external Service settings."""
    base: list[str] = ["externalAccess", role, "service"]
    kind = str(service.get("type", "LoadBalancer"))
    changes: list[Change] = []
    hosts = {_index(dep, e): e.new.rpartition(":")[0].strip("[]") for e in edits
             if e.new.rpartition(":")[0].lower() != (e.old or "").rpartition(":")[0].lower()}
    ports = {_index(dep, e): int(e.new.rpartition(":")[2]) for e in edits
             if e.new.rpartition(":")[2] != (e.old or "").rpartition(":")[2]}
    first = {_index(dep, e): e for e in edits}
    if hosts:
        if kind == "LoadBalancer":
            changes += _per_pod(doc, base, "loadBalancerIPs", service, count, hosts, first)
        elif kind == "NodePort" and not service.get("domain") and service.get("externalIPs"):
            changes += _per_pod(doc, base, "externalIPs", service, count, hosts, first)
        elif len(set(hosts.values())) == 1:
            host = next(iter(hosts.values()))
            doc.set([*base, "domain"], host)
            changes += [_change(first[i], ".".join([*base, "domain"]), service.get("domain"), host) for i in hosts]
        else:
            raise UsageError(f"{doc.path}: externalAccess.{role}.service.domain is one host for every pod, and the "
                             f"brokers need {len(set(hosts.values()))}: give each its own with "
                             f"externalAccess.{role}.service.externalIPs by hand")
    if ports:
        if kind == "NodePort":
            changes += _per_pod(doc, base, "nodePorts", service, count, ports, first)
        else:
            wanted = set(ports.values())
            if len(wanted) != 1 or len(ports) != count:
                raise UsageError(f"{doc.path}: externalAccess.{role}.service.ports.external is one port for every "
                                 "pod; the brokers need different ones: a LoadBalancer cannot advertise them")
            port = wanted.pop()
            doc.set([*base, "ports", "external"], port)
            old = (service.get("ports") or {}).get("external")
            changes += [_change(first[i], ".".join([*base, "ports", "external"]), old, port) for i in ports]
    return changes


def _per_pod(doc: YamlText, base: list[str], key: str, service: dict[str, Any], count: int,
             wanted: Mapping[int, object], edits: dict[int, ListenerEdit]) -> list[Change]:
    """A per-pod list with some pods' entries changed; every pod must keep an entry, in order."""
    current = list(service.get(key) or [])
    missing = [i for i in range(count) if i >= len(current) and i not in wanted]
    if missing:
        raise UsageError(f"{doc.path}: {'.'.join([*base, key])} needs an entry per pod, and pod {missing[0]}'s is "
                         "not in the values nor in the reports: write the list by hand")
    new = [wanted.get(i, current[i] if i < len(current) else None) for i in range(count)]
    doc.set_list([*base, key], new)
    return [_change(edits[i], f"{'.'.join([*base, key])}[{i}]", current[i] if i < len(current) else None, wanted[i])
            for i in sorted(wanted)]


def _add(doc: YamlText, dep: Deployment, role: str, values: dict[str, Any], count: int,
         edits: list[ListenerEdit]) -> list[Change]:
    """External access turned on for this role's pods: NodePort at the node the clients reached, or LoadBalancer."""
    ext = values["externalAccess"]
    base = ["externalAccess", role, "service"]
    first = edits[0]
    changes = []
    if not ext.get("enabled"):
        doc.set(["externalAccess", "enabled"], True)
        changes.append(_change(first, "externalAccess.enabled", ext.get("enabled"), "true"))
    old_type = ((ext.get(role) or {}).get("service") or {}).get("type")
    if first.exposure == "nodeport":
        doc.set([*base, "type"], "NodePort")
        changes.append(_change(first, ".".join([*base, "type"]), old_type, "NodePort"))
        ports = {_index(dep, e): int(e.new.rpartition(":")[2]) for e in edits}
        taken = set(ports.values())
        for index in range(count):  # the chart wants a node port for every pod of the role
            if index not in ports:
                port = next(p for p in NODE_PORTS if p > max(taken) and p not in taken)
                ports[index] = port
                taken.add(port)
        doc.set_list([*base, "nodePorts"], [ports[i] for i in range(count)])
        changes += [_change(e, f"{'.'.join([*base, 'nodePorts'])}[{_index(dep, e)}]", None, ports[_index(dep, e)])
                    for e in edits]
        hosts = {_index(dep, e): e.new.rpartition(":")[0].strip("[]") for e in edits}
        if len(set(hosts.values())) == 1:
            host = next(iter(hosts.values()))
            doc.set([*base, "domain"], host)
            changes.append(_change(first, ".".join([*base, "domain"]), None, host))
        else:
            if len(hosts) != count:
                raise UsageError(f"{doc.path}: the pods of {role} were reached at different nodes and some not at "
                                 f"all: set externalAccess.{role}.service.domain by hand")
            doc.set_list([*base, "externalIPs"], [hosts[i] for i in range(count)])
            changes += [_change(e, f"{'.'.join([*base, 'externalIPs'])}[{i}]", None, h) for i, h in hosts.items()
                        for e in edits if _index(dep, e) == i]
        return changes
    doc.set([*base, "type"], "LoadBalancer")
    changes.append(_change(first, ".".join([*base, "type"]), old_type, "LoadBalancer"))
    for setting in (["externalAccess", "autoDiscovery", "enabled"], ["rbac", "create"],
                    [role, "automountServiceAccountToken"]):
        doc.set(setting, True)
        changes.append(_change(first, ".".join(setting), None, "true"))
    return changes
