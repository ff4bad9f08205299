"""Generate the documentation pages that must never go stale.

    python docs/generate.py     # starts the lab scenarios named in DOC_LABS

- cli.md: the CLI reference, walked from the typer app itself.
- why.md: "Why can I connect to the broker but my client still fails?", with kprobe's own output
  from real lab runs of the seeds' cases.
- report-schema.md: the report's JSON Schema, field by field, and a sample report from a lab run.
- findings-examples.md: every finding the lab can stage, as `kprobe probe --json` reports it in a
  real run, with the command line that staged it; the codes the loopback-only lab cannot stage,
  with the tests that prove them.

tests/test_docs_site.py regenerates all four and fails if the committed pages differ, and
builds the site with `mkdocs build --strict`.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
# The lab scenarios the pages are made from; tests/test_docs_site.py starts the same set (shared
# with the other tests of the session, so a lab added here costs probes, not another start).
DOC_LABS = ("listeners", "cloud", "three-brokers", "tls", "sasl", "sni-ingress", "oauth", "controllers", "dual-stack",
            "port-forward", "nodeport")


# -- CLI reference ----------------------------------------------------------------------------

def cli_reference() -> str:
    """Every command and option, from the typer app (so a new option cannot be forgotten)."""
    import typer.main

    from kprobe.cli.app import app

    root = typer.main.get_command(app)
    out = ["# CLI reference", "", "Generated from the program itself by `docs/generate.py`; "
           "`kprobe COMMAND --help` prints the same.", ""]

    def walk(command: Any, path: list[str]) -> None:
        name = " ".join(path)
        subcommands = getattr(command, "commands", None)
        if path and not subcommands:
            out.append(f"## `{name}`")
            out.append("")
            help_text = (command.help or "").strip()
            out.extend([help_text, ""] if help_text else [])
            rows = []
            for param in command.params:
                if param.param_type_name == "argument":
                    rows.append((f"`{param.name.upper()}`", "argument", "required" if param.required else "optional"))
                    continue
                flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
                default = param.default if param.default not in (None, [], (), False) else ""
                envvar = f" (env `{param.envvar}`)" if getattr(param, "envvar", None) else ""
                rows.append((flags, ((param.help or "") + envvar).replace("|", "\\|"),
                             f"`{default}`" if default != "" else ""))
            if rows:
                out.extend(["| option | meaning | default |", "| --- | --- | --- |"])
                out.extend(f"| {a} | {b} | {c} |" for a, b, c in rows)
                out.append("")
        for sub_name in sorted(subcommands or {}):
            walk(subcommands[sub_name], [*path, sub_name])

    walk(root, ["kprobe"])
    out.append("`kprobe -L ...` is accepted for `kprobe list ...` (kcat's muscle memory).")
    return "\n".join(out) + "\n"


# -- lab runs -----------------------------------------------------------------------------------

_TLS_INTERNAL = "kafka-tls.internal.kprobe.test"  # the tls lab's internal name (kprobe/lab/scenarios.py)

# The seeds' classic ports, for the two labs that stand for the seeds' set-ups (other labs use
# listener names like INTERNAL too, with no classic port: they get named placeholders).
CLASSIC_PORTS = {("listeners", "LISTENER_FRED"): 9092, ("listeners", "LISTENER_BOB"): 29092,
                 ("listeners", "LISTENER_ALICE"): 29094, ("cloud", "INTERNAL"): 19092, ("cloud", "EXTERNAL"): 9093,
                 ("port-forward", "PLAIN"): 9092}


# A port as kprobe writes one: `host:PORT` (also `[::1]:PORT` and JSON's `"port": PORT`), `port PORT`,
# `port A/B/C`, and the list of a NodePort shape's ports, "each with a port of its own (A, B)". A port
# written another way stays a number, and the page then differs at every run: seen at once, never a flake.
PORT_PLACES = re.compile(r'(:|\bports? |"port": |(?<=\d/)|(?<=own \()|(?<=\d, )(?=\d+(?:, \d+)*\)))(\d+)(?!\d)')


def normalise(text: str, labs: list[Any], extra: dict[str, str] | None = None) -> str:
    """Everything that changes from run to run becomes a fixed name, so the pages are byte-stable.

    Whole strings first (`extra`, cluster ids, `ip:port` of DNS servers), then bare port numbers:
    a port could otherwise match digits inside a cluster id, and a DNS server's port is only
    recognisable with its address. Lab listener ports become the seeds' classic ports where there
    is one, otherwise `<LISTENER port>`; controller, blackhole and impostor ports are named too.
    Certificate dates and days left, which move with the clock, become `<date>` and `<days>`.
    """
    for literal, name in (extra or {}).items():
        text = text.replace(literal, name)
    for lab in labs:
        text = text.replace(lab.cluster_id, f"<{lab.scenario.name} cluster id>")
        for view, server in lab.dns.items():
            text = text.replace(server.nameserver, f"<{view} view>")
    ports: dict[int, str] = {}
    for lab in labs:
        for node in lab.nodes.values():
            ports[node.controller_port] = "<controller port>"
            for name, rl in node.listeners.items():
                ports[rl.port] = str(CLASSIC_PORTS.get((lab.scenario.name, name), f"<{name} port>"))
        ports.update({hole.port: f"<{name} port>" for name, hole in lab.blackholes.items()})
        ports.update({imp.port: f"<{name} port>" for name, imp in lab.impostors.items()})
        # An SNI proxy listens on 443 where the lab may bind it, on a free port otherwise: 443 either way.
        ports.update({proxy.port: str(proxy.spec.port) for proxy in getattr(lab, "proxies", {}).values()})
        # A forward (a port-forward, a node port) shows the port it prefers (9092, 31090, ...), got or not.
        forwards = getattr(lab, "forwards", None)
        if forwards is not None:
            ports.update({port: str(forwards.specs[name].port or f"<{name} port>")
                          for name, port in forwards.ports.items()})
    # Only where a port is written (PORT_PLACES): a lab's random port can be any number from 20000 up,
    # and kprobe's own texts hold such numbers too (NodePorts' 30000-32767, a default of 30000 ms).
    # One pass, so a placeholder put in for one port is never read as another.
    text = PORT_PLACES.sub(lambda m: m.group(1) + ports.get(int(m.group(2)), m.group(2)), text)
    text = re.sub(r"[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4} GMT", "<date>", text)
    text = re.sub(r"-?\d+(\.\d+)? days left", "<days> days left", text)
    text = re.sub(r"\(_ssl\.c:\d+\)", "(_ssl.c)", text)  # CPython's source line: moves between versions
    text = re.sub(r"librdkafka \d+\.\d+\.\d+\S*", "librdkafka <version>", text)  # moves with confluent-kafka
    return text.replace("1.0ms", "…    ")  # same width: tables stay aligned


def _run(bootstrap: str, nameserver: str, vantage: str) -> Any:
    """One real probe, as a client on the network of `nameserver` would see the cluster."""
    from kprobe.options import ProbeOptions, parse_address, parse_nameserver
    from kprobe.runs.probe import run_probe

    return run_probe(ProbeOptions(bootstraps=[parse_address(bootstrap)], nameservers=[parse_nameserver(nameserver)],
                                  timeout=2, vantage=vantage))


def _probe(bootstrap: str, nameserver: str, vantage: str) -> str:
    from kprobe.output import text

    return text.render(_fixed_timings(_run(bootstrap, nameserver, vantage)))


def _fixed_timings(report: Any) -> Any:
    """Every duration set to 1 ms, so tables keep their widths from run to run (shown as `…`)."""
    from kprobe.records import replace

    bootstraps = tuple(replace(b, ms=1.0) for b in report.bootstraps)
    endpoints = tuple(
        replace(r, dns=replace(r.dns, ms=1.0), tcp=tuple(replace(t, ms=1.0) for t in r.tcp)) for r in report.endpoints
    )
    return replace(report, bootstraps=bootstraps, endpoints=endpoints, duration_ms=1.0)


def why_page(listeners: Any, cloud: Any) -> str:
    """The explainer, with real output; `listeners` and `cloud` are running labs."""
    cases = [
        ("A client on the Docker host, through the published port (LISTENER_FRED)",
         "The broker advertises `localhost:9092` on this listener. From the Docker host that is the published "
         "port, so every connection after the bootstrap lands on the broker: no gap.",
         listeners.bootstrap("LISTENER_FRED"), listeners.nameserver("host"), "docker-host"),
        ("A client on the Docker host, through the Docker-network listener (LISTENER_BOB)",
         "The bootstrap connects (by address), but this listener advertises `kafka0:29092`, a name only Docker's "
         "DNS knows. The client's first metadata request succeeds; every request after it fails to resolve.",
         listeners.real_endpoint("LISTENER_BOB"), listeners.nameserver("host"), "docker-host"),
        ("A client inside the Docker network (LISTENER_BOB)",
         "The same listener, seen from a container on the Docker network: `kafka0` resolves there, no gap. "
         "The listener is right for its network; the client on the host was using the wrong one.",
         listeners.bootstrap("LISTENER_BOB"), listeners.nameserver("docker"), "docker-network"),
        ("A listener that advertises a name nobody resolves (LISTENER_ALICE)",
         "`never-gonna-give-you-up` resolves nowhere: every client fails after bootstrap, wherever it runs.",
         listeners.real_endpoint("LISTENER_ALICE"), listeners.nameserver("host"), "docker-host"),
        ("Cloud, one listener: a client on the internet",
         "The public EC2 name bootstraps fine; the listener advertises the VPC-internal "
         "`ip-172-31-18-160.us-west-2.compute.internal`, which resolves only inside the VPC. Because the identity "
         "check shows the bootstrap reaches this very broker, kprobe proposes the listener lines to add.",
         cloud.bootstrap("INTERNAL"), cloud.nameserver("internet"), "internet"),
        ("Cloud, one listener: a client inside the VPC",
         "Inside the VPC the internal name resolves: the same configuration works, which is why it passed every "
         "test run from inside.",
         cloud.bootstrap("INTERNAL"), cloud.nameserver("vpc"), "vpc"),
        ("Cloud, one listener with a name both networks resolve: a client inside the VPC",
         "Option 1 of the classic fix: advertise a name that resolves inside the VPC as well as outside. The "
         "public EC2 name `ec2-34-211-52-10.us-west-2.compute.amazonaws.com` is such a name (inside the VPC, "
         "AWS's DNS answers it too, with the private address), so a listener advertising it serves the VPC "
         "client here and the internet client below alike. The lab's EXTERNAL listener advertises it; from the "
         "vpc view it resolves and connects: no gap, with no second listener needed for clients.",
         cloud.bootstrap("EXTERNAL"), cloud.nameserver("vpc"), "vpc"),
        ("Cloud, two listeners: the internet client uses EXTERNAL",
         "Option 2 of the classic fix: an EXTERNAL listener advertises the public name, INTERNAL keeps the private "
         "one for inter-broker traffic and VPC clients. Each network bootstraps through its own listener.",
         cloud.bootstrap("EXTERNAL"), cloud.nameserver("internet"), "internet"),
    ]
    out = ["# Why can I connect to the broker, but my client still fails?", "",
           "A Kafka client uses the bootstrap address for one thing: asking for metadata. The answer lists the",
           "endpoints the brokers *advertise* (`advertised.listeners` of the listener the client reached), and",
           "every later request goes there. If an advertised host does not resolve or is not reachable from the",
           "client's network, the bootstrap succeeds and everything after it fails.", "",
           "Below, kprobe's own output for the classic cases, from real brokers of the lab (`kprobe lab up "
           "listeners`, `kprobe lab up cloud`), each probed with the DNS view of the network the client is on. "
           "Ports are shown as the seeds' classic ones and timings are elided (`…`); `docs/generate.py` "
           "regenerates this page and a test fails when it is stale.", ""]
    for title, prose, bootstrap, nameserver, vantage in cases:
        output = normalise(_probe(bootstrap, nameserver, vantage), [listeners, cloud])
        out += [f"## {title}", "", prose, "", "```", output.rstrip("\n"), "```", ""]
    return "\n".join(out)


# -- report reference ---------------------------------------------------------------------------

def _rows(node: dict[str, Any], root: dict[str, Any], path: str, seen: tuple[str, ...],
          required: bool = False) -> list[tuple[str, str, bool, str]]:
    """(path, type or values, required, description) for `node` and everything under it.

    `required` comes from the parent's `required` list, so a field reached through a `$ref`
    keeps it; the description of the referring site wins over the definition's.
    """
    described = node.get("description", "")
    ref = node.get("$ref")
    if ref:
        if ref in seen:
            return [(path, f"(same as `{ref.rsplit('/', 1)[-1]}`)", required, described)]
        seen = (*seen, ref)
        node = root["$defs"][ref.rsplit("/", 1)[-1]]
        described = described or node.get("description", "")
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if "enum" in node:
        desc = " \\| ".join(f"`{v}`" if v is not None else "`null`" for v in node["enum"])
    elif "const" in node:
        desc = f"`{node['const']}`"
    else:
        desc = " or ".join(k for k in kinds if k) or "any"
    rows = [(path, desc, required, described)] if path else []
    needed = set(node.get("required", ()))
    for name, sub in node.get("properties", {}).items():
        rows += _rows(sub, root, f"{path}.{name}" if path else name, seen, name in needed)
    if "items" in node:
        rows += _rows(node["items"], root, f"{path}[]", seen)
    return rows


def report_reference(sample: str) -> str:
    """The schema field by field (with what it requires and says of each field), then a sample report."""
    from kprobe.output.json_report import schema

    root = schema()
    out = ["# Report schema (`kprobe.report/v1`)", "",
           "Every field of the JSON report, from the JSON Schema shipped in the package (`kprobe schema` prints it).",
           "The meaning of each part is in [the report format](report.md).", ""]
    if root.get("description"):
        out += [root["description"], ""]
    out += ["A field marked *required* is always present in its object (its value may still be `null` where the "
            "type allows).", "",
            "| field | type or values | required | description |", "| --- | --- | --- | --- |"]
    for path, desc, needed, described in _rows(root, root, "", ()):
        cell = described.replace("|", "\\|")  # a pipe would end the table cell
        out.append(f"| `{path}` | {desc} | {'required' if needed else ''} | {cell} |")
    out += ["", "## A sample report", "", "`kprobe probe -b 127.0.0.11:29092 --nameserver <host view> --json` "
            "against the lab's LISTENER_BOB, from the Docker host (ids, ports and timings normalised):", "",
            "```json", sample.rstrip("\n"), "```", ""]
    return "\n".join(out)


def sample_report(listeners: Any) -> str:
    """A real report of LISTENER_BOB from the Docker host, with ids, ports and timings fixed."""
    from kprobe.output import json_report

    report = _run(listeners.real_endpoint("LISTENER_BOB"), listeners.nameserver("host"), "laptop")
    data = json.loads(json_report.render(report))
    data["id"] = "00000000-0000-4000-8000-000000000000"
    data["started_at"] = data["finished_at"] = "2026-11-22T18:00:00.000Z"
    data["vantage"]["hostname"] = "laptop"
    text = json.dumps(data, indent=2)
    text = re.sub(r'("(ms|duration_ms)": )[\d.]+', r"\g<1>1.0", text)
    return normalise(text, [listeners]).replace("…", "1.0")


# -- findings, from real runs --------------------------------------------------------------------

# Why the loopback-only lab cannot stage these codes; the page names the tests that prove them.
NOT_STAGED = {
    "PATH_MTU_BLACKHOLE": "needs a path that drops large packets; the DNS-view lab's loopback carries any size, the "
                          "network-namespace lab (kprobe lab up --netns mtu-vpn) stages it",
    "ADVERTISED_PRIVATE_ADDRESS": "needs an advertised address in a private, CGNAT or link-local range that fails "
                                  "from here; the lab dials loopback addresses only, and never such an address",
    "ADVERTISED_LOOPBACK": "needs a client that reached the cluster on a non-loopback address; the lab is "
                           "loopback only, so every client here is on the broker's machine",
    "ADVERTISED_UNREACHABLE": "needs an advertised address with no route from here (ENETUNREACH / EHOSTUNREACH); "
                              "every loopback address is routable",
    "RESOLVED_ONLY_VIA_HOSTS_FILE": "needs the system resolver with a private /etc/hosts; the lab's runs resolve "
                                    "through its DNS views",
    "INVALID_ADVERTISED_HOST": "a host no client can use (control characters, bytes that are not UTF-8, 300 "
                               "characters) is not something the lab's brokers are configured to advertise; the "
                               "tests' scripted broker (tests/support/hostile_broker.py) sends it",
    "INVALID_ADVERTISED_PORT": "a port outside 1-65535 is not something the lab's brokers are configured to "
                               "advertise; the tests' scripted broker sends it",
    "NO_ADVERTISED_BROKERS": "the broker that answers a lab bootstrap always lists at least itself",
    "CONTROLLER_DESCRIBE_UNSUPPORTED": "needs a KRaft controller before Kafka 3.7 (or a metadata.version below "
                                       "3.7-IV0); the lab runs Kafka 4.1 at its latest metadata.version",
    "DUPLICATE_NODE_ID": "two brokers with one node.id do not form one cluster; the tests' scripted broker "
                         "sends such a response",
    "ROUNDTRIP_DISAGREES": "it fires only where kprobe's verdict is wrong, and each lab scenario is one where a "
                           "real client agrees with it (the agreement test holds every scenario to that); the "
                           "rule's rows write both sides of a disagreement down",
    **{code: "judged from configuration files by `kprobe check`, before anything runs; no probe emits it"
       for code in ("ADVERTISED_WILDCARD", "LISTENER_NOT_IN_PROTOCOL_MAP", "ADVERTISED_LISTENER_UNDEFINED",
                    "INTER_BROKER_NOT_ADVERTISED", "CONTROLLER_LISTENER_ADVERTISED", "ADVERTISED_INTERNAL_NAME",
                    "PUBLISHED_PORT_DIFFERS", "ADVERTISED_AT_DEPLOY", "INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS",
                    "TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION")},
    **{code: "the `defaults` lab stages it (one broker with Kafka's defaults for its internal topics: "
             "docs/application.md), which the runs of this page do not start"
       for code in ("OFFSETS_TOPIC_UNCREATABLE", "TRANSACTION_LOG_UNCREATABLE", "COORDINATOR_NOT_AVAILABLE")},
    **{code: "the `groups` lab stages it, but which broker leads each partition of __consumer_offsets is decided "
             "when the brokers create it, so the group, partition and broker in the message change from one start "
             "to the next: no excerpt here would stay the same"
       for code in ("COORDINATOR_UNREACHABLE", "OFFSETS_PARTITIONS_OFFLINE")},
    **{code: "the `groups` lab stages it (docs/application.md): its brokers' racks, protocols and group placement "
             "are set at its start, which the runs of this page do not make"
       for code in ("GROUP_PROTOCOL_UNSUPPORTED", "FOLLOWER_FETCH_UNREACHABLE", "CLIENT_RACK_MATCHES_NO_BROKER",
                    "ROUNDTRIP_STEP_FAILED")},
    "SHARE_GROUPS_UNSUPPORTED": "the `defaults` lab stages it (Kafka 4.1's default: share groups off), which the "
                                "runs of this page do not start",
    "CLIENT_VERSIONS_REFUSED": "any lab stages it with -X api.version.request=false -X broker.version.fallback=0.9.0; "
                               "the runs of this page do not set it",
    "FOLLOWER_FETCHING_OFF": "needs brokers with client.rack set and the default replica selector; the rule's rows "
                             "prove it",
    "LISTENER_NOT_FOUND": "the lab stages it (the three-brokers lab's PARTIAL listener and a topic led by broker 2), "
                          "but the message names every partition out of the listener's reach in the whole cluster, "
                          "which depends on the topics other runs created: no excerpt here would stay the same",
}


def finding_codes() -> list[str]:
    """Every finding code kprobe can emit: the catalogue's (tests/findings/test_catalogue.py holds the rules to it)."""
    from kprobe.findings.catalogue import CATALOGUE

    return sorted(CATALOGUE)


