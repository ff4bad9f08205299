"""The `kprobe` command: parse, call the library, print, exit with a meaningful code.

Errors become one line and an exit code here and only here. Heavy modules are imported inside
commands, so `kprobe --help` stays fast and `kprobe probe` never imports pyspark.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kprobe import __version__
from kprobe.commands import (
    STATUS_EXIT,
    fail,
    guard,
    kcat_alias,
    list_command,
    probe_command,
    run_plain,
    secrets_in,
    setup_logging,
)
from kprobe.errors import (
    EXIT_GAP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)

_APP_SETTINGS: dict[str, Any] = dict(
    name="kprobe",
    help="Why a Kafka client that reaches the bootstrap broker still fails: probe every advertised "
    "endpoint from here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app = typer.Typer(**_APP_SETTINGS)
lab_app = typer.Typer(help="Real Kafka brokers on loopback, in classic listener set-ups.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")

# Typer either vendors click or uses the installed one: take its exception classes from typer.
_CLICK_USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kprobe {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool | None,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """kprobe: tells a Kafka user, from where they stand, why a client that reaches the bootstrap
    broker still fails.
    """


# Options shared by `probe`, `watch` and (those that mean the same there) `list`: typer reads
# these Annotated aliases like inline ones, so one definition gives every command the same flags,
# environment variables and help.
_ADDRESS_FORMS = "host:port, host, [v6]:port or PROTOCOL://host:port; comma lists and repeats allowed"
BootstrapOpt = Annotated[
    list[str],
    typer.Option("--bootstrap", "-b", envvar="KPROBE_BOOTSTRAP", help=f"Bootstrap address: {_ADDRESS_FORMS}."),
]
ListBootstrapOpt = Annotated[
    list[str],
    typer.Option("--bootstrap", "-b", envvar="KPROBE_BOOTSTRAP",
                 help=f"Bootstrap address: {_ADDRESS_FORMS}; the first that answers is listed."),
]
PropOpt = Annotated[list[str], typer.Option("-X", help="librdkafka property key=value (repeatable).")]
PropFileOpt = Annotated[
    list[str], typer.Option("-F", "--command-config", envvar="KPROBE_CONFIG",
                            help="Client properties file: a Java client.properties (JAAS, key stores) or a "
                            "librdkafka/kcat file, told apart by its keys. Without it, kcat's own file "
                            "($KCAT_CONFIG or ~/.config/kcat.conf) is read when there is one.")
]
NameserverOpt = Annotated[
    list[str],
    typer.Option("--nameserver", "-n", envvar="KPROBE_NAMESERVER",
                 help="Resolve through this DNS server (IP[:PORT]) with dnspython only: what a host on that "
                 "network would see."),
]
TimeoutOpt = Annotated[
    str, typer.Option("--timeout", "-m", envvar="KPROBE_TIMEOUT",
                      help="Per-request timeout (connect, metadata, DNS query).")
]
DeadlineOpt = Annotated[str, typer.Option("--deadline", envvar="KPROBE_DEADLINE", help="Deadline for the whole run.")]
VantageOpt = Annotated[
    str | None,
    typer.Option("--vantage", envvar="KPROBE_VANTAGE", help="Name of this vantage point (default: hostname)."),
]
NoIdentityOpt = Annotated[
    bool, typer.Option("--no-identity", help="Skip asking each endpoint which node it is (DescribeConfigs).")
]
ExpiryOpt = Annotated[
    float, typer.Option("--tls-expiry-days", help="Warn when a broker certificate expires within this many days.")
]
CompareOpt = Annotated[
    list[str],
    typer.Option("--compare-nameserver", help="Also resolve through this DNS server (IP[:PORT]) and report "
                 "names on which it disagrees with the resolver in use (split-horizon DNS)."),
]
ResolveOpt = Annotated[
    list[str],
    typer.Option("--resolve", help="Probe as if the advertised name HOST resolved to the IP ADDR (HOST=ADDR, "
                 "repeatable): try a hosts entry or DNS change before making it. Advertised endpoints only."),
]
ConnectToOpt = Annotated[
    list[str],
    typer.Option("--connect-to", help="Connect to ADDR:PORT wherever HOST:PORT is advertised "
                 "(HOST:PORT=ADDR:PORT, repeatable, as curl's): try a port-forward or NAT rule before making it. "
                 "TLS and identity keep the advertised name."),
]
ControllersOpt = Annotated[
    list[str],
    typer.Option("--controllers", help="KRaft controller listener to check as admin tools reach it "
                 "(bootstrap.controllers, KIP-919): host:port, comma lists and repeats allowed. kprobe asks it for "
                 "the controller endpoints (DescribeCluster) and probes each; -b may then be left out."),
]
RoundtripOpt = Annotated[
    str | None,
    typer.Option("--roundtrip", metavar="TOPIC",
                 help="After the probe, produce one record to every partition of TOPIC with a real client "
                      "(librdkafka, your settings) and read each back; says where it disagrees with the verdict. "
                      "Writes to the cluster: never on by default."),
]
RoundtripCreateOpt = Annotated[
    bool, typer.Option("--roundtrip-create", help="Create the --roundtrip topic when it does not exist "
                                                  "(one partition per broker, the broker's replication factor).")
]
GroupOpt = Annotated[
    str | None,
    typer.Option("--group", metavar="GROUP_ID",
                 help="The consumer group your application uses (default: group.id from -F/-X): kprobe asks which "
                      "broker coordinates it and checks that broker's endpoint and its partition of "
                      "__consumer_offsets."),
]
TransactionalIdOpt = Annotated[
    str | None,
    typer.Option("--transactional-id", metavar="ID",
                 help="The transactional.id your producer uses (default: transactional.id from -F/-X): its "
                      "coordinator and its partition of __transaction_state are checked the same way."),
]
ShareGroupOpt = Annotated[
    str | None,
    typer.Option("--share-group", metavar="GROUP_ID",
                 help="A share group (KIP-932) your application consumes in: kprobe checks that the brokers take "
                      "share groups and probes the group's coordinator."),
]
ClientRackOpt = Annotated[
    str | None,
    typer.Option("--client-rack", metavar="RACK",
                 help="The consumer's client.rack (default: client.rack from -F/-X): with rack-aware brokers it "
                      "reads from the replica in its rack, whose endpoint kprobe then checks for each partition."),
]
TopicOpt = Annotated[
    list[str],
    typer.Option("--topic", "-t", help="A topic your application uses (repeatable): its metadata's errors (it does "
                 "not exist, this principal may not describe it, partitions without a leader) become findings."),
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="text, json, prometheus or markdown (a summary for a ticket); "
                             "default text, json with --json.")
]
WatchFormatOpt = Annotated[
    str | None, typer.Option("--format", help="text (a summary line per run), json (JSON Lines) or prometheus.")
]
JsonOpt = Annotated[bool, typer.Option(
    "--json", "-J", help="Print the JSON report (same as --format json); indented on a terminal, one line when piped.")]
ListJsonOpt = Annotated[bool, typer.Option("--json", "-J", help="JSON, a superset of `kcat -L -J`.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Also write the JSON report to this file, atomically.")
]
OutDirOpt = Annotated[
    Path | None,
    typer.Option("--out", envvar="KPROBE_OUT",
                 help="Write each report to DIR/<date>/<vantage>-<timestamp>-<id>.json (atomic, never overwrites)."),
]
PromFileOpt = Annotated[
    Path | None,
    typer.Option("--prom-file", help="Write Prometheus metrics to this file atomically (node_exporter textfile)."),
]
PublishOpt = Annotated[
    str | None, typer.Option("--publish", envvar="KPROBE_PUBLISH",
                             help="Produce each report to BOOTSTRAP/TOPIC (spooled first, forwarded when reachable).")
]
PublishPropOpt = Annotated[
    list[str], typer.Option("--publish-property", help="librdkafka property for the collector cluster (key=value).")
]
PublishCreateOpt = Annotated[
    bool, typer.Option("--publish-create", help="Create the --publish topic when the collector has none: 6 "
                       "partitions, replication factor 3 (the number of brokers when fewer) and, with 3, "
                       "min.insync.replicas=2.")
]
SpoolOpt = Annotated[
    Path | None, typer.Option("--spool", envvar="KPROBE_SPOOL",
                              help="Spool directory for --publish (default ~/.cache/kprobe/spool).")
]
SpoolMaxOpt = Annotated[int, typer.Option("--spool-max", help="Most reports kept in the spool; the oldest go first.")]
NoColorOpt = Annotated[bool, typer.Option("--no-color", help="No colours, even on a terminal.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Progress and client log lines on stderr.")]


@app.command()
def probe(
    bootstrap: BootstrapOpt = [],  # noqa: B006 - typer reads the default, never mutates it
    prop: PropOpt = [],  # noqa: B006
    prop_file: PropFileOpt = [],  # noqa: B006
    nameserver: NameserverOpt = [],  # noqa: B006
    timeout: TimeoutOpt = "5s",
    deadline: DeadlineOpt = "30s",
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    out_dir: OutDirOpt = None,
    prom_file: PromFileOpt = None,
    publish: PublishOpt = None,
    publish_property: PublishPropOpt = [],  # noqa: B006
    publish_create: PublishCreateOpt = False,
    spool: SpoolOpt = None,
    spool_max: SpoolMaxOpt = 10_000,
    vantage: VantageOpt = None,
    no_color: NoColorOpt = False,
    verbose: VerboseOpt = False,
    no_identity: NoIdentityOpt = False,
    tls_expiry_days: ExpiryOpt = 30.0,
    compare_nameserver: CompareOpt = [],  # noqa: B006
    resolve: ResolveOpt = [],  # noqa: B006
    connect_to: ConnectToOpt = [],  # noqa: B006
    controllers: ControllersOpt = [],  # noqa: B006
    roundtrip: RoundtripOpt = None,
    roundtrip_create: RoundtripCreateOpt = False,
    group: GroupOpt = None,
    transactional_id: TransactionalIdOpt = None,
    share_group: ShareGroupOpt = None,
    client_rack: ClientRackOpt = None,
    topic: TopicOpt = [],  # noqa: B006
) -> None:
    """Bootstrap against each address separately, then resolve and connect to every endpoint the
    brokers advertise, from here. With --controllers, the KRaft controllers too, as admin tools reach them.

    Exit 0 no gap, 1 gap, 2 bad input, 3 no bootstrap (or controller) answered or an internal error,
    130 interrupted.
    """
    # Every parameter, by name (locals() holds only them here): the run itself is kprobe.commands', which
    # reads a plain command line without typer (issue 33).
    raise typer.Exit(probe_command(**locals()))


@app.command()
def watch(
    bootstrap: BootstrapOpt = [],  # noqa: B006
    every: Annotated[str, typer.Option("--every", help="Start a probe this often (e.g. 60s, 5m).")] = "60s",
    jitter: Annotated[str, typer.Option("--jitter", help="Random delay up to this long before each run.")] = "0s",
    count: Annotated[int | None, typer.Option("--count", help="Stop after this many runs.")] = None,
    prop: PropOpt = [],  # noqa: B006
    prop_file: PropFileOpt = [],  # noqa: B006
    nameserver: NameserverOpt = [],  # noqa: B006
    timeout: TimeoutOpt = "5s",
    deadline: DeadlineOpt = "30s",
    json_out: JsonOpt = False,
    fmt: WatchFormatOpt = None,
    out_dir: OutDirOpt = None,
    prom_file: PromFileOpt = None,
    publish: PublishOpt = None,
    publish_property: PublishPropOpt = [],  # noqa: B006
    publish_create: PublishCreateOpt = False,
    spool: SpoolOpt = None,
    spool_max: SpoolMaxOpt = 10_000,
    vantage: VantageOpt = None,
    no_color: NoColorOpt = False,
    verbose: VerboseOpt = False,
    no_identity: NoIdentityOpt = False,
    tls_expiry_days: ExpiryOpt = 30.0,
    compare_nameserver: CompareOpt = [],  # noqa: B006
    resolve: ResolveOpt = [],  # noqa: B006
    connect_to: ConnectToOpt = [],  # noqa: B006
    controllers: ControllersOpt = [],  # noqa: B006
    roundtrip: RoundtripOpt = None,
    roundtrip_create: RoundtripCreateOpt = False,
    group: GroupOpt = None,
    transactional_id: TransactionalIdOpt = None,
    share_group: ShareGroupOpt = None,
    client_rack: ClientRackOpt = None,
    topic: TopicOpt = [],  # noqa: B006
) -> None:
    """Probe on a schedule in one long-lived process, one run at a time.

    A late run skips slots instead of piling up; each report goes to --out / --publish / --prom-file,
    one summary line (or JSON line) per run on stdout. SIGTERM ends it cleanly (exit 0).
    """
    from kprobe.options import probe_options, watch_options
    from kprobe.delivery.deliver import outputs_from
    from kprobe.delivery.watch import run_watch
    from kprobe.output.formats import WATCH

    setup_logging(verbose)
    options, schedule = watch_options(probe_options(
        bootstrap=bootstrap, props=prop, prop_files=prop_file, nameservers=nameserver, timeout=timeout,
        deadline=deadline, vantage=vantage, identity=not no_identity, tls_expiry_days=tls_expiry_days,
        compare_nameservers=compare_nameserver, resolve=resolve, connect_to=connect_to,
        controllers=controllers, roundtrip=roundtrip, roundtrip_create=roundtrip_create, group=group,
        transactional_id=transactional_id, share_group=share_group, client_rack=client_rack, topics=topic),
        every=every, jitter=jitter, count=count)
    outputs = outputs_from(
        fmt=fmt, json_out=json_out, no_color=no_color, out_dir=out_dir, prom_file=prom_file, publish=publish,
        publish_props=publish_property, spool=spool, spool_max=spool_max, names=WATCH,
        publish_create=publish_create)
    raise typer.Exit(run_watch(options, outputs, schedule))


@app.command("list")
def list_(
    bootstrap: ListBootstrapOpt = [],  # noqa: B006
    topic: Annotated[
        list[str], typer.Option("--topic", "-t", help="Topic to list (repeatable); default all.")
    ] = [],  # noqa: B006
    json_out: ListJsonOpt = False,
    prop: PropOpt = [],  # noqa: B006
    prop_file: PropFileOpt = [],  # noqa: B006
    nameserver: NameserverOpt = [],  # noqa: B006
    timeout: TimeoutOpt = "5s",
    deadline: DeadlineOpt = "30s",
    reachability: Annotated[
        bool | None,
        typer.Option("--reachability/--no-reachability",
                     help="Resolve and connect to every advertised broker and mark what is unreachable from here. "
                     "Default: on when stdout is a terminal, off when piped (kcat's exact output for scripts)."),
    ] = None,
    no_internal: Annotated[
        bool, typer.Option("--no-internal", help="Hide internal topics (__consumer_offsets, ...).")
    ] = False,
    no_color: NoColorOpt = False,
    verbose: VerboseOpt = False,
    resolve: ResolveOpt = [],  # noqa: B006
    connect_to: ConnectToOpt = [],  # noqa: B006
) -> None:
    """The `kcat -L` listing (brokers, topics, partitions), and which partitions the gap breaks from here.

    Exit 0 ok, 1 topic errors / offline partitions / unreachable leaders, 2 bad input, 3 no bootstrap
    answered or an internal error, 130 interrupted.
    """
    raise typer.Exit(list_command(**locals()))  # as probe: every parameter by name, the run in kprobe.commands


ReportPathsArg = Annotated[
    list[str] | None,
    typer.Argument(help="Report files (.json, .jsonl, gzip too), directories written by --out, or - for standard "
                   "input.", show_default=False),
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Only reports started at or after this time: RFC 3339, "
                                              "a date, or how long ago (90m, 2h, 7d).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Only reports started before this time (as --since).")]
ShowVantageOpt = Annotated[list[str], typer.Option("--vantage", help="Only reports from this vantage (repeatable).")]
StatusOpt = Annotated[list[str], typer.Option("--status", help="Only reports with this verdict: ok, gap, failed or "
                                              "interrupted (repeatable, or comma-separated).")]


def _filters(since: str | None, until: str | None, vantage: list[str], status: list[str]) -> Any:
    from kprobe.saved.reading import Filters, parse_when

    statuses = frozenset(word.strip().lower() for value in status for word in value.split(",") if word.strip())
    bad = sorted(statuses - {"ok", "gap", "failed", "interrupted"})
    if bad:
        raise UsageError(f"bad --status {bad[0]!r}: use ok, gap, failed or interrupted")
    return Filters(since=parse_when(since, "--since") if since else None,
                   until=parse_when(until, "--until") if until else None,
                   vantages=frozenset(vantage), statuses=statuses)


def _say_skips(readers: list[Any]) -> None:
    for reader in readers:
        message = reader.skips.message()
        if message:
            from kprobe.output.sanitize import safe

            sys.stderr.write(f"kprobe: {safe(message, limit=2000)}\n")


@app.command()
def show(
    paths: ReportPathsArg = None,
    fmt: Annotated[str | None, typer.Option("--format", help="text (as the probe printed it), json, markdown or "
                                            "prometheus (one report).")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Same as --format json.")] = False,
    summary: Annotated[bool, typer.Option("--summary", help="One line per report: when, vantage, cluster, verdict "
                                          "and the first finding.")] = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    vantage: ShowVantageOpt = [],  # noqa: B006
    status: StatusOpt = [],  # noqa: B006
    no_color: NoColorOpt = False,
) -> None:
    """Print saved reports as the live run printed them (or in another format), one after another.

    Exit 0 when the reports were read, 2 when a path named is not a readable kprobe v1 report.
    """
    from kprobe.output.formats import SHOW, choose
    from kprobe.output.sanitize import use_color
    from kprobe.saved.show import ShowOptions
    from kprobe.saved.show import show as show_reports

    chosen = choose(fmt, json_out, SHOW)
    if summary and chosen != "text":
        raise UsageError("--summary prints one text line per report: leave out --format/--json")
    filters = _filters(since, until, vantage, status)
    options = ShowOptions(fmt=chosen, summary=summary, color=use_color(no_color), indent=sys.stdout.isatty())
    shown, reader = show_reports(paths or ["-"], filters, options, sys.stdout)
    _say_skips([reader])
    if not shown:
        if not reader.seen:
            raise UsageError(f"no kprobe report in {' '.join(paths or ['-'])}")
        sys.stderr.write(f"kprobe: none of the {reader.seen} reports matches the filters\n")


@app.command()
def diff(
    a: Annotated[str, typer.Argument(help="The first report (a file, a directory written by --out, or -); "
                                     "A@VANTAGE takes only that vantage's reports.", show_default=False)],
    b: Annotated[str, typer.Argument(help="The report to compare it with (a directory: the newest report of each "
                                     "cluster is compared); B@VANTAGE as for A, so one --out directory of "
                                     "several vantages reads `reports/@office reports/@vpn`.", show_default=False)],
    fmt: Annotated[str | None, typer.Option("--format", help="text, json or markdown.")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Same as --format json.")] = False,
    a_vantage: Annotated[str | None, typer.Option("--a-vantage", help="Only A's reports from this vantage (as "
                                                  "A@VANTAGE).")] = None,
    b_vantage: Annotated[str | None, typer.Option("--b-vantage", help="Only B's reports from this vantage (as "
                                                  "B@VANTAGE).")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    vantage: ShowVantageOpt = [],  # noqa: B006
    status: StatusOpt = [],  # noqa: B006
) -> None:
    """What differs between two reports: two vantages, or before and after a change.

    The filters choose among the reports of a directory or a stream, on both sides (a side's own
    vantage replaces --vantage); a side that is one report (a file, or one piped in) is compared as
    it is. Exit 0 when the verdicts agree, 1 when they differ (as diff does), 2 on bad input.
    """
    from kprobe.output.formats import DIFF, choose
    from kprobe.saved.show import diff_reports

    chosen = choose(fmt, json_out, tuple(DIFF))
    diffs, unpaired, readers = diff_reports(a, b, _filters(since, until, vantage, status), a_vantage=a_vantage,
                                            b_vantage=b_vantage)
    _say_skips(readers)
    sys.stdout.write(DIFF[chosen](diffs, [u.__dict__ for u in unpaired]))
    raise typer.Exit(EXIT_GAP if unpaired or any(d.differs for d in diffs) else EXIT_OK)


@app.command()
def serve(
    listen: Annotated[str, typer.Option("--listen", envvar="KPROBE_LISTEN",
                                        help="Address to serve HTTP on (HOST:PORT). Loopback by default: anyone "
                                        "who reaches it can have kprobe probe.")] = "127.0.0.1:9464",
    config: Annotated[str | None, typer.Option("--config", envvar="KPROBE_SERVE_CONFIG",
                                               help="YAML file of modules (how to probe) and targets (what may be "
                                               "probed), as blackbox_exporter's.")] = None,
    allow_target: Annotated[list[str], typer.Option("--allow-target", help="A host:port pattern a scrape may name as "
                                                    "its target (repeatable): a name glob, an IP, a CIDR such as "
                                                    "10.0.0.0/8:9092 or [fd00::/8]:*; none: only the config's "
                                                    "targets, and without those nothing.")] = [],  # noqa: B006
    max_concurrent: Annotated[int, typer.Option("--max-concurrent", help="Probes at once; one more is answered 503.")]
    = 16,
    max_connections: Annotated[int, typer.Option("--max-connections", help="HTTP connections open at once; past it "
                                                 "the oldest still sending its request is closed, or the new one is "
                                                 "answered 503.")] = 256,
    vantage: VantageOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """A Prometheus exporter in blackbox_exporter's style: GET /probe?target=HOST:PORT&module=NAME runs one
    probe within the scrape's timeout and answers its metrics; /metrics has the exporter's own.

    Runs until SIGTERM or Ctrl-C (exit 0); 2 on bad options or config.
    """
    import importlib.util
    import signal
    import threading

    if importlib.util.find_spec("prometheus_client") is None:
        raise UsageError("kprobe serve needs prometheus-client: pip install 'kprobe[serve]'")
    from kprobe.serve.allow import parse_patterns
    from kprobe.serve.exporter import ServeOptions, is_loopback, parse_listen
    from kprobe.serve.exporter import serve as run_server
    from kprobe.serve.modules import default_config, load_config

    setup_logging(verbose)
    if verbose:
        import logging

        logging.getLogger("kprobe.serve").setLevel(logging.DEBUG)
    host, port = parse_listen(listen)
    if max_concurrent < 1:
        raise UsageError(f"bad --max-concurrent {max_concurrent}: give at least 1")
    if max_connections < 1:
        raise UsageError(f"bad --max-connections {max_connections}: give at least 1")
    allow = parse_patterns(allow_target, "bad --allow-target")
    settings = load_config(config) if config else default_config()
    options = ServeOptions(host=host, port=port, config=settings, allow=allow, max_concurrent=max_concurrent,
                           vantage=vantage, max_connections=max_connections)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def ready(address: tuple[Any, ...]) -> None:
        shown = f"[{address[0]}]" if ":" in str(address[0]) else str(address[0])
        sys.stderr.write(f"kprobe serve: listening on http://{shown}:{address[1]} "
                         f"(modules: {', '.join(sorted(settings.modules))})\n")
        if not is_loopback(host):
            sys.stderr.write("kprobe serve: warning: listening beyond loopback: anyone who reaches this address can "
                             "make kprobe probe the allowed targets\n")
        if not allow_target and not settings.targets:
            sys.stderr.write("kprobe serve: warning: no target is allowed: every /probe will be refused until "
                             "--allow-target or the config's targets: name some\n")
        sys.stderr.flush()

    run_server(options, on_ready=ready, stop=stop)


@app.command()
def aggregate(
    out: Annotated[str, typer.Option("--out", help="Output directory (replaced whole on success).")],
    inputs: Annotated[
        list[str] | None, typer.Argument(help="Report files or directories (local, s3a://, hdfs://).")
    ] = None,
    kafka: Annotated[
        list[str], typer.Option("--kafka", help="Also read reports from BOOTSTRAP/TOPIC (Spark's Kafka source).")
    ] = [],  # noqa: B006
    master: Annotated[str, typer.Option("--master", help="Spark master.")] = "local[*]",
    since: Annotated[str | None, typer.Option("--since", help="Only reports at or after (RFC 3339 or date).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only reports before (RFC 3339 or date).")] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help="Skip report.html.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Recompute everything from the inputs (by default a run "
                                       "reads only the files and messages no earlier run read).")] = False,
    state: Annotated[str | None, typer.Option("--state", help="Directory of the job's state between runs "
                                              "(default: OUT/.state).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Spark's and the JVM's own lines "
                                          "(kept in a log file otherwise).")] = False,
    keep_warm: Annotated[str | None, typer.Option("--keep-warm", help="Run the job in a warm Spark driver kept "
                                                  "for the next run, which exits after this long without one "
                                                  "(e.g. 10m: a schedule's period and some); local masters.")]
    = None,
) -> None:
    """Aggregate reports from many vantages with PySpark.

    Reachability per endpoint and vantage, cluster summaries, findings by day, advertised-endpoint
    drift, quarantine of bad records, and report.html.
    """
    # The same checks as `python -m kprobe.aggregate` (pyspark and Java present, times, Kafka
    # targets, inputs, and an --out whose replacement cannot delete inputs or others' files).
    from kprobe.aggregate.checks import keep_warm_seconds, validate

    inputs = inputs or []
    topics = validate(inputs, out, kafka, since, until, state, full)
    warm = keep_warm_seconds(keep_warm)
    from kprobe.aggregate.entry import command
    from kprobe.aggregate.plan import JobOptions

    # With nothing new: one line, and PySpark is never imported (kprobe.aggregate.plan.current).
    options = JobOptions(tuple(inputs), out, master, since, until, not no_html, topics, full=full, state=state)
    typer.echo("\n".join(command(options, verbose=verbose, where=True, keep_warm=warm)))


@app.command()
def check(
    files: Annotated[list[str], typer.Argument(help="server.properties files (several: one cluster), Compose files, a "
                                               "Strimzi Kafka resource with its KafkaNodePools, Bitnami chart "
                                               "values. The kind is read from each file's content.",
                                               show_default=False)],
    probe: Annotated[bool, typer.Option("--probe", help="Then probe the predicted bootstrap addresses from here "
                                        "(kprobe's probe run) and set prediction and observation side by side.")]
    = False,
    nameserver: NameserverOpt = [],  # noqa: B006
    timeout: TimeoutOpt = "5s",
    deadline: DeadlineOpt = "30s",
    prop: PropOpt = [],  # noqa: B006
    prop_file: PropFileOpt = [],  # noqa: B006
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Print the kprobe.check/v1 JSON report (same as "
                                           "--format json).")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="text, json or markdown (a summary for a ticket).")]
    = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the JSON report to this file, "
                                                "atomically.")] = None,
    vantage: VantageOpt = None,
    no_color: NoColorOpt = False,
) -> None:
    """Predict the gap from listener settings, before anything is deployed: per broker and listener, where it
    binds, what it advertises, its protocol, for whom it is meant and how clients on each network fare; then
    findings with fixes.

    Exit 0 no gap, 1 gap (or, with --probe, an observation contradicting the prediction), 2 bad input, 3 with
    --probe when no bootstrap answered.
    """
    from kprobe.options import parse_duration, parse_nameserver
    from kprobe.output import check as check_output
    from kprobe.output.formats import CHECK, Style, choose
    from kprobe.output.sanitize import use_color

    chosen = choose(fmt, json_out, tuple(CHECK))
    if prop and not probe:  # -F may come from KPROBE_CONFIG, set for probe runs: it only matters with --probe
        raise UsageError("-X sets client settings for --probe: add --probe, or leave it out")
    nameservers = [parse_nameserver(n) for n in nameserver]
    per_request = parse_duration(timeout, "--timeout")
    parse_duration(deadline, "--deadline")
    if output is not None:
        from kprobe.output.files import check_file

        check_file(output, "--output")
    from kprobe.runs.check import predict, probe_targets, with_observations

    report = predict(files, nameservers=nameservers, timeout=per_request, vantage=vantage)
    if probe:
        targets = probe_targets(report)
        if not targets:
            raise UsageError("--probe: no listener has a bootstrap address from here to probe (each is unpublished, "
                             "cluster-internal or decided at deploy time)")
        from kprobe.options import probe_options
        from kprobe.delivery.progress import run_in_foreground
        from kprobe.runs.probe import ProbeRun

        options = probe_options(bootstrap=targets, props=prop, prop_files=prop_file, nameservers=nameserver,
                                timeout=timeout, deadline=deadline, vantage=vantage)
        report = with_observations(report, run_in_foreground(ProbeRun(options)))
    if output is not None:
        from kprobe.output.files import write_atomic

        write_atomic(output, check_output.render_json(report, indent=True))
    sys.stdout.write(CHECK[chosen](report, Style(color=use_color(no_color), indent=sys.stdout.isatty())))
    raise typer.Exit(STATUS_EXIT[report.status])


@app.command()
def schema(
    check: Annotated[bool, typer.Option("--check", help="The schema of `kprobe check`'s report (kprobe.check/v1) "
                                        "instead.")] = False,
) -> None:
    """Print the JSON Schema of the report (kprobe.report/v1), or with --check of kprobe check's (kprobe.check/v1)."""
    if check:
        from kprobe.output.check import schema_text as check_schema_text

        sys.stdout.write(check_schema_text())
        return
    from kprobe.output.json_report import schema_text

    sys.stdout.write(schema_text())


