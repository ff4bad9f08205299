"""What every reader shares: YAML loading as bad input, and Kafka's own rules for listener settings.

`broker_from_settings` applies Kafka's semantics once, whatever spelt the settings: an unset
`advertised.listeners` is derived from `listeners` (controller listeners left out, an empty host
replaced by the machine's own name, a wildcard kept, which Kafka refuses); an unset protocol map is
Kafka's default (controller listeners PLAINTEXT); an unset `inter.broker.listener.name` is the listener
named after `security.inter.broker.protocol` (PLAINTEXT). The readers differ only in where settings come
from and what the platform adds (published ports, names, an operator's bootstrap service).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kprobe.errors import UsageError
from kprobe.listeners import (
    OWN_HOSTNAME,
    Broker,
    Exposure,
    HostPort,
    Listener,
    Publish,
    Vantage,
    names_list,
    parse_listeners,
    parse_protocol_map,
    protocol_of,
)
from kprobe.redaction import is_secret

# Kafka 4's default `listeners` when the setting is absent.
KAFKA_DEFAULT_LISTENERS = "PLAINTEXT://:9092"


def load_yaml_documents(path: str, text: str) -> list[Any]:
    """Every YAML document of the file (empty ones dropped); malformed YAML is bad input, with its line."""
    import yaml

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}: malformed YAML{where}: {problem}") from None
    if not documents:
        raise UsageError(f"{path}: empty: no settings to read")
    return documents


def secret_key(key: str) -> bool:
    """Whether a broker setting holds a secret: kprobe's rule, plus every listener's JAAS line."""
    lowered = key.lower()
    return is_secret(lowered) or lowered.endswith("jaas.config") or lowered.endswith(("_jaas_config", "jaas_conf"))


def secrets_of(settings: Mapping[str, Any]) -> list[str]:
    """The values kept under secret keys, to scrub from anything printed (never printed themselves)."""
    return [str(v) for k, v in settings.items() if secret_key(str(k)) and v not in (None, "")]


def broker_from_settings(
    settings: Mapping[str, str], *, name: str, source: str, where: str, hostname: str | None = None,
    own_names: tuple[str, ...] = (), networks: tuple[str, ...] = (),
    publishes: Callable[[int], tuple[Publish, ...]] = lambda port: (),
    exposure: Callable[[str], Exposure | None] = lambda name: None,
    bootstraps: Callable[[str, int], tuple[tuple[Vantage, str], ...]] = lambda name, port: (),
    settings_prefix: str = "",
) -> Broker:
    """A Broker from Kafka properties (already with the platform's defaults merged in).

    `where` prefixes every message about a bad value (the file and, for Compose, the service);
    `publishes` gives the Compose ports that reach a container port; `exposure` and `bootstraps`
    are an operator's per-listener facts.
    """
    listeners = parse_listeners(settings.get("listeners", KAFKA_DEFAULT_LISTENERS), f"{where}: listeners")
    controller_names = names_list(settings.get("controller.listener.names", ""))
    raw_map = settings.get("listener.security.protocol.map")
    protocol_map = parse_protocol_map(raw_map, where) if raw_map is not None else None
    advertised_set = "advertised.listeners" in settings and settings["advertised.listeners"].strip() != ""
    if advertised_set:
        # An empty host is the machine's canonical name here too (Kafka's BrokerServer fills it in at start).
        advertised = [(n, hp if hp.host else HostPort(host=hostname or OWN_HOSTNAME, port=hp.port))
                      for n, hp in parse_listeners(settings["advertised.listeners"], f"{where}: advertised.listeners")]
        advertised_from = "advertised.listeners"
    else:
        # Kafka's own default: the listeners, without the controller's, an empty host as the machine's name.
        advertised = [(n, HostPort(host=hp.host or (hostname or OWN_HOSTNAME), port=hp.port))
                      for n, hp in listeners if n not in controller_names]
        advertised_from = "listeners"
    inter = settings.get("inter.broker.listener.name")
    inter_default = not inter
    inter_name = (inter or settings.get("security.inter.broker.protocol", "PLAINTEXT")).strip().upper()
    roles = names_list(settings.get("process.roles", "")) or ("BROKER",)
    roles = tuple(r.lower() for r in roles)
    bound = dict(listeners)
    shown = dict(advertised)
    order = list(dict.fromkeys([n for n, _ in listeners] + [n for n, _ in advertised]))
    built = []
    for lname in order:
        bind = bound.get(lname)
        protocol = protocol_of(lname, protocol_map)
        if protocol is None and protocol_map is None and lname in controller_names:
            protocol = "PLAINTEXT"  # Kafka maps controller listeners to PLAINTEXT when the map is not set
        built.append(Listener(
            name=lname, protocol=protocol, bind=bind, advertised=shown.get(lname),
            advertised_from=advertised_from,  # type: ignore[arg-type]
            inter_broker="broker" in roles and lname == inter_name, controller=lname in controller_names,
            published=publishes(bind.port) if bind is not None else (), exposure=exposure(lname),
            bootstraps=bootstraps(lname, bind.port) if bind is not None else ()))
    node = settings.get("node.id") or settings.get("broker.id")
    node_id = None
    if node is not None and str(node).strip() not in ("", "-1"):
        try:
            node_id = int(str(node).strip())
        except ValueError:
            raise UsageError(f"{where}: bad node.id {str(node)[:40]!r}: give a number") from None
    return Broker(
        name=name, source=source, node_id=node_id, roles=roles, listeners=tuple(built), own_names=own_names,
        hostname=hostname, networks=networks, listener_names=tuple(n for n, _ in listeners),
        advertised_names=tuple(n for n, _ in advertised) if advertised_set else (),
        protocol_map=protocol_map, inter_broker_name=inter_name, inter_broker_default=inter_default,
        controller_names=controller_names, settings_prefix=settings_prefix)


def env_to_property(variable: str, prefix: str) -> str | None:
    """`KAFKA_ADVERTISED_LISTENERS` -> `advertised.listeners`, as the images' start scripts convert names.

    Confluent's rule, which apache/kafka and Bitnami (with `KAFKA_CFG_`) share: `_` is a dot, `__` an
    underscore, `___` a dash. Variables outside the prefix are none of Kafka's settings.
    """
    if not variable.startswith(prefix):
        return None
    rest = variable[len(prefix):].lower()
    return rest.replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")


def mapping(value: Any, where: str, *, default_empty: bool = True) -> dict[str, Any]:
    """A map from the file, `{}` where absent: anything else is bad input naming where it is.

    A YAML file is someone else's structure: a list where a map belongs must be one line and exit 2,
    never an AttributeError deep in a reader.
    """
    if value is None and default_empty:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a map, not {type(value).__name__}")
    return value


def sequence(value: Any, where: str) -> list[Any]:
    """A list from the file, `[]` where absent; anything else is bad input."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{where} must be a list, not {type(value).__name__}")
    return value
