"""Bitnami's Kafka chart values: the listeners the chart renders into each pod's configuration.

A values file is usually a few overrides of the chart's defaults (`helm install -f my-values.yaml`), so
the keys kprobe reads start from the chart's own defaults (bitnami/charts bitnami/kafka/values.yaml,
the KRaft chart: `listeners.client` CLIENT 9092, `interbroker` INTERNAL 9094, `controller` CONTROLLER
9093, `external` EXTERNAL 9095; three controller-eligible nodes that are brokers too; no broker-only
nodes; `externalAccess` off) and take the file's values over them. The chart advertises each pod as
`<fullname>-<role>-<n>.<fullname>-<role>-headless.<namespace>.svc.<clusterDomain>`, and with
`externalAccess.enabled` an EXTERNAL listener at each pod's own service address: a load balancer's
(given in `loadBalancerIPs` / `loadBalancerNames`, else known when deployed) or a node's with a node port.
`<fullname>` is the release name when it contains "kafka", else `<release>-kafka`: the release is
chosen at `helm install`, so kprobe assumes a release named kafka unless `fullnameOverride` says.
The chart sets none of the internal topics' settings (the pods run the server.properties it renders, not
the image's own), so the values' `config`, `extraConfig`, `extraConfigYaml` and `overrideConfiguration`
decide them, and Kafka's defaults apply to what they leave out.
"""

from __future__ import annotations

from typing import Any

from kprobe.check.deployments.common import excerpt, internal_topic_settings, mapping, node_count, secrets_of, sequence
from kprobe.check.listeners import Broker, ClientNetwork, Deployment, Exposure, HostPort, Listener, parse_listeners
from kprobe.errors import UsageError

DEFAULTS: dict[str, Any] = {
    "fullnameOverride": "",
    "nameOverride": "",
    "clusterDomain": "cluster.local",
    "listeners": {
        "client": {"name": "CLIENT", "containerPort": 9092, "protocol": "SASL_PLAINTEXT"},
        "controller": {"name": "CONTROLLER", "containerPort": 9093, "protocol": "SASL_PLAINTEXT"},
        "interbroker": {"name": "INTERNAL", "containerPort": 9094, "protocol": "SASL_PLAINTEXT"},
        "external": {"name": "EXTERNAL", "containerPort": 9095, "protocol": "SASL_PLAINTEXT"},
        "extraListeners": [],
        "advertisedListeners": "",
    },
    "controller": {"replicaCount": 3, "controllerOnly": False, "minId": 0},
    "broker": {"replicaCount": 0, "minId": 100},
    "service": {"ports": {"client": 9092}},
    "externalAccess": {
        "enabled": False,
        "autoDiscovery": {"enabled": False},
        "controller": {"forceExpose": False, "service": {"type": "LoadBalancer", "ports": {"external": 9094}}},
        "broker": {"service": {"type": "LoadBalancer", "ports": {"external": 9094}}},
    },
}
RELEASE = "kafka"


