"""Docker Compose files: the Kafka services' environment, published ports and networks.

Three image families are read, each as its start script reads its environment:
- `apache/kafka` (and `apache/kafka-native`): `KAFKA_*` variables become properties; with none set at
  all, the image starts from its own server.properties (PLAINTEXT on localhost:29092 and
  PLAINTEXT_HOST on 0.0.0.0:9092, both advertised as localhost, internal topics at one replica); an
  unset `KAFKA_LISTENERS` is the advertised listeners with every host replaced by 0.0.0.0
  (docker/resources/common-scripts/configure). With any variable set, the environment is the whole
  configuration: what it leaves out is Kafka's default.
- `confluentinc/cp-kafka`, `cp-server` and the older `cp-enterprise-kafka`: the same names and the same
  derivation of `KAFKA_LISTENERS` (Confluent's `configure` script, which the apache image copied).
- `bitnami/kafka`: `KAFKA_CFG_*` variables over Kafka's own server.properties (internal topics at one
  replica; the legacy `KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR` and its two transaction-log twins win
  over their `KAFKA_CFG_` names); unset listeners are the image's PLAINTEXT :9092 and CONTROLLER :9093.
An image none of these, with Kafka listener variables, is bad input (kprobe would guess its defaults);
an image left as an unset variable (`${IMAGE}`, as Kafka's own examples write it) is read by its
variables' names, and the report says so. Services that are not Kafka brokers are left alone.

What Compose adds: each service is reachable inside its networks under its service name, its
container_name, its aliases and its container id (Docker's embedded DNS); `hostname:` names the
container only to itself. `ports:` publish a container port on the Docker host. Variables are
substituted from the environment and the `.env` file beside the Compose file, as Compose does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kprobe.check.deployments.common import broker_from_settings, env_to_property, excerpt, secret_key
from kprobe.check.listeners import Broker, Deployment, Publish
from kprobe.errors import UsageError

APACHE = ("apache/kafka", "apache/kafka-native")
CONFLUENT = ("confluentinc/cp-kafka", "confluentinc/cp-server", "confluentinc/cp-enterprise-kafka")
BITNAMI = ("bitnami/kafka", "bitnamilegacy/kafka", "bitnamisecure/kafka")
# The apache/kafka image's own server.properties, used when no KAFKA_ variable is set.
APACHE_DEFAULTS = {
    "KAFKA_NODE_ID": "1",
    "KAFKA_PROCESS_ROLES": "broker,controller",
    "KAFKA_LISTENERS": "PLAINTEXT://localhost:29092,CONTROLLER://localhost:29093,PLAINTEXT_HOST://0.0.0.0:9092",
    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:29092,PLAINTEXT_HOST://localhost:9092",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
    "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
}
# Bitnami's image starts from Kafka's own config/server.properties (its internal topics at one replica) and
# sets each KAFKA_CFG_ variable over it; with any KAFKA_ variable, the apache/kafka and Confluent images
# write the environment alone, so Kafka's defaults (three replicas, min ISR 2) apply to what it leaves out.
BITNAMI_DEFAULTS = {"KAFKA_CFG_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
                    "KAFKA_CFG_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
                    "KAFKA_CFG_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
                    "KAFKA_CFG_TRANSACTION_STATE_LOG_MIN_ISR": "1"}
# Legacy names Bitnami's start script copies over their KAFKA_CFG_ twins when set (libkafka.sh,
# kafka_create_alias_environment_variables): these decide the listeners, the node and the internal topics.
BITNAMI_ALIASES = ("ADVERTISED_LISTENERS", "LISTENERS", "LISTENER_SECURITY_PROTOCOL_MAP", "INTER_BROKER_LISTENER_NAME",
                   "BROKER_ID", "NODE_ID", "PROCESS_ROLES", "CONTROLLER_QUORUM_VOTERS",
                   "OFFSETS_TOPIC_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                   "TRANSACTION_STATE_LOG_MIN_ISR")
_LISTENER_VARIABLES = ("KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CFG_LISTENERS",
                       "KAFKA_CFG_ADVERTISED_LISTENERS", "KAFKA_PROCESS_ROLES", "KAFKA_CFG_PROCESS_ROLES")
_VARIABLE = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_HOST_SUB = re.compile(r"://[^:]*:")


def container_id(service: str) -> str:
    """The stand-in for a container's id: Docker makes one up at start (12 hex digits)."""
    return f"<container id of {service}>"