def _tests_naming(code: str) -> list[str]:
    """`tests/file.py::test_name` of every test whose body names `code`, found by parsing tests/.

    The pure rule tests name their codes in module-level tables that parametrised tests read:
    such a file is credited as a whole (`tests/findings/test_rules_x.py`).
    """
    found = []
    for path, functions, tables in _test_sources():
        named = [f"{path}::{name}" for name, body in functions if f'"{code}"' in body]
        found += named or ([path] if f'"{code}"' in tables else [])
    return found


@functools.cache
def _test_sources() -> list[tuple[str, list[tuple[str, str]], str]]:
    """(path, [(test name, its source)], the module-level assignments' source) of every tests/**/test_*.py.

    Parsed once for all codes: a parse of the suite per code, with ast.get_source_segment splitting
    a file's lines again for every function, took 20 s a code on a loaded machine, most of the docs test.
    Whole lines are taken (the `def` line to the last), which is what a quoted code can be found in.
    """
    import ast

    out = []
    for path in sorted((DOCS.parent / "tests").rglob("test_*.py")):
        source = path.read_text()
        lines = re.split(r"\r\n|\r|\n", source)  # the line ends ast counts (str.splitlines knows more)
        tree = ast.parse(source)

        def text(node: ast.AST, lines: list[str] = lines) -> str:
            return "\n".join(lines[node.lineno - 1:node.end_lineno])  # type: ignore[attr-defined]

        functions = [(node.name, text(node)) for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
        tables = "".join(text(node) for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign)))
        out.append((str(path.relative_to(DOCS.parent)), functions, tables))
    return out