def merged(defaults: Any, values: Any) -> Any:
    """Helm's merge of a values file over the chart's defaults: maps deep, everything else replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        out = dict(defaults)
        for key, value in values.items():
            out[key] = merged(defaults.get(key), value) if key in defaults else value
        return out
    return defaults if values is None else values


def read_bitnami(path: str, document: Any) -> Deployment:
    """The pods the chart would run, with their listeners."""
    if not isinstance(document, dict):
        raise UsageError(f"{path}: chart values must be a map")
    values = merged(DEFAULTS, document)
    fullname = _fullname(values)
    namespace = "<namespace>"
    domain = str(values.get("clusterDomain") or "cluster.local")
    lst = mapping(values["listeners"], f"{path}: listeners")
    for role in ("client", "controller", "interbroker", "external"):
        mapping(lst.get(role), f"{path}: listeners.{role}", default_empty=False)
    ctrl = mapping(values["controller"], f"{path}: controller")
    brk = mapping(values["broker"], f"{path}: broker")
    controller_only = bool(ctrl.get("controllerOnly"))
    pods: list[tuple[str, str, int, tuple[str, ...], int]] = []
    for i in range(node_count(path, _int(path, ctrl.get("replicaCount"), "controller.replicaCount"),
                              "controller.replicaCount")):
        pods.append(("controller", f"{fullname}-controller-{i}", _int(path, ctrl.get("minId"), "controller.minId") + i,
                     ("controller",) if controller_only else ("broker", "controller"), i))
    for i in range(node_count(path, _int(path, brk.get("replicaCount"), "broker.replicaCount"), "broker.replicaCount")):
        pods.append(("broker", f"{fullname}-broker-{i}", _int(path, brk.get("minId"), "broker.minId") + i,
                     ("broker",), i))
    if not any("broker" in roles for _, _, _, roles, _ in pods):
        raise UsageError(f"{path}: no pod has the broker role (controller.replicaCount with controllerOnly, "
                         "broker.replicaCount): nothing serves clients")
    ext = mapping(values["externalAccess"], f"{path}: externalAccess")
    mapping(ext.get("controller"), f"{path}: externalAccess.controller")
    service_ports = mapping(mapping(values["service"], f"{path}: service").get("ports"), f"{path}: service.ports")
    client_port = _int(path, service_ports.get("client"), "service.ports.client")
    service_boot = f"{fullname}.{namespace}.svc.{domain}:{client_port}"
    names = [f"{fullname}.{namespace}.svc.{domain}", f"{fullname}.{namespace}.svc"]
    brokers = []
    override = str(lst.get("advertisedListeners") or "")
    internal = {role: internal_topic_settings(_kafka_config(path, values, role)) for role in ("controller", "broker")}
    for role, pod, node_id, roles, index in pods:
        fqdn = f"{pod}.{fullname}-{role}-headless.{namespace}.svc.{domain}"
        names += [fqdn, fqdn.removesuffix("." + domain)]
        listeners: list[Listener] = []
        exposed = bool(ext.get("enabled")) and "broker" in roles and (
            role == "broker" or not controller_only or (ext.get("controller") or {}).get("forceExpose"))
        if "broker" in roles:
            for key in ("client", "interbroker"):
                spec = lst[key]
                port = _int(path, spec.get("containerPort"), f"listeners.{key}.containerPort")
                listeners.append(Listener(
                    name=str(spec["name"]).upper(), protocol=str(spec.get("protocol", "PLAINTEXT")).upper(),
                    bind=HostPort(host="", port=port), advertised=HostPort(host=fqdn, port=port),
                    advertised_from="operator", inter_broker=key == "interbroker", exposure="internal",
                    bootstraps=(("cluster", service_boot),) if key == "client" else ()))
            if exposed:
                listeners.append(_external(path, lst["external"], ext, role, index, node_id, fullname))
        if "controller" in roles:
            spec = lst["controller"]
            port = _int(path, spec.get("containerPort"), "listeners.controller.containerPort")
            listeners.append(Listener(name=str(spec["name"]).upper(), protocol=str(spec.get("protocol")).upper(),
                                      bind=HostPort(host="", port=port), advertised=None, advertised_from="operator",
                                      controller=True, exposure="internal"))
        if override and "broker" in roles:
            given = dict(parse_listeners(override, f"{path}: listeners.advertisedListeners"))
            listeners = [Listener(**{**x.__dict__, "advertised": given.get(x.name), "deploy_time": False})
                         if not x.controller else x for x in listeners]
        brokers.append(Broker(
            name=pod, source=path, node_id=node_id, roles=roles, listeners=tuple(listeners),
            own_names=(fqdn, fqdn.removesuffix("." + domain)), hostname=pod,
            listener_names=tuple(x.name for x in listeners),
            advertised_names=tuple(x.name for x in listeners if x.advertised is not None),
            protocol_map=tuple((x.name, x.protocol or "PLAINTEXT") for x in listeners),
            inter_broker_name=str(lst["interbroker"]["name"]).upper() if "broker" in roles else None,
            controller_names=(str(lst["controller"]["name"]).upper(),) if "controller" in roles else (),
            internal_topics=internal[role]))
    notes = [f"pods named for a release called {RELEASE} (fullname {fullname}) unless fullnameOverride says; the "
             "namespace is the one it is installed in"]
    if override:
        notes.append("listeners.advertisedListeners overrides what every pod advertises: the same for all of them")
    secrets = _secret_values(document)
    return Deployment(source=path, kind="bitnami", platform="kubernetes", brokers=tuple(brokers),
                      network_names=(("cluster", tuple(names)),), operator="bitnami", notes=tuple(notes),
                      secrets=tuple(secrets), broker_count=sum(b.is_broker for b in brokers),
                      settings_block=_settings_block(values))


# Where the chart takes Kafka settings, by version: a whole server.properties in `config` and lines added in
# `extraConfig` (to chart 31), a map in `extraConfigYaml` (29 to 31), and from chart 32 (Kafka 4) a map in
# `config` with `overrideConfiguration` over it; each also under `controller.` and `broker.`, which win.
_TEXT_KEYS = ("extraConfig",)
_MAP_KEYS = ("extraConfigYaml", "overrideConfiguration")


def _kafka_config(path: str, values: dict[str, Any], role: str) -> dict[str, Any]:
    """The Kafka settings the chart writes for one role's pods (`controller` or `broker`), from the values.

    The chart sets none of the internal topics' settings itself, so whatever these leave out is Kafka's
    default. A `config` (the role's, else the common one) replaces what the chart generates, and with it
    `extraConfig` and `extraConfigYaml`; `overrideConfiguration` applies over either.
    """
    own = mapping(values.get(role), f"{path}: {role}")
    out: dict[str, Any] = {}
    base = own.get("config") or values.get("config")
    if base:
        out.update(_settings_of(path, base, f"{role}.config" if own.get("config") else "config"))
    else:
        for where, raw in (("extraConfig", values.get("extraConfig")), (f"{role}.extraConfig", own.get("extraConfig")),
                           ("extraConfigYaml", values.get("extraConfigYaml")),
                           (f"{role}.extraConfigYaml", own.get("extraConfigYaml"))):
            out.update(_settings_of(path, raw, where))
    for where, raw in (("overrideConfiguration", values.get("overrideConfiguration")),
                       (f"{role}.overrideConfiguration", own.get("overrideConfiguration"))):
        out.update(_settings_of(path, raw, where))
    return out


def _settings_of(path: str, raw: Any, where: str) -> dict[str, Any]:
    """Kafka settings from one chart value: server.properties lines (text) or a map of them; else none."""
    if isinstance(raw, str) and raw.strip():
        from kprobe.check.deployments.properties import parse_properties

        return dict(parse_properties(raw, source=f"{path}: {where}"))
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    return {}


def _settings_block(values: dict[str, Any]) -> str | None:
    """The key these values already set Kafka settings in, so a fix adds to it; None where they use none.

    A text `config` is the whole server.properties (nothing else is added to it); a map anywhere means the
    chart of Kafka 4, whose `overrideConfiguration` goes over everything; text `extraConfig` an older chart.
    """
    scopes = [values, *(v for v in (values.get("controller"), values.get("broker")) if isinstance(v, dict))]
    if any(isinstance(scope.get("config"), str) and scope["config"].strip() for scope in scopes):
        return "config"
    if any(isinstance(scope.get(key), dict) and scope[key] for scope in scopes for key in ("config", *_MAP_KEYS)):
        return "overrideConfiguration"
    if any(isinstance(scope.get(key), str) and scope[key].strip() for scope in scopes for key in _TEXT_KEYS):
        return "extraConfig"
    return None


def _fullname(values: dict[str, Any]) -> str:
    """The chart's common.names.fullname with the assumed release name."""
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])[:63].rstrip("-")
    name = str(values.get("nameOverride") or "kafka")
    return RELEASE if name in RELEASE else f"{RELEASE}-{name}"[:63].rstrip("-")