@app.command()
def demo(no_color: NoColorOpt = False) -> None:
    """Start the `listeners` lab (the LISTENER_BOB / FRED / ALICE broker), probe it through each
    listener as a client on the Docker host would, print the reports, stop the lab.
    """
    from kprobe.delivery.deliver import use_color
    from kprobe.lab.demo import run_demo

    run_demo(color=use_color(no_color))


@lab_app.command("list")
def lab_list(
    netns: Annotated[bool, typer.Option("--netns", help="The namespace scenarios (`kprobe lab up --netns`).")] = False,
) -> None:
    """The scenarios, one line each."""
    from kprobe.lab.netns_scenarios import NETNS_SCENARIOS
    from kprobe.lab.scenarios import SCENARIOS

    summaries = ({name: s.summary for name, s in NETNS_SCENARIOS.items()} if netns
                 else {name: s.summary for name, s in SCENARIOS.items()})
    width = max(len(name) for name in summaries)
    for name, summary in summaries.items():
        typer.echo(f"{name:<{width}}  {summary}")


@lab_app.command("up")
def lab_up(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `kprobe lab list`).")],
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Start in the background, beside other detached scenarios; stop "
                           "with `kprobe lab down [SCENARIO]`.")
    ] = False,
    backend: Annotated[
        str | None, typer.Option("--backend", envvar="KPROBE_LAB_BACKEND", help="native, docker or auto.")
    ] = None,
    netns: Annotated[
        bool, typer.Option("--netns", help="A namespace scenario: brokers, routers and vantages in network "
                           "namespaces (root; see `kprobe lab exec`).")
    ] = False,
) -> None:
    """Start a scenario's brokers and DNS views and print how to reach them."""
    if netns:
        from kprobe.lab import netns as netns_lab

        if detach:
            for line in netns_lab.start_detached(scenario):
                typer.echo(line)
            return
        netns_lab.run_foreground(scenario)
        return
    from kprobe.lab import choose_backend, get_scenario
    from kprobe.lab.supervisor import run_foreground, start_detached

    get_scenario(scenario)
    chosen = choose_backend(backend)
    if detach:
        for line in start_detached(scenario, chosen):
            typer.echo(line)
        return
    run_foreground(scenario, chosen)