def read_compose(path: str, document: Any) -> Deployment:
    """The Kafka brokers of one Compose file, with their ports and networks."""
    services = document.get("services") if isinstance(document, dict) else None
    if not isinstance(services, dict) or not services:
        raise UsageError(f"{path}: services: is not a map of services")
    variables = _variables(path)
    networks: dict[str, list[str]] = {}
    brokers: list[Broker] = []
    notes: list[str] = []
    secrets: list[str] = []
    scaled = False
    for service, spec in services.items():
        if not isinstance(spec, dict):
            raise UsageError(f"{path}: service {service}: not a map")
        where = f"{path}: service {service}"
        names = _service_names(str(service), spec)
        service_networks = _networks(where, spec)
        for net, aliases in service_networks.items():
            networks.setdefault(net, []).extend([*names, *aliases])
        env = _environment(where, spec.get("environment"), variables)
        image = _substitute(str(spec.get("image") or ""), variables).strip()
        family = _family(where, image, env)
        if family is None:
            continue
        if not image:
            notes.append(f"service {service}: its image is an unset variable ({spec.get('image')}); read as "
                         f"{'bitnami/kafka' if family == 'bitnami' else 'apache/kafka'} from its variables' names")
        secrets += [v for k, v in env.items() if secret_key(k) or secret_key(env_to_property(k, 'KAFKA_') or '')]
        settings = _settings(family, env)
        ports = _ports(where, spec.get("ports"), variables)
        host_mode = str(spec.get("network_mode", "")) == "host"
        hostname = str(spec["hostname"]) if spec.get("hostname") else container_id(str(service))

        def publishes(port: int, ports: list[Publish] = ports, host_mode: bool = host_mode) -> tuple[Publish, ...]:
            if host_mode:  # the container is the host's network stack: every port is the host's
                return (Publish(host_ip="0.0.0.0", host_port=port, container_port=port),)
            return tuple(p for p in ports if p.container_port == port)

        scaled = scaled or _scaled(spec)
        aliases = [a for net in service_networks.values() for a in net]
        brokers.append(broker_from_settings(
            settings, name=str(service), source=path, where=where, hostname=hostname,
            own_names=() if host_mode else (*names, *aliases), networks=tuple(service_networks),
            publishes=publishes, settings_prefix="KAFKA_CFG_" if family == "bitnami" else "KAFKA_"))
    if not brokers:
        raise UsageError(f"{path}: no Kafka broker service (an apache/kafka, confluentinc/cp-kafka, cp-server or "
                         "bitnami/kafka image with its listener variables)")
    # The Kafka services with the broker role are the cluster; a service run several times over is not counted.
    count = None if scaled else sum(b.is_broker for b in brokers)
    return Deployment(source=path, kind="compose", platform="compose", brokers=tuple(brokers),
                      network_names=tuple((net, tuple(dict.fromkeys(n))) for net, n in networks.items()),
                      notes=tuple(notes), secrets=tuple(secrets), broker_count=count)


def _scaled(spec: Mapping[str, Any]) -> bool:
    """Whether a service runs other than once (`scale:`, `deploy.replicas`): its brokers are then uncounted."""
    deploy = spec.get("deploy")
    for value in (spec.get("scale"), deploy.get("replicas") if isinstance(deploy, dict) else None):
        if value is not None and str(value).strip() != "1":
            return True
    return False


