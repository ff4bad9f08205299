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

from kprobe.check.listeners import (
    INTERNAL_TOPIC_SETTINGS,
    OWN_HOSTNAME,
    Broker,
    ClientNetwork,
    Exposure,
    HostPort,
    InternalTopicSettings,
    Listener,
    Publish,
    names_list,
    parse_listeners,
    parse_protocol_map,
    protocol_of,
)
from kprobe.errors import UsageError
from kprobe.redaction import is_secret

# Kafka 4's default `listeners` when the setting is absent.
KAFKA_DEFAULT_LISTENERS = "PLAINTEXT://:9092"


# YAML aliases (`*name`) are references: a 332-byte "billion laughs" file is a hundred nodes on the
# page and 4.8 million once expanded (9^7; two more lines make it 10^9), which a str() of any value,
# or a merge key, then builds. With
# every alias expanded, a file may grow by at most this many nodes and scalar characters: generous
# for the anchors a Compose file shares between services (`<<: *common`), far short of a bomb.
MAX_ALIAS_EXPANSION = 1_000_000
# Real configuration files nest a dozen levels; PyYAML composes recursively, and a file 20,000
# levels deep would end in a RecursionError (exit 3) instead of a message.
MAX_DEPTH = 100


class _Refused(Exception):
    """Why a YAML file is refused while it is composed: said as `<path>: <this>`."""


def _loader(text: str) -> Any:
    """A PyYAML SafeLoader that counts while it composes, so a bomb is refused before it is built.

    Each node weighs 1, plus its characters for a scalar; a collection weighs 1 plus its children.
    An alias adds the weight of the node it names (that is what expanding it costs), and an alias
    to a node still being composed (a recursive structure) is refused outright: no reader walks one.
    """
    import yaml

    class Bounded(yaml.SafeLoader):
        weights: dict[int, int]
        expanded = 0
        depth = 0

        def compose_document(self) -> Any:
            self.weights = {}  # node ids are unique within a document only: the last one's nodes are gone
            return super().compose_document()

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                node = super().compose_node(parent, index)
                weight = self.weights.get(id(node))
                if weight is None:
                    raise _Refused(f"an alias at line {mark.line + 1} refers to a node that contains it: write the "
                                   "structure out without the recursive alias")
                self.expanded += weight
                if self.expanded > MAX_ALIAS_EXPANSION:
                    raise _Refused(f"its aliases expand past {MAX_ALIAS_EXPANSION:,} nodes and characters (at line "
                                   f"{mark.line + 1}): a YAML alias bomb? write the values out, or share fewer")
                return node
            self.depth += 1
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep (at line {mark.line + 1}): no configuration "
                               "file is; give the real file")
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            if isinstance(node, yaml.ScalarNode):
                weight = 1 + len(node.value)
            elif isinstance(node, yaml.SequenceNode):
                weight = 1 + sum(self.weights[id(child)] for child in node.value)
            else:
                weight = 1 + sum(self.weights[id(k)] + self.weights[id(v)] for k, v in node.value)
            self.weights[id(node)] = weight
            return node

    return Bounded(text)


def load_yaml_documents(path: str, text: str) -> list[Any]:
    """Every YAML document of the file (empty ones dropped); malformed YAML is bad input, with its line.

    Aliases that expand past MAX_ALIAS_EXPANSION and nesting past MAX_DEPTH are refused while the
    file is composed, before any value is built, so no later str() or message can blow up.
    """
    import yaml

    loader = _loader(text)
    try:
        documents = []
        while loader.check_data():
            document = loader.get_data()
            if document is not None:
                documents.append(document)
    except _Refused as exc:
        raise UsageError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}: malformed YAML{where}: {excerpt(problem, 200, quote=False)}") from None
    except (ValueError, OverflowError) as exc:  # a value YAML's resolver took for a date or an int, but is not one
        raise UsageError(f"{path}: malformed YAML: a value is not what it looks like ({excerpt(str(exc), 120)}): "
                         "write it in quotes if it is text") from None
    except RecursionError:  # beyond MAX_DEPTH this should not happen; still one line, never a traceback
        raise UsageError(f"{path}: nested too deep: give the real configuration file") from None
    finally:
        loader.dispose()
    if not documents:
        raise UsageError(f"{path}: empty: no settings to read")
    return documents


def excerpt(value: Any, limit: int = 60, *, quote: bool = True) -> str:
    """A value from the file as a message may quote it: scalars cut at `limit`, collections only named.

    Never str() of a whole map or list: with aliases, one of them can stand for megabytes of text.
    """
    if isinstance(value, dict):
        return f"a map of {len(value)} entries"
    if isinstance(value, (list, tuple, set)):
        return f"a list of {len(value)} items"
    text = value if isinstance(value, str) else str(value)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(text) if quote else text


# More brokers than any cluster runs: a replica count or an id range past it is a typo or hostile
# (range(10**9) alone would take gigabytes), refused with one line.
MAX_NODES = 10_000


def node_count(path: str, value: int, what: str) -> int:
    """A count of pods or node ids from the file, refused past MAX_NODES."""
    if value > MAX_NODES:
        raise UsageError(f"{path}: {what} is {excerpt(value, 20, quote=False)}, more than the {MAX_NODES:,} brokers "
                         "kprobe check reads: give the real count")
    return value


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
    bootstraps: Callable[[str, int], tuple[tuple[ClientNetwork, str], ...]] = lambda name, port: (),
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
    text = str(node).strip() if node is not None and not isinstance(node, (dict, list)) else node
    if text is not None and text not in ("", "-1"):
        try:
            node_id = int(text)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: bad node.id {excerpt(node, 40)}: give a number") from None
    return Broker(
        name=name, source=source, node_id=node_id, roles=roles, listeners=tuple(built), own_names=own_names,
        hostname=hostname, networks=networks, listener_names=tuple(n for n, _ in listeners),
        advertised_names=tuple(n for n, _ in advertised) if advertised_set else (),
        protocol_map=protocol_map, inter_broker_name=inter_name, inter_broker_default=inter_default,
        controller_names=controller_names, settings_prefix=settings_prefix,
        internal_topics=internal_topic_settings(settings))


def internal_topic_settings(settings: Mapping[str, Any]) -> InternalTopicSettings:
    """The internal topics' settings among a broker's Kafka properties, whatever spelt them.

    Kafka takes a whole number from 1 to 32767 (the replication factors are Java shorts; surrounding
    spaces trimmed). Anything else (an empty Compose variable, a Helm template, a word) stops the broker,
    so it is kept as unreadable and nothing is predicted from it, rather than refusing a file whose
    listeners can still be judged.
    """
    values: list[tuple[str, int]] = []
    unreadable: list[str] = []
    for prop in INTERNAL_TOPIC_SETTINGS:
        if prop not in settings:
            continue
        raw = settings[prop]
        number: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit() and len(raw.strip()) <= 9:
            number = int(raw.strip())
        if number is not None and 1 <= number <= 32767:
            values.append((prop, number))
        else:
            unreadable.append(prop)
    return InternalTopicSettings(values=tuple(values), unreadable=tuple(unreadable))


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