@lab_app.command("down")
def lab_down(
    scenario: Annotated[str | None, typer.Argument(help="The scenario to stop; without it, every detached lab.",
                                                   show_default=False)] = None,
) -> None:
    """Stop labs started with `kprobe lab up --detach`: one scenario, or all of them (and any namespace lab)."""
    from kprobe.lab.netns_scenarios import NETNS_SCENARIOS
    from kprobe.lab.supervisor import stop_detached

    if scenario is None or scenario in NETNS_SCENARIOS:
        import shutil

        if os.geteuid() == 0 and shutil.which("ip"):  # namespaces exist only where root made them
            from kprobe.lab.netns import stop_all

            lines = stop_all(scenario)
            for line in lines:
                typer.echo(line)
            if scenario is not None and not lines:
                typer.echo(f"no namespace lab {scenario} is running")
        if scenario is not None:
            return
    if scenario is not None:
        from kprobe.lab import get_scenario

        get_scenario(scenario)  # a typo gets the list of scenarios, not "not running"
    for line in stop_detached(scenario):
        typer.echo(line)


@lab_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def lab_exec(
    ctx: typer.Context,
    vantage: Annotated[str, typer.Argument(help="A vantage of the running namespace lab (laptop, vpc, ...).")],
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="The namespace lab of this scenario, "
                                                 "where several run; else the newest with that vantage.")] = None,
) -> None:
    """Run a command inside a vantage of the namespace lab: `kprobe lab exec laptop -- kprobe probe -b ...`.

    The command runs in the vantage's network namespace with the vantage's own /etc/hosts; its exit
    code is the command's.
    """
    import shutil

    from kprobe.lab.netns import exec_argv, find_vantage

    command = ctx.args[1:] if ctx.args[:1] == ["--"] else list(ctx.args)
    if not command:
        raise UsageError("name a command to run: kprobe lab exec VANTAGE -- CMD [ARGS...]")
    namespace, workdir = find_vantage(vantage, scenario)
    if command[0] == "kprobe" and not shutil.which("kprobe"):
        from kprobe.private import python_argv

        command = python_argv("kprobe", *command[1:])  # the kprobe running this, off PATH (a venv)
    sys.stdout.flush()
    os.execvp("ip", exec_argv(namespace, workdir, vantage, command))


