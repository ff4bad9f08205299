"""Options, as typed, validated once, with one exact message per rule.

Bootstrap addresses come in every form people copy from somewhere: `host:port`, `host`
(port 9092), `[::1]:9092`, `SASL_SSL://host:9093` from a listener config, comma lists.
Client properties come from `-X key=value` and `-F file` (kprobe.clientprops reads Java and
librdkafka files alike).

`probe_options`, `list_options` and `watch_options` turn a command's options, as typed, into a
run's validated options (ProbeOptions, ListOptions, Schedule, defined here so that the runs
above can take them), checking the ones that only make sense together; each option's own check,
default and flags are its declaration's (kprobe.option_table). The CLI only parses and calls
them, so another front end (a script, a service) gets the same messages.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from kprobe.clientprops import kcat_config_file
from kprobe.errors import UsageError
from kprobe.hostport import format_hostport, is_ip_literal
from kprobe.kafka.security import PROTOCOLS, security_from
from kprobe.models import BootstrapAddress, Protocol
from kprobe.option_table import RUN, check_topic_name, defaults, parse_duration, parse_nameserver, parse_port
from kprobe.records import field, record, replace

if TYPE_CHECKING:
    from kprobe.clientprops.load import ClientProperties

__all__ = ["ListOptions", "ProbeOptions", "Schedule", "check_topic_name", "list_options", "parse_address",
           "parse_addresses", "parse_connect_to", "parse_controller_addresses", "parse_duration", "parse_nameserver",
           "parse_port", "parse_properties", "parse_resolve", "probe_options", "report_settings", "watch_options"]

DEFAULT_PORT = 9092
# Used with fullmatch, and `\Z` in the look-ahead: `$` also matches before a trailing newline, so
# `kafka-1\n` would pass as a host name (and be sent to the resolver as it is).
_HOST_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?")


def parse_address(text: str) -> BootstrapAddress:
    """Parse one bootstrap address; raise UsageError naming the fix."""
    raw = text.strip()
    if not raw:
        raise UsageError("empty bootstrap address: give host:port, e.g. -b broker1:9092")
    protocol = None
    if "://" in raw:
        scheme, _, raw = raw.partition("://")
        protocol = scheme.upper()
        if protocol not in PROTOCOLS:
            # A listener *name* (LISTENER_BOB://) carries no protocol; accept it and let -X decide.
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", protocol):
                raise UsageError(f"bad bootstrap address {text!r}: {scheme!r} is not a listener protocol: "
                                 f"use one of {', '.join(PROTOCOLS)}, a listener name, or no prefix")
            protocol = None
        raw = raw.rstrip("/")
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep:
            raise UsageError(f"bad bootstrap address {text!r}: missing ']' after the IPv6 address: "
                             "write it as [::1]:9092")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"bad bootstrap address {text!r}: {host!r} is not an IPv6 address: "
                             "use brackets only around IPv6 addresses, e.g. [::1]:9092") from None
        if rest and not rest.startswith(":"):
            raise UsageError(f"bad bootstrap address {text!r}: expected ':port' after ']': "
                             "write it as [::1]:9092")
        port_text = rest[1:] if rest else ""
    elif raw.count(":") > 1:
        raise UsageError(f"bad bootstrap address {text!r}: write IPv6 addresses in brackets, e.g. [::1]:9092")
    else:
        host, _, port_text = raw.partition(":")
        if raw.endswith(":"):
            raise UsageError(f"bad bootstrap address {text!r}: the port after ':' is missing: "
                             "give host:port, e.g. broker1:9092, or drop the ':' for 9092")
        if not _valid_host(host):
            raise UsageError(f"bad bootstrap address {text!r}: {host!r} is not a valid host name: "
                             "use letters, digits, '-' and '.' (no spaces), e.g. broker1.example.com")
    port = parse_port(port_text, text) if port_text else DEFAULT_PORT
    return BootstrapAddress(host[:-1] if host.endswith(".") else host, port, cast("Protocol | None", protocol))


def _valid_host(host: str) -> bool:
    """A host name as resolvers accept it: 1-63 character labels, no leading or trailing dash."""
    if not _HOST_RE.fullmatch(host):
        return False
    labels = host.rstrip(".").split(".")
    return all(0 < len(label) <= 63 and not label.startswith("-") and not label.endswith("-") for label in labels)


def parse_addresses(values: Iterable[str]) -> list[BootstrapAddress]:
    """Every -b value, comma lists split, duplicates collapsed, order kept."""
    seen: dict[tuple[str, int], BootstrapAddress] = {}
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            address = parse_address(part)
            seen.setdefault((address.host.lower(), address.port), address)
    if not seen:
        raise UsageError("no bootstrap address: give one with -b host:port (or set KPROBE_BOOTSTRAP, or "
                         "bootstrap.servers in the -F file)")
    return list(seen.values())


def parse_properties(pairs: Iterable[str], files: Iterable[str] = ()) -> dict[str, str]:
    """Client properties from -F files then -X pairs (later wins, as with kcat), under librdkafka's names.

    A Java client's file is translated (kprobe.clientprops); unused keys are named in warnings.
    """
    pairs, files = list(pairs), list(files)
    if not pairs and not files:  # nothing given (no --publish-property, say): the readers stay unloaded
        return {}
    from kprobe.clientprops.load import load

    return load(files, pairs).props


# Each option's default as its ProbeOptions field holds it (`--timeout 5s` is 5.0 seconds there).
_FIELD_DEFAULTS: dict[str, Any] = {o.field: o.field_value(o.value) for o in RUN if o.field and o.kind != "list"}


@record(kw_only=True)
class ProbeOptions:
    """Everything a probe run needs, validated; the options' defaults are their declarations'."""

    bootstraps: Sequence[BootstrapAddress]
    props: Mapping[str, str] = field(default_factory=dict)
    nameservers: Sequence[tuple[str, int]] = ()
    timeout: float = _FIELD_DEFAULTS["timeout"]
    deadline: float = _FIELD_DEFAULTS["deadline"]
    vantage: str | None = None
    identity: bool = _FIELD_DEFAULTS["identity"]
    tls_expiry_days: float = _FIELD_DEFAULTS["tls_expiry_days"]
    compare_nameservers: Sequence[tuple[str, int]] = ()
    # --resolve (advertised name, lower case -> IP) and --connect-to ((name, port) -> (host, port)).
    resolve: Mapping[str, str] = field(default_factory=dict)
    connect_to: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # --controllers: KRaft controller listeners to ask for the quorum, as bootstrap.controllers (KIP-919).
    controllers: Sequence[BootstrapAddress] = ()
    # --roundtrip TOPIC (None: not asked) and --roundtrip-create.
    roundtrip: str | None = None
    roundtrip_create: bool = False
    # The application (--group, --transactional-id, --topic; group.id and transactional.id from the properties).
    group: str | None = None
    transactional_id: str | None = None
    share_group: str | None = None
    client_rack: str | None = None
    topics: Sequence[str] = ()
    # The properties as the user gave them (Java names and all), for the report; `props` are what the clients take.
    given_props: Mapping[str, str] | None = None
    # -F's files and -X's pairs as given, for the report: the command to run the probe again names them so.
    prop_files: Sequence[str] = ()
    given_pairs: Mapping[str, str] | None = None
    # sasl.username and sasl.password -> the key the user gave each under (sasl.jaas.config in a Java file).
    credentials: Mapping[str, str] = field(default_factory=dict)


@record(kw_only=True)
class ListOptions:
    """Validated input of `kprobe list`."""

    bootstraps: Sequence[BootstrapAddress]
    topics: Sequence[str] = ()
    props: Mapping[str, str] = field(default_factory=dict)
    nameservers: Sequence[tuple[str, int]] = ()
    timeout: float = _FIELD_DEFAULTS["timeout"]
    deadline: float = _FIELD_DEFAULTS["deadline"]
    reachability: bool = False
    internal: bool = True
    # --resolve and --connect-to, as probe takes them: the reachability check dials the mapped address.
    resolve: Mapping[str, str] = field(default_factory=dict)
    connect_to: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)


@record
class Schedule:
    """--every, --jitter, --count."""

    every: float
    jitter: float = 0.0
    count: int | None = None


def _bootstraps_and_props(bootstrap: Iterable[str], props: Iterable[str], prop_files: Iterable[str], *,
                          kcat_default: bool = True, required: bool = True) -> tuple[list[BootstrapAddress],
                                                                                       ClientProperties | None]:
    """The addresses and properties together: a bad security.protocol (from -X, -F or a
    PROTOCOL:// prefix) is a usage error now, before any connection. Returns the addresses and the
    client properties (the clients', and as given for the report); None when nothing was read.

    Without -b, the files' bootstrap.servers (or metadata.broker.list) is the bootstrap list, as
    kcat and Kafka's own tools take it; it never reaches the clients as a property, since each run
    decides which addresses its clients start from.
    """
    pairs, files = list(props), list(prop_files)
    values = [v for v in bootstrap if v.strip()]
    if not pairs and not files and not (kcat_default and kcat_config_file() is not None):
        # Nothing to read or translate: the readers (kprobe.clientprops.load, its key stores) stay unloaded.
        addresses = parse_addresses(values) if required or values else []
        for address in addresses:
            security_from({}, address)
        return addresses, None
    from kprobe.clientprops.load import load

    client = load(files, pairs, kcat_default=kcat_default)
    if not any(part.strip() for value in values for part in value.split(",")) and client.bootstrap:
        values = [client.bootstrap]
    for key in ("bootstrap.servers", "metadata.broker.list"):
        client.props.pop(key, None)
    addresses = parse_addresses(values) if required or values else []
    for address in addresses:
        security_from(client.props, address)
    return addresses, client


def parse_resolve(text: str) -> tuple[str, str]:
    """`HOST=ADDR` for --resolve: the advertised name HOST resolves to the IP address ADDR."""
    host, sep, addr = text.strip().partition("=")
    if not sep:
        raise UsageError(f"bad --resolve {text!r}: write HOST=ADDR, e.g. --resolve broker0.internal=10.0.0.5")
    host = host.rstrip(".")
    if not _valid_host(host) and not is_ip_literal(host):
        raise UsageError(f"bad --resolve {text!r}: {host!r} is not a valid host name: give the advertised name "
                         "before '='")
    bare = addr.strip("[]")
    if not is_ip_literal(bare):
        raise UsageError(f"bad --resolve {text!r}: {addr!r} is not an IP address: give an address after '=' "
                         "(to send a name elsewhere by name, use --connect-to)")
    return host.lower(), str(ipaddress.ip_address(bare))


def parse_connect_to(text: str) -> tuple[str, int, str, int]:
    """`HOST:PORT=ADDR:PORT` for --connect-to (curl's option): connect there instead of the advertised endpoint."""
    left, sep, right = text.strip().partition("=")
    if not sep or not left or not right:
        raise UsageError(f"bad --connect-to {text!r}: write HOST:PORT=ADDR:PORT, e.g. "
                         "--connect-to broker0.internal:9092=127.0.0.1:19092")
    ends = []
    for side, part in (("advertised endpoint", left), ("target", right)):
        if ":" not in part or part.endswith("]"):
            raise UsageError(f"bad --connect-to {text!r}: the {side} {part!r} needs a port: write HOST:PORT=ADDR:PORT")
        try:
            ends.append(parse_address(part))
        except UsageError as exc:
            raise UsageError(f"bad --connect-to {text!r}: the {side} {part!r}: {exc}") from None
    if any(e.protocol or "://" in part for e, part in zip(ends, (left, right), strict=True)):
        raise UsageError(f"bad --connect-to {text!r}: no PROTOCOL:// prefix here: write HOST:PORT=ADDR:PORT")
    return ends[0].host.lower(), ends[0].port, ends[1].host, ends[1].port


def _remaps(resolve: Iterable[str], connect_to: Iterable[str]) -> tuple[dict[str, str], dict[tuple[str, int],
                                                                                             tuple[str, int]]]:
    """Both mappings, each key given once: two answers for one name would make the verdict a coin toss."""
    names: dict[str, str] = {}
    for text in resolve:
        host, addr = parse_resolve(text)
        if names.setdefault(host, addr) != addr:
            raise UsageError(f"bad --resolve {text!r}: {host} is already mapped to {names[host]}: give one "
                             "address per name")
    ends: dict[tuple[str, int], tuple[str, int]] = {}
    for text in connect_to:
        host, port, to_host, to_port = parse_connect_to(text)
        if ends.setdefault((host, port), (to_host, to_port)) != (to_host, to_port):
            raise UsageError(f"bad --connect-to {text!r}: {format_hostport(host, port)} is already mapped to "
                             f"{format_hostport(*ends[(host, port)])}: give one target per endpoint")
    return names, ends


def probe_options(*, kcat_default: bool = True, **given: Any) -> ProbeOptions:
    """The options of `kprobe probe` and `kprobe watch`, as typed, by their parameters (kprobe.option_table.RUN);
    the ones not given take their declared defaults.

    With --controllers, -b may be left out: an admin tool set up with bootstrap.controllers has no
    bootstrap.servers either. `kcat_default`: with no -F, read kcat's own configuration file as kcat
    does (a long-lived exporter passes False: its modules say what they use).
    """
    unknown = sorted(set(given) - {o.param for o in RUN})
    if unknown:
        raise TypeError(f"probe_options() got unknown options {unknown}")
    typed = {**defaults(RUN), **given}
    controller_addresses = parse_controller_addresses(typed["controllers"])
    addresses, client = _bootstraps_and_props(
        typed["bootstrap"], typed["props"], typed["prop_files"], kcat_default=kcat_default,
        required=not controller_addresses)
    properties = client.props if client is not None else {}
    for address in controller_addresses:
        security_from(properties, address)
    names, ends = _remaps(typed["resolve"], typed["connect_to"])
    # Each option's own check, in the order of the declarations; then the rules between options.
    fields = {o.field: o.field_value(typed[o.param]) for o in RUN
              if o.field and (o.check is not None or o.bounds is not None)}
    _check_roundtrip(typed["roundtrip"], typed["roundtrip_create"], bootstrap=bool(addresses),
                     nameservers=typed["nameservers"], remapped=bool(names or ends))
    together: dict[str, Any] = dict(bootstraps=addresses, props=properties, resolve=names, connect_to=ends,
                                    controllers=controller_addresses)
    if client is not None:
        together.update(given_props=client.given, given_pairs=client.pairs, credentials=client.credentials)
    plain = {o.field: typed[o.param] for o in RUN if o.field and o.field not in fields and o.field not in together}
    return ProbeOptions(**together, **fields, **plain)


def report_settings(options: ProbeOptions, resolved: object) -> dict[str, Any]:
    """The report's settings: each option that has a report key, as the run used it, so a report read later
    says what its verdict assumed. `resolved` (the run's application questions) wins where it has the field:
    a group named only by group.id in -F is the group the run asked about.

    The client properties twice: `properties`, every key the run read (the files', then -X's), which is what
    the verdict assumed; and -X's own key, the pairs alone as given, which with -F's files (`properties_files`)
    is the command line to run the probe again (kprobe.output.markdown). Secrets are redacted in both.
    """
    given = options.props if options.given_props is None else options.given_props
    settings = {}
    for option in RUN:
        if option.report is None or option.field is None:
            continue
        if option.field == "props":
            settings["properties"] = option.shown(given) if option.shown is not None else given
            value: Any = given if options.given_pairs is None else options.given_pairs
        else:
            value = getattr(resolved, option.field, getattr(options, option.field))
        settings[option.report] = option.shown(value) if option.shown is not None else value
    return settings


def _check_roundtrip(topic: str | None, create: bool, *, bootstrap: bool, nameservers: Iterable[str],
                     remapped: bool) -> None:
    """--roundtrip runs a real client, so only what a real client can honour goes with it."""
    if topic is None:
        if create:
            raise UsageError("--roundtrip-create needs --roundtrip TOPIC: it creates that topic when it is missing")
        return
    check_topic_name(topic, "--roundtrip")
    if not bootstrap:
        raise UsageError("--roundtrip needs -b: the round trip produces through the brokers, not the controllers")
    if list(nameservers) or remapped:
        raise UsageError("--roundtrip runs a real client, which resolves names through this host's system resolver: "
                         "it cannot honour --nameserver, --resolve or --connect-to; leave those out (map names "
                         "in /etc/hosts to try a mapping with the round trip)")


def parse_controller_addresses(values: Iterable[str]) -> list[BootstrapAddress]:
    """Every --controllers value, comma lists split, as -b's: the same forms, the same one-line errors."""
    seen: dict[tuple[str, int], BootstrapAddress] = {}
    for value in values:
        parts = value.split(",")
        if not any(part.strip() for part in parts):
            raise UsageError(f"bad --controllers {value!r}: give a controller listener as host:port, e.g. "
                             "--controllers controller1:9093")
        for part in parts:
            if not part.strip():
                continue
            try:
                address = parse_address(part)
            except UsageError as exc:
                raise UsageError(str(exc).replace("bad bootstrap address", "bad --controllers address", 1)
                                 .replace("-b broker1:9092", "--controllers controller1:9093")) from None
            bare = part.strip().split("://", 1)[-1].rstrip("/")
            if bare.endswith("]") or ":" not in bare:
                # No default: controllers listen where controller.listener.names says (9093 by convention),
                # and the admin client refuses a bootstrap.controllers entry without a port too.
                raise UsageError(f"bad --controllers address {part.strip()!r}: give the controller listener's port, "
                                 "e.g. --controllers controller1:9093")
            seen.setdefault((address.host.lower(), address.port), address)
    return list(seen.values())


def list_options(
    *, bootstrap: Iterable[str], topics: Sequence[str] = (), props: Iterable[str] = (),
    prop_files: Iterable[str] = (), nameservers: Iterable[str] = (), timeout: str = "5s", deadline: str = "30s",
    reachability: bool | None = None, internal: bool = True, resolve: Iterable[str] = (),
    connect_to: Iterable[str] = (),
) -> ListOptions:
    """The options of `kprobe list`.

    Reachability left unset (None) is on when stdout is a terminal and off when piped: a person
    wants the gap, a script written for kcat wants kcat's bytes and no connect timeouts.
    """
    addresses, client = _bootstraps_and_props(bootstrap, props, prop_files)
    properties = client.props if client is not None else {}
    names, ends = _remaps(resolve, connect_to)
    for name in topics:
        if not name or len(name) > 249:
            raise UsageError(f"bad -t {name!r}: a topic name has 1 to 249 characters: give the topic's exact name "
                             "(kprobe list shows them)")
    return ListOptions(
        bootstraps=addresses, topics=list(topics), props=properties,
        nameservers=[parse_nameserver(n) for n in nameservers],
        timeout=parse_duration(timeout, "--timeout"), deadline=parse_duration(deadline, "--deadline"),
        reachability=sys.stdout.isatty() if reachability is None else reachability,
        internal=internal, resolve=names, connect_to=ends,
    )


def watch_options(
    probe: ProbeOptions, *, every: str = "60s", jitter: str = "0s", count: int | None = None,
) -> tuple[ProbeOptions, Schedule]:
    """`kprobe watch`'s --every, --jitter and --count, and the probe's settings fitted to them.

    A run's deadline is cut to --every, so a run never overlaps the next one.
    """
    if count is not None and count < 1:
        raise UsageError(f"bad --count {count}: run at least once")
    jitter_s = 0.0 if jitter.strip() in ("0", "0s", "") else parse_duration(jitter, "--jitter")
    schedule = Schedule(parse_duration(every, "--every"), jitter_s, count)
    return replace(probe, deadline=min(probe.deadline, schedule.every)), schedule
