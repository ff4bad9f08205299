"""The change written into a Strimzi `Kafka` resource: its `spec.kafka.listeners[]`, and nothing else.

- A replaced address is a broker's entry of the listener's `configuration.brokers[]` (`broker: <node id>`):
  `advertisedHost` where the host changes, `advertisedPort` where the port does (Strimzi's per-broker
  overrides of what it advertises); the entry, `brokers:` or `configuration:` are added when missing.
- An added listener is a new `listeners[]` entry after the others: its name, a port no listener uses,
  its type, `tls` and `authentication` as the listener its clients use today (so their protocol and
  credentials stay), and for a node port each broker's `advertisedHost`, `advertisedPort` and
  `nodePort`. Strimzi then makes its Services and rolls the brokers.
The node pools, `spec.kafka.config` and the operator's own REPLICATION and CONTROLPLANE listeners are
never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kprobe.check.listeners import Deployment, Listener
from kprobe.errors import UsageError
from kprobe.fix.kubernetes import NAMESPACE
from kprobe.fix.model import Change, ListenerEdit
from kprobe.fix.yamltext import Step, YamlText, copied, inline

LISTENERS: list[Step] = ["spec", "kafka", "listeners"]


def _is_kafka(node: Any) -> bool:
    import yaml

    return isinstance(node, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == "kind" and isinstance(v, yaml.ScalarNode) and v.value == "Kafka"
        for k, v in node.value)


def edit_strimzi(dep: Deployment, path: str, text: str, edits: Sequence[ListenerEdit]) -> tuple[str, list[Change]]:
    """The Kafka resource's new text and each setting changed."""
    doc = YamlText(path, text, pick=_is_kafka)
    changes: list[Change] = []
    for edit in edits:
        if edit.action == "replace":
            changes += _replace(doc, dep, edit)
    added: dict[str, list[ListenerEdit]] = {}
    for edit in edits:
        if edit.action == "add":
            added.setdefault(edit.listener, []).append(edit)
    for mine in added.values():
        changes += _add(doc, dep, mine)
    return doc.text, changes


def _index(doc: YamlText, kafka_name: str) -> int:
    """The position in spec.kafka.listeners of the listener Strimzi renders as `<NAME>-<PORT>`."""
    for i, raw in enumerate(doc.value(LISTENERS) or []):
        if isinstance(raw, dict) and f"{str(raw.get('name', '')).upper()}-{raw.get('port')}" == kafka_name:
            return i
    raise UsageError(f"{doc.path}: listener {kafka_name} is not in spec.kafka.listeners to edit")


def _replace(doc: YamlText, dep: Deployment, edit: ListenerEdit) -> list[Change]:
    """A broker's advertised host and port, set in its `configuration.brokers[]` entry."""
    index = _index(doc, edit.listener)
    raw = doc.value([*LISTENERS, index])
    where = f"spec.kafka.listeners[{raw.get('name')}].configuration.brokers[broker={edit.node_id}]"
    old_host, _, old_port = (edit.old or "").rpartition(":")
    new_host, _, new_port = edit.new.rpartition(":")
    want: dict[str, object] = {}
    if new_host.strip("[]").lower() != old_host.strip("[]").lower():
        want["advertisedHost"] = new_host.strip("[]")
    if new_port != old_port:
        want["advertisedPort"] = int(new_port)
    entries = doc.value([*LISTENERS, index, "configuration", "brokers"])
    mine = next((b for b in entries or [] if isinstance(b, dict) and b.get("broker") == edit.node_id), None)
    base: list[Step] = [*LISTENERS, index, "configuration", "brokers"]
    if mine is not None:
        for key, value in want.items():
            doc.set([*base, _broker(edit.node_id), key], value)
    elif entries:
        doc.append_items(base, [{"broker": edit.node_id, **want}])
    else:
        doc.set(base, [{"broker": edit.node_id, **want}])
    old = {"advertisedHost": old_host, "advertisedPort": old_port}
    return [Change(broker=edit.broker, node_id=edit.node_id, listener=edit.listener, action="replace",
                   setting=f"{where}.{key}", old=(str(mine.get(key)) if mine and key in mine else old[key]) or None,
                   new=str(value)) for key, value in want.items()]


def _broker(node_id: int) -> Any:
    return lambda item: isinstance(item, dict) and item.get("broker") == node_id


def _add(doc: YamlText, dep: Deployment, edits: list[ListenerEdit]) -> list[Change]:
    """One new listeners[] entry for all the brokers of these edits."""
    first = edits[0]
    name, _, port = first.listener.rpartition("-")
    source = _source(dep, first)
    entry: dict[str, object] = {"name": name.lower(), "port": int(port), "type": first.exposure or "internal"}
    node = None
    if source is not None:
        index = _index(doc, source.name)
        node = doc.find([*LISTENERS, index])
        tls = inline(doc.lines_of(node, "tls"))
        entry["tls"] = tls is not None and tls.lower() == "true"
        block = copied(doc.lines_of(node, "authentication"))
        if block is not None:
            entry["authentication"] = block
    else:
        entry["tls"] = first.protocol in ("SSL", "SASL_SSL")
    if first.exposure == "nodeport":
        brokers = []
        for edit in edits:
            host, _, node_port = edit.new.rpartition(":")
            brokers.append({"broker": edit.node_id, "advertisedHost": host.strip("[]"),
                            "advertisedPort": int(node_port), "nodePort": int(node_port)})
        entry["configuration"] = {"brokers": brokers}
    doc.append_items(LISTENERS, [entry])
    where = f"spec.kafka.listeners[{name.lower()}]"
    out = [Change(broker=e.broker, node_id=e.node_id, listener=e.listener, action="add", setting=where, old=None,
                  new=f"type {entry['type']}, port {port}" + (f", advertised {e.new}" if first.exposure == "nodeport"
                                                              else "")) for e in edits]
    return out


def _source(dep: Deployment, edit: ListenerEdit) -> Listener | None:
    """The listener whose clients the new one serves: the one advertising what the edit replaces."""
    broker = next((b for b in dep.brokers if b.name == edit.broker), None)
    if broker is None or edit.replaces is None:
        return None
    for lst in broker.listeners:
        if lst.advertised is None or lst.inter_broker or lst.controller:
            continue
        pattern = re.escape(lst.advertised.text.lower()).replace(re.escape(NAMESPACE), "[a-z0-9-]+")
        if re.fullmatch(pattern, edit.replaces.lower()):
            return lst
    return None