def _interruptible(callback: Callable[..., Any]) -> Callable[..., Any]:
    """The command, its Ctrl-C turned into click's Abort, which `_run_typer` says in one line.

    Why: typer catches KeyboardInterrupt around every command and returns a bare exit code 130,
    without a word (`guard` never sees it), which a user cannot tell from a crash; and 130 alone
    cannot be told apart afterwards from a command's own "interrupted" status (a probe's partial
    report). The signature is the command's (`functools.wraps`): typer reads its options from it.
    """
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            sys.stderr.write("\n")  # as `guard` does: the line starts below the terminal's ^C
            raise typer.Abort() from None
    return run


for _group in (app, lab_app):
    for _info in _group.registered_commands:
        if _info.callback is not None:
            _info.callback = _interruptible(_info.callback)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command the arguments name, when they name one.

    Typer turns every registered command into a click command before running any, evaluating
    each signature's annotations: for all nine commands that is about 50 ms of every run's
    start-up, a quarter of it. A run needs one. `kprobe --help`, `kprobe lab ...`, a typo'd
    command and anything else get the whole app, so listings and suggestions stay complete.
    """
    if not args:
        return app
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        if name == args[0]:
            lean = typer.Typer(**_APP_SETTINGS)
            lean.registered_callback = app.registered_callback
            lean.registered_commands = [info]
            return lean
    return app


def main() -> None:
    """Console entry point: one line per error, never a traceback, never a secret (kprobe.commands.guard)."""
    argv = sys.argv[1:]
    run_plain(argv)  # a plain `probe` or `list` runs there, without typer; it returns for everything else
    args = kcat_alias(argv)
    secrets = secrets_in(argv)
    guard(lambda: _run_typer(args, secrets), secrets)


def _run_typer(args: list[str], secrets: list[str]) -> int:
    """The app on these arguments: its exit code, or one line for what click refused."""
    try:
        # Without standalone mode, click returns an Exit's code instead of raising it.
        code = _app_for(args)(args=args, standalone_mode=False, prog_name="kprobe")
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        fail("kprobe: interrupted", EXIT_INTERRUPTED, secrets)
    except _CLICK_USAGE_ERROR as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(exc.ctx.get_help() + "\n")  # type: ignore[attr-defined]
            return EXIT_USAGE
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "kprobe"
        fail(f"kprobe: error: {exc.format_message()} (see `{command} --help`)", EXIT_USAGE,  # type: ignore[attr-defined]
             secrets)
    except _CLICK_EXCEPTION as exc:
        fail(f"kprobe: error: {exc.format_message()}", exc.exit_code, secrets)  # type: ignore[attr-defined]
    return code if isinstance(code, int) else EXIT_OK
