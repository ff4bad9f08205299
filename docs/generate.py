"""Generate the documentation pages that must never go stale.

    python docs/generate.py            # starts the lab's `listeners` and `cloud` scenarios

- cli.md: the CLI reference, walked from the typer app itself.
- why.md: "Why can I connect to the broker but my client still fails?", with kprobe's own output
  from real lab runs of the seeds' cases.
- report-schema.md: the report's JSON Schema, field by field, and a sample report from a lab run.

tests/test_docs_site.py regenerates all three and fails if the committed pages differ, and
builds the site with `mkdocs build --strict`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent


# -- CLI reference ----------------------------------------------------------------------------

def cli_reference() -> str:
    """Every command and option, from the typer app (so a new option cannot be forgotten)."""
    import typer.main

    from kprobe.cli import app

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

CLASSIC_PORTS = {"LISTENER_FRED": 9092, "LISTENER_BOB": 29092, "LISTENER_ALICE": 29094,
                 "INTERNAL": 19092, "EXTERNAL": 9093}


def normalise(text: str, labs: list[Any]) -> str:
    """Lab ports become the seeds' classic ports, ids and timings fixed, so the page is stable."""
    for lab in labs:
        for name, rl in lab.nodes[0].listeners.items():
            if name in CLASSIC_PORTS:
                text = re.sub(rf"(?<![\d.]){rl.port}(?!\d)", str(CLASSIC_PORTS[name]), text)
        text = text.replace(lab.cluster_id, "<cluster-id>")
        for server in lab.dns.values():
            text = text.replace(server.nameserver, "<nameserver>")
    return text.replace("1.0ms", "…    ")  # same width: tables stay aligned


def _run(bootstrap: str, nameserver: str, vantage: str) -> Any:
    """One real probe, as a client on the network of `nameserver` would see the cluster."""
    from kprobe.config import parse_address, parse_nameserver
    from kprobe.probe import ProbeOptions, run_probe

    return run_probe(ProbeOptions(bootstraps=[parse_address(bootstrap)], nameservers=[parse_nameserver(nameserver)],
                                  timeout=2, vantage=vantage))


def _probe(bootstrap: str, nameserver: str, vantage: str) -> str:
    from kprobe.report import text

    return text.render(_fixed_timings(_run(bootstrap, nameserver, vantage)))


def _fixed_timings(report: Any) -> Any:
    """Every duration set to 1 ms, so tables keep their widths from run to run (shown as `…`)."""
    from dataclasses import replace

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

def _rows(node: dict[str, Any], root: dict[str, Any], path: str, seen: tuple[str, ...]) -> list[tuple[str, str]]:
    ref = node.get("$ref")
    if ref:
        if ref in seen:
            return [(path, f"(same as `{ref.rsplit('/', 1)[-1]}`)")]
        seen = (*seen, ref)
        node = root["$defs"][ref.rsplit("/", 1)[-1]]
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if "enum" in node:
        desc = " \\| ".join(f"`{v}`" if v is not None else "`null`" for v in node["enum"])
    elif "const" in node:
        desc = f"`{node['const']}`"
    else:
        desc = " or ".join(k for k in kinds if k) or "any"
    rows = [(path, desc)] if path else []
    for name, sub in node.get("properties", {}).items():
        rows += _rows(sub, root, f"{path}.{name}" if path else name, seen)
    if "items" in node:
        rows += _rows(node["items"], root, f"{path}[]", seen)
    return rows


def report_reference(sample: str) -> str:
    """The schema field by field, then a sample report."""
    from kprobe.report.json_report import schema

    root = schema()
    out = ["# Report schema (`kprobe.report/v1`)", "",
           "Every field of the JSON report, from the JSON Schema shipped in the package (`kprobe schema` prints it).",
           "The meaning of each part is in [the report format](report.md).", "",
           "| field | type or values |", "| --- | --- |"]
    out += [f"| `{path}` | {desc} |" for path, desc in _rows(root, root, "", ())]
    out += ["", "## A sample report", "", "`kprobe probe -b 127.0.0.11:29092 --nameserver <host view> --json` "
            "against the lab's LISTENER_BOB, from the Docker host (ids, ports and timings normalised):", "",
            "```json", sample.rstrip("\n"), "```", ""]
    return "\n".join(out)


def sample_report(listeners: Any) -> str:
    """A real report of LISTENER_BOB from the Docker host, with ids, ports and timings fixed."""
    from kprobe.report import json_report

    report = _run(listeners.real_endpoint("LISTENER_BOB"), listeners.nameserver("host"), "laptop")
    data = json.loads(json_report.render(report))
    data["id"] = "00000000-0000-4000-8000-000000000000"
    data["started_at"] = data["finished_at"] = "2026-11-22T18:00:00.000Z"
    data["vantage"]["hostname"] = "laptop"
    text = json.dumps(data, indent=2)
    text = re.sub(r'("(ms|duration_ms)": )[\d.]+', r"\g<1>1.0", text)
    text = re.sub(r'"(\w+)": "127\.0\.0\.1:\d+"', r'"\1": "<nameserver>"', text)
    return normalise(text, [listeners]).replace("…", "1.0")


def generate_all(listeners: Any, cloud: Any) -> dict[str, str]:
    """Page name -> content."""
    return {"cli.md": cli_reference(), "why.md": why_page(listeners, cloud),
            "report-schema.md": report_reference(sample_report(listeners))}


def main() -> None:
    """Start the two labs and write the pages."""
    sys.path.insert(0, str(DOCS.parent))
    from kprobe.lab import start_lab

    with start_lab("listeners") as listeners, start_lab("cloud") as cloud:
        for name, text in generate_all(listeners, cloud).items():
            (DOCS / name).write_text(text)
            print(f"wrote docs/{name}")


if __name__ == "__main__":
    main()