def _service_names(service: str, spec: Mapping[str, Any]) -> list[str]:
    """What Docker's DNS answers for this container: service, container name, container id."""
    names = [service, container_id(service)]
    if spec.get("container_name"):
        names.append(str(spec["container_name"]))
    return names


def _networks(where: str, spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Network -> this service's aliases on it; no `networks:` is the project's default network."""
    if str(spec.get("network_mode", "")) == "host":
        return {}
    raw = spec.get("networks")
    if raw is None:
        return {"default": []}
    if isinstance(raw, list):
        return {str(n): [] for n in raw}
    if isinstance(raw, dict):
        out: dict[str, list[str]] = {}
        for net, conf in raw.items():
            aliases = conf.get("aliases", []) if isinstance(conf, dict) else []
            out[str(net)] = [str(a) for a in aliases] if isinstance(aliases, list) else []
        return out
    raise UsageError(f"{where}: networks: is neither a list nor a map")


def _variables(path: str) -> dict[str, str]:
    """The environment, under the `.env` file beside the Compose file (the environment wins, as in Compose)."""
    found: dict[str, str] = {}
    env_file = Path(path).parent / ".env"
    if env_file.is_file():
        for line in env_file.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key and not key.startswith("#"):
                found[key.strip()] = value.strip().strip("'\"")
    found.update(os.environ)
    return found


def _substitute(text: str, variables: Mapping[str, str]) -> str:
    """Compose's interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        expression = match.group("braced") if match.group("braced") is not None else match.group("plain")
        for op in (":-", "-", ":?", "?", ":+", "+"):
            if op in expression:
                name, _, default = expression.partition(op)
                value = variables.get(name)
                if op in (":-", ":?"):
                    return value if value else (default if op == ":-" else "")
                if op in ("-", "?"):
                    return value if value is not None else (default if op == "-" else "")
                return default if value else ""
        return variables.get(expression, "")

    return _VARIABLE.sub(one, text)


def _environment(where: str, raw: Any, variables: Mapping[str, str]) -> dict[str, str]:
    """`environment:` as a map or a list of KEY=VALUE, values substituted."""
    if raw is None:
        return {}
    pairs: list[tuple[str, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = []
        for item in raw:
            key, sep, value = str(item).partition("=")
            pairs.append((key, value if sep else variables.get(key, "")))
    else:
        raise UsageError(f"{where}: environment: is neither a map nor a list")
    return {str(k): _substitute("" if v is None else str(v), variables) for k, v in pairs}


def _repository(image: str) -> str:
    """`docker.io/bitnami/kafka:3.7@sha256:...` -> `bitnami/kafka`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: name.rindex(":")]
    parts = name.split("/")
    if len(parts) > 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if len(parts) == 1:
        parts = ["library", parts[0]]
    return "/".join(parts[-2:]).lower()


def _family(where: str, image: str, env: Mapping[str, str]) -> str | None:
    """`apache`, `confluent`, `bitnami`, or None for a service that is no Kafka broker."""
    repository = _repository(image) if image else ""
    if repository in APACHE:
        return "apache"
    if repository in CONFLUENT:
        return "confluent"
    if repository in BITNAMI:
        return "bitnami"
    kafka_env = [k for k in _LISTENER_VARIABLES if k in env]
    if not kafka_env:
        return None
    if not image:
        return "bitnami" if any(k.startswith("KAFKA_CFG_") for k in env) else "apache"
    raise UsageError(f"{where}: image {image[:120]} sets {kafka_env[0]} but is none kprobe check knows "
                     "(apache/kafka, confluentinc/cp-kafka, confluentinc/cp-server, bitnami/kafka): its start "
                     "script's defaults would be guesses")


def _settings(family: str, env: Mapping[str, str]) -> dict[str, str]:
    """Kafka properties from the environment, completed as the image's start script completes them."""
    if family == "bitnami":
        merged = {**BITNAMI_DEFAULTS, **env}
        merged.update({f"KAFKA_CFG_{name}": env[f"KAFKA_{name}"] for name in BITNAMI_ALIASES if f"KAFKA_{name}" in env})
        prefix = "KAFKA_CFG_"
    else:
        merged = dict(env)
        prefix = "KAFKA_"
        if family == "apache" and not any(k.startswith("KAFKA_") for k in env):
            merged = {**APACHE_DEFAULTS, **env}
        roles = merged.get("KAFKA_PROCESS_ROLES", "")
        if (not merged.get("KAFKA_LISTENERS") and roles.strip() != "controller"
                and merged.get("KAFKA_ADVERTISED_LISTENERS")):
            merged["KAFKA_LISTENERS"] = _HOST_SUB.sub("://0.0.0.0:", merged["KAFKA_ADVERTISED_LISTENERS"])
    settings: dict[str, str] = {}
    for key, value in merged.items():
        name = env_to_property(key, prefix)
        if name is not None:
            settings[name] = value
    return settings


def _ports(where: str, raw: Any, variables: Mapping[str, str]) -> list[Publish]:
    """`ports:` in its short (`[IP:]HOST:CONTAINER[/tcp]`, ranges) and long (target/published) forms.

    A container port published without a host port gets a random one from Docker: host_port 0.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise UsageError(f"{where}: ports: is not a list")
    out: list[Publish] = []
    for item in raw:
        if isinstance(item, dict):
            if str(item.get("protocol", "tcp")).lower() != "tcp":
                continue
            try:
                target = int(_substitute(str(item["target"]), variables))
                published = str(item.get("published") or "0")
                host = int(_substitute(published, variables).split("-")[0] or 0)
            except (KeyError, ValueError):
                raise UsageError(f"{where}: bad ports: entry {excerpt(item, 80)}: give target: and published:"
                                 ) from None
            out.append(Publish(host_ip=str(item.get("host_ip") or ""), host_port=host, container_port=target))
            continue
        if isinstance(item, list):
            raise UsageError(f"{where}: bad ports: entry {excerpt(item)}: give [IP:]HOST:CONTAINER")
        text = _substitute(str(item), variables).strip()
        text, _, protocol = text.partition("/")
        if protocol and protocol.lower() != "tcp":
            continue
        ip = ""
        if text.startswith("["):
            ip, _, text = text[1:].partition("]:")
        parts = text.split(":")
        if len(parts) == 3:
            ip, host_part, container_part = parts
        elif len(parts) == 2:
            host_part, container_part = parts
        elif len(parts) == 1:
            host_part, container_part = "", parts[0]
        else:
            raise UsageError(f"{where}: bad ports: entry {excerpt(item, 80)}: give [IP:]HOST:CONTAINER")
        try:
            containers = _port_range(container_part)
            hosts = _port_range(host_part) if host_part else [0] * len(containers)
        except ValueError:
            raise UsageError(f"{where}: bad ports: entry {excerpt(item, 80)}: ports are numbers from 0 to 65535"
                             ) from None
        if len(hosts) == 1 and len(containers) > 1:
            hosts = hosts * len(containers)
        if len(hosts) != len(containers):
            raise UsageError(f"{where}: bad ports: entry {excerpt(item, 80)}: the ranges differ in length")
        out.extend(Publish(host_ip=ip, host_port=h, container_port=c) for h, c in zip(hosts, containers, strict=True))
    return out


def _port_range(text: str) -> list[int]:
    """`9092` or `9092-9094`; ValueError past 65535, so that a range is never longer than the port space."""
    first, sep, last = text.partition("-")
    low, high = int(first), int(last) if sep else int(first)
    if not (0 <= low <= 65535 and 0 <= high <= 65535):
        raise ValueError(text)
    return list(range(low, high + 1))