def _probe_args(args: list[str]) -> Any:
    """The ProbeOptions of `kprobe probe ARGS`, parsed by the CLI itself: the line shown is the one that ran.

    KPROBE_* variables are hidden while parsing, so a developer's environment cannot change a page.
    """
    import os
    from unittest import mock

    import typer.main

    from kprobe.cli.app import app
    from kprobe.option_table import RUN
    from kprobe.options import probe_options

    command = typer.main.get_command(app).commands["probe"]  # type: ignore[attr-defined]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KPROBE_")}
    with mock.patch.dict(os.environ, clean, clear=True):
        p = command.make_context("probe", list(args)).params
    return probe_options(**{o.param: p[o.param] for o in RUN})


WRONG_SECRET = "not-the-apps-secret-7f3"
ROUNDTRIP_TOPIC = "docs-canary"


def _let_bob_describe(sasl: Any) -> None:
    """The ROUNDTRIP_FAILED staging's set-up: alice makes the topic and lets bob describe it, not write to it.

    Idempotent (a topic or ACL already there is as good), and waited for: the ACL reaches the broker's
    authorizer through the metadata log, a moment after the admin call returns.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    def client(user: str) -> dict[str, str]:
        return {"bootstrap.servers": sasl.bootstrap("SASL_PLAIN"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": sasl.passwords[user]}

    admin = AdminClient(client("alice"))
    try:
        made = admin.create_topics([NewTopic(ROUNDTRIP_TOPIC, num_partitions=1, replication_factor=1)])
        made[ROUNDTRIP_TOPIC].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    binding = AclBinding(ResourceType.TOPIC, ROUNDTRIP_TOPIC, ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)
    bob = AdminClient(client("bob"))
    deadline = time.monotonic() + 30
    while ROUNDTRIP_TOPIC not in bob.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise RuntimeError(f"bob still cannot describe {ROUNDTRIP_TOPIC} 30 s after the ACL was made")
        time.sleep(0.2)


_SECRET_FILES: dict[str, Path] = {}


def secret_file(user: str, password: str) -> list[str]:
    """`-F FILE` holding `sasl.password`, mode 0600, as the docs tell users to pass a password.

    A `-X sasl.password=...` stays in the process list (`ps`) for as long as the run lasts, and a
    `kprobe watch` lasts for months; a file only its owner reads does not show the password.
    """
    import os
    import tempfile

    key = f"{user}:{password}"
    if key not in _SECRET_FILES:
        folder = Path(tempfile.mkdtemp(prefix="kprobe-docs-"))
        path = folder / f"{user}.properties"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"sasl.password={password}\n")
        _SECRET_FILES[key] = path
    return ["-F", str(_SECRET_FILES[key])]


def _stagings(labs: Mapping[str, Any], stale: str, dead: str, refused: str) -> list[Any]:
    """(codes, where, what is staged, kprobe probe arguments): how the tests stage each finding."""
    listeners, three, tls, sasl = labs["listeners"], labs["three-brokers"], labs["tls"], labs["sasl"]
    sni, oauth = labs["sni-ingress"], labs["oauth"]
    dual = labs["dual-stack"]
    forwarded, nodeport = labs["port-forward"], labs["nodeport"]
    host, docker = listeners.nameserver("host"), listeners.nameserver("docker")
    timeout = ["--timeout", "2"]
    kraft = labs["controllers"]
    quorum = next(n for n in kraft.nodes.values() if n.spec.role == "controller")
    controllers = ["--controllers", quorum.controller_endpoint]

    def note(listener: str, node: int = 0) -> str:
        return f"`three-brokers` lab, listener {listener}: {three.listener(listener, node).spec.note}."

    def tls_args(listener: str) -> list[str]:
        return ["-b", "SSL://" + tls.bootstrap(listener), "--nameserver", tls.nameserver("clients"),
                "-X", f"ssl.ca.location={tls.ca_file}", *timeout]

    def sasl_ssl(user: str, password: str) -> list[str]:
        return ["-b", sasl.bootstrap("SASL_SSL_PLAIN"), "--nameserver", sasl.nameserver("clients"),
                "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={sasl.ca_file}",
                "-X", "sasl.mechanism=PLAIN", "-X", f"sasl.username={user}", *secret_file(user, password), *timeout]

    return [
        (["BOOTSTRAP_UNREACHABLE"], "A bootstrap port on loopback where nothing listens (bound, never listening).",
         ["-b", refused, *timeout]),
        (["AUTH_FAILED"], "`sasl` lab, SASL_SSL_PLAIN: alice with a wrong password.",
         sasl_ssl("alice", "not-alices-password")),
        (["ADVERTISED_UNRESOLVABLE"], "`listeners` lab, LISTENER_ALICE, from the Docker host's view: "
         f"{listeners.listener('LISTENER_ALICE').spec.note}.",
         ["-b", listeners.real_endpoint("LISTENER_ALICE"), "--nameserver", host, *timeout]),
        (["ADVERTISED_REFUSED"], "`listeners` lab, LISTENER_BOB, through a DNS server started for this example "
         "that answers kafka0 with 127.0.0.98 only, where nothing listens.",
         ["-b", listeners.real_endpoint("LISTENER_BOB"), "--nameserver", dead, *timeout]),
        (["ADVERTISED_TIMEOUT"], note("BLACKHOLED", 2), ["-b", three.real_endpoint("BLACKHOLED", 0), "--timeout", "1"]),
        (["ADVERTISED_PARTIAL"], "`listeners` lab, LISTENER_BOB, through a DNS server started for this example "
         "that answers kafka0 with BOB's address and with 127.0.0.98, where nothing listens (a stale record).",
         ["-b", listeners.real_endpoint("LISTENER_BOB"), "--nameserver", stale, *timeout]),
        (["ADVERTISED_ONE_FAMILY_FAILS"], "`dual-stack` lab, DUAL: "
         f"{dual.listener('DUAL').spec.note}; the broker listens on IPv4 only (docs/dual-stack.md).",
         ["-b", dual.real_endpoint("DUAL"), "--nameserver", dual.nameserver("dual"), *timeout]),
        (["PORT_FORWARD_INCOMPLETE"], "`port-forward` lab, from the laptop view: bootstrapped through the forward "
         "to broker 0 (`kubectl port-forward --address 127.0.0.113 pod/my-cluster-kafka-0 9092:9092`), while every "
         "broker advertises its Strimzi name, which only the cluster view resolves.",
         ["-b", forwarded.forwards.endpoint("pod0"), "--nameserver", forwarded.nameserver("laptop"), *timeout]),
        (["ADVERTISED_SHARED_ADDRESS"], "`nodeport` lab, NODEPORT_INTERNAL, from the laptop view: "
         f"{nodeport.listener('NODEPORT_INTERNAL').spec.note}.",
         ["-b", nodeport.bootstrap("NODEPORT_INTERNAL"), "--nameserver", nodeport.nameserver("laptop"), *timeout]),
        (["RUN_INCOMPLETE"], note("DARK") + " The run's deadline comes before any connect times out.",
         ["-b", three.real_endpoint("DARK", 0), "--timeout", "10", "--deadline", "1.5"]),
        (["PORT_DIFFERS_FROM_BOOTSTRAP", "ENDPOINT_WRONG_BROKER", "ENDPOINT_ADVERTISES_DIFFERENTLY"],
         note("CROSSED", 2), ["-b", three.real_endpoint("CROSSED", 0), *timeout]),
        (["ENDPOINT_NOT_KAFKA"], note("IMPOSTOR", 2), ["-b", three.real_endpoint("IMPOSTOR", 0), *timeout]),
        (["IDENTITY_NOT_CHECKED"], "`sasl` lab, SASL_SSL_PLAIN: bob, who has no ACL, may read metadata but not "
         "describe broker configs.", sasl_ssl("bob", sasl.passwords["bob"])),
        (["CLUSTER_ID_MISMATCH"], "Two bootstraps of two clusters: the `three-brokers` lab's CLIENT listener and "
         "the `listeners` lab's LISTENER_FRED.",
         ["-b", three.bootstrap("CLIENT", 0), "-b", listeners.bootstrap("LISTENER_FRED"), *timeout]),
        (["BROKER_SET_MISMATCH"], note("PARTIAL") + " It is probed beside broker 1's CLIENT listener.",
         ["-b", three.real_endpoint("PARTIAL", 0), "-b", three.bootstrap("CLIENT", 1), *timeout]),
        (["REMAPPED_ENDPOINTS"], "`listeners` lab, LISTENER_ALICE, which advertises never-gonna-give-you-up, "
         "probed as if a hosts entry mapped that name to the broker's address.",
         ["-b", listeners.real_endpoint("LISTENER_ALICE"), "--resolve",
          "never-gonna-give-you-up=" + listeners.listener("LISTENER_ALICE").bind_ip, *timeout]),
        (["DUPLICATE_ENDPOINT"], note("TWIN"), ["-b", three.real_endpoint("TWIN", 1), *timeout]),
        (["DNS_VIEWS_DISAGREE"], "`listeners` lab, LISTENER_BOB, resolved in the Docker network's view and "
         "compared with the Docker host's.",
         ["-b", listeners.real_endpoint("LISTENER_BOB"), "--nameserver", docker, "--compare-nameserver", host,
          *timeout]),
        (["TLS_HOSTNAME_MISMATCH"], f"`tls` lab, SSL_INTERNAL_NAME: {tls.listener('SSL_INTERNAL_NAME').spec.note}.",
         tls_args("SSL_INTERNAL_NAME")),
        (["TLS_UNTRUSTED"], f"`tls` lab, SSL_FORWARD: {tls.listener('SSL_FORWARD').spec.note}.",
         tls_args("SSL_FORWARD")),
        (["TLS_EXPIRING"], f"`tls` lab, SSL_EXPIRING: {tls.listener('SSL_EXPIRING').spec.note}.",
         tls_args("SSL_EXPIRING")),
        (["TLS_HANDSHAKE_FAILED"], f"`tls` lab, SSL_TO_PLAIN: {tls.listener('SSL_TO_PLAIN').spec.note}.",
         tls_args("SSL_TO_PLAIN")),
        (["TLS_SAN_TYPE_MISMATCH"], f"`tls` lab, SSL_IP_AS_DNS: {tls.listener('SSL_IP_AS_DNS').spec.note}.",
         tls_args("SSL_IP_AS_DNS")),
        (["TLS_INGRESS_DEFAULT_CERTIFICATE"], "`sni-ingress` lab, ROUTE_MISSING, through the SNI-routing proxy "
         f"(HAProxy): {sni.listener('ROUTE_MISSING').spec.note}, so the proxy's default server answers with "
         "ingress-nginx's default certificate.",
         ["-b", "SSL://" + sni.bootstrap("ROUTE_MISSING"), "--nameserver", sni.nameserver("internet"),
          "-X", f"ssl.ca.location={sni.ca_file}", *timeout]),
        (["BOOTSTRAP_TLS_FAILED"], "`tls` lab, SSL_GOOD, bootstrapped by the internal name, which the certificate "
         "does not hold.",
         ["-b", "SSL://" + _TLS_INTERNAL + ":" + tls.bootstrap("SSL_GOOD").rsplit(":", 1)[1], "--nameserver",
          tls.nameserver("clients"), "-X", f"ssl.ca.location={tls.ca_file}", *timeout]),
        (["CLIENT_CERTIFICATE_REQUIRED"], f"`tls` lab, SSL_MTLS ({tls.listener('SSL_MTLS').spec.note}), without a "
         "client certificate.", tls_args("SSL_MTLS")),
        (["CLIENT_CERTIFICATE_REFUSED"], "`tls` lab, SSL_MTLS, with a client certificate from another CA than the "
         "listener's truststore holds.",
         [*tls_args("SSL_MTLS"), "-X", f"ssl.certificate.location={tls.certs['client-other-ca'].certificate}",
          "-X", f"ssl.key.location={tls.certs['client-other-ca'].key}"]),
        (["SECURITY_PROTOCOL_MISMATCH"], "`sasl` lab, SASL_PLAIN, bootstrapped without security.protocol: plaintext "
         "Kafka without SASL sent to a SASL_PLAINTEXT listener, which kprobe then asks for its mechanisms.",
         ["-b", sasl.bootstrap("SASL_PLAIN"), *timeout]),
        (["SASL_MECHANISM_MISMATCH"], "`sasl` lab, SASL_SCRAM (SCRAM-SHA-256), with sasl.mechanism=PLAIN.",
         ["-b", sasl.bootstrap("SASL_SCRAM"), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
          "-X", "sasl.username=alice", *secret_file("alice", sasl.passwords["alice"]), *timeout]),
        (["BOOTSTRAP_IS_CONTROLLER"], "`controllers` lab: controller 9's CONTROLLER listener given to -b.",
         ["-b", quorum.controller_endpoint, *timeout]),
        (["ENDPOINT_IS_CONTROLLER"], "`controllers` lab, CONTROLLER_LEAK: "
         f"{kraft.listener('CONTROLLER_LEAK', 1).spec.note}.",
         ["-b", kraft.bootstrap_all("CONTROLLER_LEAK"), *timeout]),
        (["CONTROLLER_ENDPOINT_UNRESOLVABLE"], "`controllers` lab, from the outside view: controller 9 advertises "
         f"{quorum.controller_advertised.rsplit(':', 1)[0]}, which only the inside view resolves.",
         [*controllers, "--nameserver", kraft.nameserver("outside"), *timeout]),
        (["CONTROLLER_ENDPOINT_UNREACHABLE"], "`controllers` lab, inside view, with the controller's advertised "
         "endpoint sent (--connect-to) to a loopback port where nothing listens.",
         [*controllers, "--nameserver", kraft.nameserver("inside"), "--connect-to",
          f"{quorum.controller_advertised}={refused}", *timeout]),
        (["CONTROLLER_ENDPOINT_WRONG_NODE"], "`controllers` lab, inside view, with the controller's advertised "
         "endpoint sent (--connect-to) to broker 1's CLIENT listener, as a wrong port-forward would.",
         [*controllers, "--nameserver", kraft.nameserver("inside"), "--connect-to",
          f"{quorum.controller_advertised}={kraft.real_endpoint('CLIENT', 1)}", *timeout]),
        (["CONTROLLER_IS_BROKER"], "`controllers` lab: broker 1's CLIENT listener given to --controllers.",
         ["--controllers", kraft.bootstrap("CLIENT", 1), *timeout]),
        (["CONTROLLER_BOOTSTRAP_FAILED"], "A --controllers port on loopback where nothing listens, beside the "
         "`controllers` lab's real controller listener.",
         ["--controllers", f"{refused},{quorum.controller_endpoint}", "--nameserver", kraft.nameserver("inside"),
          *timeout]),
        (["ROUNDTRIP_FAILED"], f"`sasl` lab, SASL_PLAIN: bob may describe topic {ROUNDTRIP_TOPIC} (an ACL alice "
         "granted) and not write to it; --roundtrip meets the broker's refusal.",
         ["-b", sasl.bootstrap("SASL_PLAIN"), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
          "-X", "sasl.username=bob", *secret_file("bob", sasl.passwords["bob"]), "--roundtrip", ROUNDTRIP_TOPIC,
          "--no-identity", *timeout]),
        (["OAUTH_TOKEN_UNAVAILABLE"], "`oauth` lab, OAUTH_OIDC: the client kprobe-app with a wrong client secret, "
         "which the lab's token endpoint refuses.",
         ["-b", oauth.bootstrap("OAUTH_OIDC"), "--nameserver", oauth.nameserver("clients"),
          "-X", "security.protocol=SASL_PLAINTEXT",
          *(arg for key, value in oauth.idp.client_properties("kprobe-app", WRONG_SECRET).items()
            for arg in ("-X", f"{key}={value}")),
          "-X", f"https.ca.location={oauth.idp_ca_file}", *timeout]),
    ]


def findings_examples(labs: Mapping[str, Any]) -> str:
    """Each finding the lab can stage, as `kprobe probe --json` reports it in a real run.

    The runs are the tests' own stagings (tests/runs/test_probe.py, tests/findings/test_findings_lab.py); a staging
    that stops producing its code fails generation rather than leave a code without its excerpt.
    """
    import shlex
    import socket

    from kprobe.lab.dns_server import DnsServer
    from kprobe.output import json_report
    from kprobe.runs.probe import run_probe

    listeners, oauth = labs["listeners"], labs["oauth"]
    _let_bob_describe(labs["sasl"])
    bob_ip = listeners.listener("LISTENER_BOB").bind_ip
    with DnsServer({"kafka0": (bob_ip, "127.0.0.98")}, name="stale") as stale, \
            DnsServer({"kafka0": ("127.0.0.98",)}, name="dead") as dead, socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound but not listening: connects are refused, and no one else gets it
        refused = f"127.0.0.1:{closed.getsockname()[1]}"
        extra = {stale.nameserver: f"<DNS: kafka0 = {bob_ip}, 127.0.0.98>",
                 dead.nameserver: "<DNS: kafka0 = 127.0.0.98>", refused: "127.0.0.1:<a port nobody listens on>",
                 oauth.idp.token_url: "<oauth lab token endpoint URL>"}
        extra.update({lab.ca_file: "<lab CA file>" for lab in labs.values() if lab.ca_file})
        for lab in labs.values():
            if "client-other-ca" in lab.certs:
                files = lab.certs["client-other-ca"]
                extra.update({str(files.certificate): "<another CA's client certificate>",
                              str(files.key): "<its key>"})
        extra[WRONG_SECRET] = "<a wrong client secret>"
        extra.update({lab.idp_ca_file: "<lab CA file>" for lab in labs.values() if lab.idp is not None})
        extra.update({pw: f"<{user}'s password>" for lab in labs.values() for user, pw in lab.passwords.items()})
        stagings = _stagings(labs, stale.nameserver, dead.nameserver, refused)
        extra.update({str(path): f"<{path.name}: sasl.password=..., mode 0600>" for path in _SECRET_FILES.values()})

        def findings_of(args: list[str]) -> Any:
            return json.loads(json_report.render(run_probe(_probe_args([*args, "--json"]))))["findings"]

        # One run at a time, as the tests stage them: four at once in this process saved ten seconds and
        # put every staging's 1-2 s timeouts at the mercy of the others (a stale page is a red build).
        found = [findings_of(args) for _, _, args in stagings]
        runs = [(codes, staged, shlex.join(["kprobe", "probe", *args, "--json"]), findings)
                for (codes, staged, args), findings in zip(stagings, found, strict=True)]
    out = ["# Findings, from real runs", "",
           "Each [finding](findings.md) the lab can stage, as it appears in the `findings` of `kprobe probe --json`, "
           "from a real run against the lab's brokers on loopback (`kprobe lab up NAME`), with the command line "
           "that produced it. The stagings are the tests' own; `docs/generate.py` regenerates this page and a test "
           "fails when it is stale. Lab ports are shown as `<LISTENER port>` (the seeds' classic ports for the "
           "`listeners` lab), DNS views as `<NAME view>`, and cluster ids, certificate dates and passwords by name. "
           "Passwords are given in a file only their owner reads (`-F`, mode 0600), never as `-X sasl.password=`, "
           "which anyone on the machine sees in the process list for as long as the run lasts.",
           ""]
    shown: list[str] = []
    for codes, staged, command, findings in runs:
        for code in codes:
            mine = [f for f in findings if f["code"] == code]
            if not mine:
                raise RuntimeError(f"the staging of {code} ({command}) did not produce it: {findings}")
            shown.append(code)
            excerpt = "\n".join(json.dumps(f, indent=2, ensure_ascii=False) for f in mine)
            out += [f"## `{code}`", "", staged, "", "```console", f"$ {command}", "```", "",
                    "```json", excerpt, "```", ""]
    out += ["## Codes the lab cannot stage", "",
            "The lab runs real brokers on loopback only, so these codes never fire in a lab run. No excerpt is "
            "invented for them; where a test proves one (a pure `diagnose()` case, a scripted broker, or a private "
            "resolver set-up), it is named.", "",
            "| code | why the lab cannot stage it | proved by |", "| --- | --- | --- |"]
    for code in finding_codes():
        if code in shown:
            continue
        tests = ", ".join(f"`{t}`" for t in _tests_naming(code)) or "no test names it yet"
        out.append(f"| `{code}` | {NOT_STAGED.get(code, 'not staged by the lab')} | {tests} |")
    page = normalise("\n".join(out) + "\n", list(labs.values()), extra)
    secrets = [pw for lab in labs.values() for pw in lab.passwords.values()]
    secrets += [s for lab in labs.values() if lab.idp is not None for s in lab.idp.client_secrets.values()]
    if any(secret in page for secret in [*secrets, WRONG_SECRET]):
        raise RuntimeError("a lab password reached docs/findings-examples.md")
    return page


def remove_secret_files() -> None:
    """The password files of `secret_file` gone with their folders: a run of the generator leaves nothing in /tmp."""
    import shutil

    for path in _SECRET_FILES.values():
        shutil.rmtree(path.parent, ignore_errors=True)
    _SECRET_FILES.clear()


def generate_all(labs: Mapping[str, Any]) -> dict[str, str]:
    """Page name -> content, from the running labs of DOC_LABS (scenario name -> lab)."""
    try:
        return {"cli.md": cli_reference(), "why.md": why_page(labs["listeners"], labs["cloud"]),
                "report-schema.md": report_reference(sample_report(labs["listeners"])),
                "findings-examples.md": findings_examples(labs)}
    finally:
        remove_secret_files()


def main() -> None:
    """Start the labs the pages are made from, and write the pages."""
    sys.path.insert(0, str(DOCS.parent))
    from kprobe.lab import start_lab

    with ExitStack() as stack:
        labs = {name: stack.enter_context(start_lab(name)) for name in DOC_LABS}
        for name, text in generate_all(labs).items():
            (DOCS / name).write_text(text)
            print(f"wrote docs/{name}")


if __name__ == "__main__":
    main()
