"""Each command imports what it uses and nothing more: start-up is most of a probe's time.

kprobe is typed again and again while someone fixes a listener, like kcat; a module a command does
not use still costs its import on every run. Each command here runs as users run it (`python -m
kprobe`, the console script's entry), in a subprocess of its own, against nothing that needs a lab:
a closed loopback port, the saved reports in tests/data/reports, a server.properties. What it left
in `sys.modules` must be within the command's allowed list: kprobe's modules by name, and the heavy
third-party packages (and `ssl`) by top-level name.

When a test fails, a command grew an import. If the command uses the module on that path, add it
to the list with a word on why; if not, import it where it is used (inside the function, behind the
condition that needs it), as kprobe.findings.diagnose and kprobe.kafka.connection do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
REPORT_A = DATA / "reports" / "2026-11-22-34d3bcd-client.json"
REPORT_B = DATA / "reports" / "2026-11-22-34d3bcd-blackholed.json"
SERVER_PROPERTIES = DATA / "configs" / "apache-kafka" / "file-input" / "server.properties"

# Third-party packages (and the standard library's ssl, 10 ms) worth a line each: what a command may load.
HEAVY = ("typer", "click", "rich", "pyspark", "confluent_kafka", "cryptography", "dns", "jsonschema", "botocore",
         "aws_msk_iam_sasl_signer", "yaml", "ssl")

# The allowed kprobe modules, built up from what every command of a kind needs. A name ending in ".*"
# allows a package and everything under it.
VERSION = {"kprobe", "kprobe.errors"}  # answered before typer (kprobe/__main__.py)
# A plain probe or list, read and run without typer (kprobe.cli.plain, from the options' declarations in
# kprobe.option_table); the secrets scrubbed from any error line (kprobe.exits, kprobe.redaction).
# kprobe.logs: loggers that load `logging` only for a line that can be seen.
PLAIN = VERSION | {"kprobe.cli", "kprobe.cli.plain", "kprobe.exits", "kprobe.cli.probe", "kprobe.option_table",
                   "kprobe.redaction", "kprobe.logs"}
CLI = PLAIN | {"kprobe.cli.*"}  # typer's app and its commands' modules, for everything else
REPORT_DATA = {"kprobe.models.*", "kprobe.records", "kprobe.net", "kprobe.hostport"}
# Options, validated: no client-properties reader without -F, -X or kcat's file; no SASL or OAuth code
# without SASL (kprobe.kafka.mechanisms names the mechanisms).
OPTIONS = {"kprobe.options", "kprobe.clientprops", "kprobe.kafka", "kprobe.kafka.security", "kprobe.kafka.mechanisms"}
# Bootstrap, resolve, connect: the wire client with neither TLS (kprobe.kafka.certs, tlscontext) nor SASL.
# kprobe.kafka.client_versions: the requests clients send, whose versions every bootstrap's report lists.
NETWORK = {"kprobe.kafka.connection", "kprobe.kafka.exchanges", "kprobe.kafka.codec", "kprobe.kafka.metadata_codec", "kprobe.kafka.wire",
           "kprobe.kafka.client_versions",
           "kprobe.net.sockets", "kprobe.net.dualstack", "kprobe.probe", "kprobe.probe.bootstrap",
           "kprobe.probe.context", "kprobe.probe.pool", "kprobe.probe.resolve", "kprobe.probe.endpoints",
           "kprobe.probe.reach", "kprobe.probe.connect", "kprobe.runs"}
# The findings every probe needs; TLS, DNS views, shapes and Kubernetes names, controllers and round
# trips load only where the run has them (kprobe.findings.diagnose).
FINDINGS = {"kprobe.findings", "kprobe.findings.diagnose", "kprobe.findings.advertised", "kprobe.findings.bootstrap",
            "kprobe.findings.catalogue", "kprobe.findings.common", "kprobe.findings.consistency",
            "kprobe.findings.identity"}
# One probe, delivered: no publisher without --publish, no file writer without -o/--out/--prom-file.
PROBE_RUN = (PLAIN | REPORT_DATA | OPTIONS | NETWORK | FINDINGS
             | {"kprobe.runs.probe", "kprobe.probe.identity", "kprobe.delivery", "kprobe.delivery.deliver",
                "kprobe.output", "kprobe.output.formats", "kprobe.sanitize"})
SAVED = CLI | REPORT_DATA | {"kprobe.saved", "kprobe.saved.reading", "kprobe.saved.show", "kprobe.output",
                             "kprobe.output.formats", "kprobe.output.json_load", "kprobe.sanitize",
                             "kprobe.output.text"}
TYPER = {"typer", "click"}  # click: where typer uses the installed one rather than its own copy

# command -> (arguments, allowed kprobe modules, allowed heavy packages). "PORT" is a closed loopback port.
COMMANDS: dict[str, tuple[list[str], set[str], set[str]]] = {
    "--version": (["--version"], VERSION, set()),
    "--help": (["--help"], CLI, TYPER),
    "list --help": (["list", "--help"], CLI, TYPER),
    "serve --help": (["serve", "--help"], CLI, TYPER),
    # A plain probe and list: no typer (kprobe.cli.plain reads their command lines).
    "probe": (["probe", "-b", "127.0.0.1:PORT", "--timeout", "0.5", "--no-color"],
              PROBE_RUN | {"kprobe.delivery.progress", "kprobe.output.text"}, set()),
    "probe -J": (["probe", "-b", "127.0.0.1:PORT", "--timeout", "0.5", "-J"],
                 PROBE_RUN | {"kprobe.delivery.progress", "kprobe.output.json_report"}, set()),
    "watch": (["watch", "-b", "127.0.0.1:PORT", "--timeout", "0.5", "--count", "1", "--every", "1s"],
              PROBE_RUN | CLI | {"kprobe.delivery.watch", "kprobe.output.text"}, TYPER),
    "list": (["list", "-b", "127.0.0.1:PORT", "--timeout", "0.5"],
             PLAIN | REPORT_DATA | OPTIONS | NETWORK | {"kprobe.runs.listing", "kprobe.findings",
                                                       "kprobe.findings.catalogue", "kprobe.findings.common",
                                                       "kprobe.findings.consistency", "kprobe.output",
                                                       "kprobe.output.formats", "kprobe.sanitize",
                                                       "kprobe.output.kcat"},  # kcat's lines, when one answers
             set()),
    "show": (["show", str(REPORT_A)], SAVED, TYPER),
    "diff": (["diff", str(REPORT_A), str(REPORT_B)], SAVED | {"kprobe.models.compare", "kprobe.output.diff"}, TYPER),
    "schema": (["schema"], CLI | REPORT_DATA | {"kprobe.output", "kprobe.output.json_report"}, TYPER),
    # Predicts from the file; resolving its names is the one network step (dnspython, which loads ssl).
    "check": (["check", str(SERVER_PROPERTIES)],
              CLI | REPORT_DATA | OPTIONS | {"kprobe.runs", "kprobe.runs.check", "kprobe.check", "kprobe.check.deployments",
                                             "kprobe.check.deployments.common", "kprobe.check.deployments.properties",
                                             "kprobe.clientprops.javaprops", "kprobe.check.listeners",
                                             "kprobe.findings", "kprobe.findings.catalogue", "kprobe.findings.common",
                                             "kprobe.findings.check", "kprobe.findings.check_topics",
                                             "kprobe.findings.kubernetes",
                                             "kprobe.findings.shapes", "kprobe.probe", "kprobe.probe.pool",
                                             "kprobe.probe.resolve", "kprobe.output", "kprobe.output.check",
                                             "kprobe.output.formats", "kprobe.sanitize"},
              TYPER | {"dns", "ssl"}),
}

# Runs the command as `python -m kprobe` does, then writes what it imported to the file named first.
_RUNNER = """
import json, runpy, sys
out = sys.argv[1]
sys.argv = ["kprobe", *sys.argv[2:]]
try:
    runpy.run_module("kprobe", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[str], str]]:
    """Every command's imported modules and its stderr, the commands run side by side (a few seconds in all)."""
    work = tmp_path_factory.mktemp("imports")
    home = work / "home"  # no ~/.config/kcat.conf: kcat's file would rightly load the readers
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KPROBE_", "KCAT_"))}
    env["HOME"] = str(home)
    port = str(_closed_port())
    running = {}
    for i, (name, (args, _, _)) in enumerate(COMMANDS.items()):
        out = work / f"{i}.json"
        argv = [a.replace("PORT", port) for a in args]
        running[name] = (out, subprocess.Popen([sys.executable, "-c", _RUNNER, str(out), *argv], env=env, cwd=work,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    done = {}
    for name, (out, proc) in running.items():
        _, err = proc.communicate(timeout=120)
        done[name] = (json.loads(out.read_text()) if out.exists() else [], err)
    return done


def _allowed(name: str, allowed: set[str]) -> bool:
    return name in allowed or any(a.endswith(".*") and (name == a[:-2] or name.startswith(a[:-1]))
                                  for a in allowed)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_imports_only_what_it_uses(command: str, imported: dict[str, tuple[list[str], str]]) -> None:
    modules, err = imported[command]
    assert modules, f"`kprobe {command}` wrote no module list: {err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    _, allowed, heavy = COMMANDS[command]
    extra = sorted(m for m in modules if (m == "kprobe" or m.startswith("kprobe.")) and not _allowed(m, allowed))
    assert not extra, f"`kprobe {command}` imports kprobe modules it does not use: {extra}"
    roots = {m.split(".")[0] for m in modules}
    foreign = sorted(roots & set(HEAVY) - heavy)
    assert not foreign, f"`kprobe {command}` imports packages it does not use: {foreign}"


def test_the_lists_are_not_empty_words(imported: dict[str, tuple[list[str], str]]) -> None:
    """The runs did what the lists assume: a probe got as far as its findings, a show as far as its report."""
    probe, _ = imported["probe"]
    assert {"kprobe.findings.diagnose", "kprobe.output.text"} <= set(probe) and "typer" not in probe
    assert "typer" in imported["watch"][0] and "kprobe.runs.listing" in imported["list"][0]
    assert {"kprobe.saved.show", "kprobe.output.text"} <= set(imported["show"][0])
    assert "typer" not in imported["--version"][0]


# Standard modules a probe and a listing do without, each for what it would cost every run: `uuid` imports
# `platform` (3 ms) for sixteen random bytes (kprobe.runs.report_id); `dataclasses` imports `inspect` (ast,
# dis, tokenize: 9 ms) and compiles each class's methods (kprobe.records builds them without); `logging` waits
# for a line that can be seen (kprobe.logs). (`pathlib` is absent from an installed probe too, but here the editable
# install's own finder loads it: bench/bench_startup.py checks it on a wheel.)
NOT_ON_THE_PROBE_PATH = {"uuid", "platform", "dataclasses", "inspect", "logging"}


def test_a_probe_and_a_listing_do_without_costly_standard_modules(
        imported: dict[str, tuple[list[str], str]]) -> None:
    for command in ("probe", "probe -J", "list"):
        assert not NOT_ON_THE_PROBE_PATH & set(imported[command][0]), command


def test_the_run_id_is_a_version_4_uuid_as_uuid_spells_it() -> None:
    import uuid

    from kprobe.runs import report_id

    ids = [report_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
