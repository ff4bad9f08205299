"""Every command-line option, declared once: its flags, environment variable, help, default, check,
the ProbeOptions field it sets, the key a `kprobe serve` module takes it under and the key of the
report's settings.

From these records are built: typer's parameters of `probe`, `watch`, `list` and the options other
commands share (kprobe.cli.typed), the fast reader that runs a plain probe or listing without typer
(kprobe.cli.plain), `probe_options` (kprobe.options), serve's module settings (kprobe.serve.modules)
and the report's settings. A new probe option is one record in PROBE and its use.

Why a module of its own, on the standard library alone: `kprobe --help` and a plain probe read it
before anything else loads, so it carries no client, model or typer import; the checks here are the
ones a single value needs (durations, nameservers, topic names, ids, ranges), while kprobe.options
keeps the addresses, the client properties and the rules between options.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from kprobe.errors import UsageError

# How a value is read from the command line. DURATION is text that kprobe reads as a duration.
LIST, TEXT, DURATION, FLAG, INT, FLOAT, PATH, SWITCH = (
    "list", "text", "duration", "flag", "int", "float", "path", "switch")

# ASCII digits only: str.isdigit() also says yes to `²` and `٣`, which int() then refuses or reads.
_PORT_RE = re.compile(r"[0-9]+")


class Option(NamedTuple):
    """One option, as every reader of it needs it.

    `param`: the keyword the commands (and probe_options) take it as. `check`: the typed value and
    the flag (or the place in a config file) it came from -> the ProbeOptions field's value, or a
    UsageError naming the flag. `field`: the ProbeOptions field it sets, when it sets one by
    itself (options that only make sense together are read by probe_options). `serve`: the key of
    a serve module. `report`: the key of the report's settings, and `shown` its value there.
    """

    param: str
    kind: str
    flags: tuple[str, ...]
    help: str
    default: Any = None
    envvar: str | None = None
    metavar: str | None = None
    field: str | None = None
    check: Callable[[Any, str], Any] | None = None
    serve: str | None = None
    report: str | None = None
    shown: Callable[[Any], Any] | None = None
    # What a FLOAT is (the messages say it) and the range it must be within.
    noun: str = ""
    bounds: tuple[float, float] | None = None
    # Given on every command line (no default stands in).
    required: bool = False

    @property
    def flag(self) -> str:
        """The name messages give it: its first long form."""
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])

    @property
    def value(self) -> Any:
        """The default a command starts from; a repeatable option's, a fresh list."""
        return [] if self.kind == LIST else self.default

    def field_value(self, value: Any, where: str | None = None) -> Any:
        """The typed value as its ProbeOptions field holds it, checked."""
        where = where or self.flag
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            raise UsageError(f"bad {where} {value:g}: give {self.noun} from {self.bounds[0]:g} to {self.bounds[1]:g}")
        return self.check(value, where) if self.check is not None else value


def parse_port(text: str, context: str) -> int:
    """A TCP port 1-65535, or a UsageError that quotes the input (cut short when it is long)."""
    context = context if len(context) <= 80 else context[:77] + "..."
    if not _PORT_RE.fullmatch(text):
        raise UsageError(f"bad port in {context!r}: {text[:20]!r} is not a number: "
                         "give a port between 1 and 65535")
    digits = text.lstrip("0") or "0"
    # Past five digits it is out of range whatever it says (and int() refuses 4,300 digits and more).
    if len(digits) > 5 or not 1 <= int(digits) <= 65535:
        shown = digits if len(digits) <= 12 else digits[:9] + "..."
        raise UsageError(f"bad port in {context!r}: {shown} is outside 1-65535: give a port between 1 and 65535")
    return int(digits)


def parse_nameserver(text: str) -> tuple[str, int]:
    """`IP` or `IP:PORT` / `[IPv6]:PORT` for --nameserver."""
    import ipaddress

    raw = text.strip()
    host, port = raw, 53
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        if rest:
            port = parse_port(rest.lstrip(":"), text)
    elif raw.count(":") == 1:
        host, _, port_text = raw.partition(":")
        port = parse_port(port_text, text)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(f"bad --nameserver {text!r}: give an IP address, optionally with :port") from None
    return host, port