def _int(path: str, value: Any, key: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{path}: {key} is not a number ({excerpt(value, 40)})") from None


def _external(path: str, spec: dict[str, Any], ext: dict[str, Any], role: str, index: int, node_id: int,
              fullname: str) -> Listener:
    """The EXTERNAL listener of one pod: its own service's address, given in the values or known at deploy time."""
    service = mapping(mapping(ext.get(role), f"{path}: externalAccess.{role}").get("service"),
                      f"{path}: externalAccess.{role}.service")
    kind = str(service.get("type", "LoadBalancer"))
    port = _int(path, spec.get("containerPort"), "listeners.external.containerPort")

    def nth(key: str) -> Any:
        items = sequence(service.get(key), f"{path}: externalAccess.{role}.service.{key}")
        return items[index] if index < len(items) else None

    exposure: Exposure
    if kind == "NodePort":
        exposure = "nodeport"
        host = service.get("domain") or nth("externalIPs")
        adv_port = nth("nodePorts")
    elif kind == "ClusterIP":
        exposure = "cluster-ip"
        host = service.get("domain")
        adv_port = mapping(service.get("ports"), f"{path}: externalAccess.{role}.service.ports").get("external")
    else:
        exposure = "loadbalancer"
        host = nth("loadBalancerIPs") or nth("loadBalancerNames")
        adv_port = mapping(service.get("ports"), f"{path}: externalAccess.{role}.service.ports").get("external")
    where = f"<the {kind} address of {fullname}-{role}-{index}>"
    advertised = HostPort(host=str(host) if host else where, port=_int(path, adv_port, "external port") if adv_port
                          else 0)
    boots: tuple[tuple[ClientNetwork, str], ...] = (("outside", advertised.text if host and adv_port else where),)
    return Listener(name=str(spec.get("name", "EXTERNAL")).upper(), protocol=str(spec.get("protocol")).upper(),
                    bind=HostPort(host="", port=port), advertised=advertised, advertised_from="operator",
                    exposure=exposure, deploy_time=not host or not adv_port, bootstraps=boots)


def _secret_values(values: Any) -> list[str]:
    """Every value under a secret-looking key, at any depth (passwords of sasl.client, tls, ...)."""
    found: list[str] = []
    if isinstance(values, dict):
        found += secrets_of({str(k): v for k, v in values.items() if not isinstance(v, (dict, list))})
        for v in values.values():
            found += _secret_values(v)
    elif isinstance(values, list):
        for v in values:
            found += _secret_values(v)
    return [f for f in found if f]