def parse_duration(text: str, option: str) -> float:
    """Seconds from `5`, `2.5`, `500ms`, `10s`, `2m`; positive and at most a day."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text or "")
    if not match:
        raise UsageError(f"bad {option} {text!r}: give a duration like 5, 2.5s, 500ms or 2m")
    value = float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]
    if value <= 0 or value > 86400:
        raise UsageError(f"bad {option} {text!r}: must be more than 0 and at most 24h: "
                         "give a duration like 5, 2.5s, 500ms or 2m")
    return value


def check_topic_name(topic: str, option: str) -> str:
    """A topic name as Kafka takes it, or one line saying what one is."""
    if not topic or len(topic) > 249 or topic in (".", "..") or not re.fullmatch(r"[A-Za-z0-9._-]+", topic):
        raise UsageError(f"bad {option} {topic!r}: a topic name is 1-249 characters of letters, digits, "
                         "'.', '_' and '-'")
    return topic


def _nameservers(values: Iterable[str], _: str) -> list[tuple[str, int]]:
    return [parse_nameserver(n) for n in values]


def _topics(values: Iterable[str], option: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(check_topic_name(t, option) for t in values))


def _key(what: str) -> Callable[[str | None, str], str | None]:
    """A group or transactional id: any non-empty text a client sends (Kafka takes any string but the empty one)."""
    def check(value: str | None, option: str) -> str | None:
        if value is None:
            return None
        if not value.strip() or len(value) > 32767 or any(ord(c) < 32 for c in value):
            raise UsageError(f"bad {option} {value!r}: give {what} as your client's configuration has it "
                             "(non-empty, printable)")
        return value
    return check


def _hostports(pairs: Iterable[tuple[str, int]]) -> list[str]:
    from kprobe.hostport import format_hostport

    return [format_hostport(host, port) for host, port in pairs]


def _connect_to(ends: dict[tuple[str, int], tuple[str, int]]) -> dict[str, str]:
    from kprobe.hostport import format_hostport

    return {format_hostport(*k): format_hostport(*v) for k, v in ends.items()}


def _properties(props: dict[str, str]) -> dict[str, str]:
    from kprobe.redaction import redact

    return redact(props)


_ADDRESS_FORMS = "host:port, host, [v6]:port or PROTOCOL://host:port; comma lists and repeats allowed"

# Options several commands share, each declared here once.
BOOTSTRAP = Option("bootstrap", LIST, ("--bootstrap", "-b"), f"Bootstrap address: {_ADDRESS_FORMS}.",
                   envvar="KPROBE_BOOTSTRAP")
# The report says -X's pairs (`properties_pairs`) and -F's files (`properties_files`) as given, and beside them
# every property the run read (`properties`: kprobe.options.report_settings).
PROPS = Option("props", LIST, ("-X",), "librdkafka property key=value (repeatable).", serve="properties",
               field="props", report="properties_pairs", shown=_properties)
PROP_FILES = Option("prop_files", LIST, ("-F", "--command-config"),
                    "Client properties file: a Java client.properties (JAAS, key stores) or a librdkafka/kcat file, "
                    "told apart by its keys. Without it, kcat's own file ($KCAT_CONFIG or ~/.config/kcat.conf) is "
                    "read when there is one.", envvar="KPROBE_CONFIG", serve="properties_files", field="prop_files",
                    report="properties_files", shown=list)


def given_client_settings(settings: Mapping[str, object]) -> tuple[list[str], dict[str, object]]:
    """A report's client settings as the user gave them: the -F files and the -X pairs (secrets redacted), for
    a command that runs the probe again; a report that does not keep them apart (an older kprobe's) gives every
    property it read as a pair.
    """
    props = settings.get("properties")
    files, pairs = settings.get(PROP_FILES.report or ""), settings.get(PROPS.report or "")
    if not isinstance(pairs, dict):
        return [], dict(props) if isinstance(props, dict) else {}
    return [str(f) for f in files] if isinstance(files, list) else [], dict(pairs)


NAMESERVERS = Option("nameservers", LIST, ("--nameserver", "-n"),
                     "Resolve through this DNS server (IP[:PORT]) with dnspython only: what a host on that network "
                     "would see.", envvar="KPROBE_NAMESERVER", field="nameservers", check=_nameservers,
                     serve="nameservers")
TIMEOUT = Option("timeout", DURATION, ("--timeout", "-m"), "Per-request timeout (connect, metadata, DNS query).",
                 default="5s", envvar="KPROBE_TIMEOUT", field="timeout", check=parse_duration, serve="timeout",
                 report="timeout_s")
DEADLINE = Option("deadline", DURATION, ("--deadline",), "Deadline for the whole run.", default="30s",
                  envvar="KPROBE_DEADLINE", field="deadline", check=parse_duration, serve="deadline",
                  report="deadline_s")
VANTAGE = Option("vantage", TEXT, ("--vantage",), "Name of this vantage point (default: hostname).",
                 envvar="KPROBE_VANTAGE", field="vantage")
NO_COLOR = Option("no_color", FLAG, ("--no-color",), "No colours, even on a terminal.", default=False)
VERBOSE = Option("verbose", FLAG, ("--verbose", "-v"), "Progress and client log lines on stderr.", default=False)
RESOLVE = Option("resolve", LIST, ("--resolve",),
                 "Probe as if the advertised name HOST resolved to the IP ADDR (HOST=ADDR, repeatable): try a hosts "
                 "entry or DNS change before making it. Advertised endpoints only.", serve="resolve", field="resolve",
                 report="resolve", shown=dict)
CONNECT_TO = Option("connect_to", LIST, ("--connect-to",),
                    "Connect to ADDR:PORT wherever HOST:PORT is advertised (HOST:PORT=ADDR:PORT, repeatable, as "
                    "curl's): try a port-forward or NAT rule before making it. TLS and identity keep the advertised "
                    "name.", serve="connect_to", field="connect_to", report="connect_to", shown=_connect_to)
JSON = Option("json_out", FLAG, ("--json", "-J"),
              "Print the JSON report (same as --format json); indented on a terminal, one line when piped.",
              default=False)
FORMAT = Option("fmt", TEXT, ("--format",),
                "text, json, prometheus or markdown (a summary for a ticket); default text, json with --json.")

# `kprobe probe`, in the order its help lists them.
PROBE: tuple[Option, ...] = (
    BOOTSTRAP, PROPS, PROP_FILES, NAMESERVERS, TIMEOUT, DEADLINE, JSON, FORMAT,
    Option("output", PATH, ("--output", "-o"), "Also write the JSON report to this file, atomically."),
    Option("out_dir", PATH, ("--out",), "Write each report to DIR/<date>/<vantage>-<timestamp>-<id>.json (atomic, "
           "never overwrites).", envvar="KPROBE_OUT"),
    Option("prom_file", PATH, ("--prom-file",),
           "Write Prometheus metrics to this file atomically (node_exporter textfile)."),
    Option("publish", TEXT, ("--publish",),
           "Produce each report to BOOTSTRAP/TOPIC (spooled first, forwarded when reachable).",
           envvar="KPROBE_PUBLISH"),
    Option("publish_props", LIST, ("--publish-property",),
           "librdkafka property for the collector cluster (key=value)."),
    Option("publish_create", FLAG, ("--publish-create",),
           "Create the --publish topic when the collector has none: 6 partitions, replication factor 3 (the number "
           "of brokers when fewer) and, with 3, min.insync.replicas=2.", default=False),
    Option("spool", PATH, ("--spool",), "Spool directory for --publish (default ~/.cache/kprobe/spool).",
           envvar="KPROBE_SPOOL"),
    Option("spool_max", INT, ("--spool-max",), "Most reports kept in the spool; the oldest go first.", default=10_000),
    VANTAGE, NO_COLOR, VERBOSE,
    Option("no_identity", FLAG, ("--no-identity",), "Skip asking each endpoint which node it is (DescribeConfigs).",
           default=False, field="identity", check=lambda no, _: not no, serve="identity", report="identity"),
    Option("tls_expiry_days", FLOAT, ("--tls-expiry-days",),
           "Warn when a broker certificate expires within this many days.", default=30.0, field="tls_expiry_days",
           serve="tls_expiry_days", report="tls_expiry_days", noun="a number of days", bounds=(0, 3650)),
    Option("compare_nameservers", LIST, ("--compare-nameserver",),
           "Also resolve through this DNS server (IP[:PORT]) and report names on which it disagrees with the resolver "
           "in use (split-horizon DNS).", field="compare_nameservers", check=_nameservers,
           serve="compare_nameservers", report="compare_nameservers", shown=_hostports),
    RESOLVE, CONNECT_TO,
    Option("controllers", LIST, ("--controllers",),
           "KRaft controller listener to check as admin tools reach it (bootstrap.controllers, KIP-919): host:port, "
           "comma lists and repeats allowed. kprobe asks it for the controller endpoints (DescribeCluster) and probes "
           "each; -b may then be left out.", field="controllers", report="controllers",
           shown=lambda addresses: [a.hostport for a in addresses]),
    Option("roundtrip", TEXT, ("--roundtrip",),
           "After the probe, produce one record to every partition of TOPIC with a real client (librdkafka, your "
           "settings) and read each back; says where it disagrees with the verdict. Writes to the cluster: never on "
           "by default.", metavar="TOPIC", field="roundtrip", serve="roundtrip", report="roundtrip"),
    Option("roundtrip_create", FLAG, ("--roundtrip-create",),
           "Create the --roundtrip topic when it does not exist (one partition per broker, the broker's replication "
           "factor).", default=False, field="roundtrip_create", report="roundtrip_create"),
    Option("group", TEXT, ("--group",),
           "The consumer group your application uses (default: group.id from -F/-X): kprobe asks which broker "
           "coordinates it and checks that broker's endpoint and its partition of __consumer_offsets.",
           metavar="GROUP_ID", field="group", check=_key("a group id"), report="group"),
    Option("transactional_id", TEXT, ("--transactional-id",),
           "The transactional.id your producer uses (default: transactional.id from -F/-X): its coordinator and its "
           "partition of __transaction_state are checked the same way.", metavar="ID", field="transactional_id",
           check=_key("a transactional id"), report="transactional_id"),
    Option("share_group", TEXT, ("--share-group",),
           "A share group (KIP-932) your application consumes in: kprobe checks that the brokers take share groups "
           "and probes the group's coordinator.", metavar="GROUP_ID", field="share_group",
           check=_key("a share group id"), report="share_group"),
    Option("client_rack", TEXT, ("--client-rack",),
           "The consumer's client.rack (default: client.rack from -F/-X): with rack-aware brokers it reads from the "
           "replica in its rack, whose endpoint kprobe then checks for each partition.", metavar="RACK",
           field="client_rack", check=_key("a rack"), report="client_rack"),
    Option("topics", LIST, ("--topic", "-t"),
           "A topic your application uses (repeatable): its metadata's errors (it does not exist, this principal may "
           "not describe it, partitions without a leader) become findings.", field="topics", check=_topics,
           report="topics", shown=list),
)
# What probe_options reads (the rest are the run's outputs and the terminal's).
OUTPUTS = frozenset({"json_out", "fmt", "output", "out_dir", "prom_file", "publish", "publish_props",
                     "publish_create", "spool", "spool_max", "no_color", "verbose"})
RUN = tuple(o for o in PROBE if o.param not in OUTPUTS)

# `kprobe watch`: probe's options with its schedule after -b, its own --format and no --output.
SCHEDULE = (
    Option("every", TEXT, ("--every",), "Start a probe this often (e.g. 60s, 5m).", default="60s"),
    Option("jitter", TEXT, ("--jitter",), "Random delay up to this long before each run.", default="0s"),
    Option("count", INT, ("--count",), "Stop after this many runs."),
)
WATCH_FORMAT = FORMAT._replace(help="text (a summary line per run), json (JSON Lines) or prometheus.")
WATCH: tuple[Option, ...] = (PROBE[0], *SCHEDULE, *(
    WATCH_FORMAT if o is FORMAT else o for o in PROBE[1:] if o.param != "output"))

# `kprobe list`: kcat's options, and those of probe's that mean the same there.
LIST_OPTIONS: tuple[Option, ...] = (
    BOOTSTRAP._replace(help=f"Bootstrap address: {_ADDRESS_FORMS}; the first that answers is listed."),
    Option("topics", LIST, ("--topic", "-t"), "Topic to list (repeatable); default all."),
    Option("json_out", FLAG, ("--json", "-J"), "JSON, a superset of `kcat -L -J`.", default=False),
    PROPS, PROP_FILES, NAMESERVERS, TIMEOUT, DEADLINE,
    Option("reachability", SWITCH, ("--reachability", "--no-reachability"),
           "Resolve and connect to every advertised broker and mark what is unreachable from here. Default: on when "
           "stdout is a terminal, off when piped (kcat's exact output for scripts)."),
    Option("no_internal", FLAG, ("--no-internal",), "Hide internal topics (__consumer_offsets, ...).", default=False),
    Option("no_lookup", FLAG, ("--no-lookup",),
           "Do not look up the advertised host names. Without --reachability or -J, each is looked up once (all at "
           "once, within --timeout) and one that does not resolve here is named on stderr; stdout and the exit code "
           "stay kcat's either way.", default=False),
    NO_COLOR, VERBOSE, RESOLVE, CONNECT_TO,
)


# `kprobe fix`: the reports come first, as arguments; the brokers' files and the proof's options follow.
FIX_CONFIGS = Option("configs", LIST, ("--config", "-c"),
                     "The brokers' configuration as you have it (repeatable): server.properties files (one per "
                     "broker), a Compose file, a Strimzi Kafka resource (with its KafkaNodePools), Bitnami chart "
                     "values. The kind is read from each file's content.", metavar="FILE")
FIX_VERIFY = Option("verify", FLAG, ("--verify",),
                    "Also probe from here with each gap endpoint mapped (--connect-to) onto the address that reaches "
                    "its broker today, for the reports of this vantage: the verdict after the change, before it is "
                    "made.", default=False)
FIX_PORT = Option("port", INT, ("--port",),
                  "The port of a listener the change adds (several brokers: this one and the next free ones); by "
                  "default the first port after the listener's own that no file binds or publishes.",
                  check=lambda port, flag: parse_port(str(port), f"{flag} {port}"))
FIX: tuple[Option, ...] = (FIX_CONFIGS, FIX_VERIFY, PROP_FILES, PROPS, FIX_PORT, VANTAGE, NAMESERVERS, TIMEOUT,
                           DEADLINE, NO_COLOR)

# `kprobe aggregate` and `python -m kprobe.aggregate` (spark-submit's entry, which reads them with argparse:
# a cluster's Python may have kprobe's zip and not typer). The report paths come before them, as arguments.
AGGREGATE: tuple[Option, ...] = (
    Option("out", TEXT, ("--out",), "Output directory (replaced whole on success).", required=True),
    Option("kafka", LIST, ("--kafka",), "Also read reports from BOOTSTRAP/TOPIC (Spark's Kafka source)."),
    Option("master", TEXT, ("--master",), "Spark master.", default="local[*]"),
    Option("since", TEXT, ("--since",), "Only reports at or after (RFC 3339 or date)."),
    Option("until", TEXT, ("--until",), "Only reports before (RFC 3339 or date)."),
    Option("no_html", FLAG, ("--no-html",), "Skip report.html.", default=False),
    Option("full", FLAG, ("--full",), "Recompute everything from the inputs (by default a run reads only the files "
           "and messages no earlier run read).", default=False),
    Option("state", TEXT, ("--state",), "Directory of the job's state between runs (default: OUT/.state)."),
    Option("verbose", FLAG, ("--verbose", "-v"), "Show Spark's and the JVM's own lines (kept in a log file "
           "otherwise).", default=False),
    Option("keep_warm", TEXT, ("--keep-warm",), "Run the job in a warm Spark driver kept for the next run, which "
           "exits after this long without one (e.g. 10m: a schedule's period and some); local masters."),
)


def declared(param: str, options: Iterable[Option] = PROBE) -> Option:
    """The declaration of the option a command takes as `param`."""
    return next(o for o in options if o.param == param)


def defaults(options: Iterable[Option]) -> dict[str, Any]:
    """Each option's default, by parameter: what a command gets for the options not given."""
    return {o.param: o.value for o in options}
