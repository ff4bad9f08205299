"""The command line: help, version, schema, and what a run imports.

Runs go through kprobe's entry point in this process (tests/support/cli_runner.py: a child's stdout, stderr and
exit code, without its start-up), except where the process is the point: what a start-up imports, and
the demo, the README's first command, end to end.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest
from cli_runner import run_cli

from kprobe import __version__


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS...` in this process, as a user's shell would see it (tests/support/cli_runner.py)."""
    return run_cli(args)


def test_version():
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout == f"kprobe {__version__}\n"


def test_help_lists_every_command():
    done = run("--help")
    assert done.returncode == 0
    for command in ("probe", "list", "watch", "schema", "demo", "lab"):
        assert f"  {command} " in done.stdout
    lab = run("lab", "--help")
    for command in ("up", "down", "list"):
        assert f"  {command} " in lab.stdout


def test_a_run_builds_only_the_command_it_names():
    from kprobe.cli.app import _app_for, app

    everything = {info.name or info.callback.__name__ for info in app.registered_commands}
    assert {"probe", "list", "watch", "aggregate", "schema", "demo"} <= everything
    for name in everything:
        lean = _app_for([name, "--help"])
        assert [info.name or info.callback.__name__ for info in lean.registered_commands] == [name]
        assert lean.registered_callback is app.registered_callback  # -V and the group's options stay
    for args in ([], ["--help"], ["lab", "up", "x"], ["prob"], ["-V"]):
        assert _app_for(args) is app
    # The lean app still says what the whole one says for that command, and still suggests.
    assert run("probe", "--help").stdout.startswith("Usage: kprobe probe [OPTIONS]")
    typo = run("prob", "-b", "x")
    assert typo.returncode == 2 and "Did you mean 'probe'?" in typo.stderr


def test_a_plaintext_probe_run_never_imports_ssl_or_file_writing():
    code = (
        "import sys, runpy; sys.argv=['kprobe','probe','-b','127.0.0.1:1','--timeout','0.5','--no-identity'];\n"
        "try:\n    runpy.run_module('kprobe', run_name='__main__')\nexcept SystemExit: pass\n"
        "print('LOADED', ','.join(m for m in ('ssl', 'tempfile', 'kprobe.output.files', 'kprobe.probe.tls', "
        "'kprobe.output.json_report') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "LOADED", done.stdout


def test_lab_list_one_line_per_scenario():
    done = run("lab", "list")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    from kprobe.lab.scenarios import SCENARIOS  # every scenario, once, in the order they are declared

    assert names == list(SCENARIOS) and "listeners" in names


def test_schema_is_valid_json_schema():
    import jsonschema

    done = run("schema")
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == "kprobe.report/v1"


def test_probe_path_never_imports_heavy_modules():
    code = (
        "import sys; import kprobe.cli, kprobe.runs.probe, kprobe.output.text, kprobe.output.json_report;"
        "print(','.join(m for m in ('pyspark', 'confluent_kafka', 'testcontainers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_help_never_imports_dns_or_kafka_clients():
    code = (
        "import sys, runpy; sys.argv=['kprobe','--help'];\n"
        "try:\n    runpy.run_module('kprobe', run_name='__main__')\nexcept SystemExit: pass\n"
        "print('LOADED', ','.join(m for m in ('pyspark', 'confluent_kafka', 'dns.resolver', 'kprobe.lab.native', 'kprobe.options', 'kprobe.kafka.connection', 'ssl') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "LOADED"


@pytest.mark.lab  # `kprobe demo` starts the listeners lab's brokers
def test_demo_runs_the_listeners_story():
    """The README's first command: real broker, three listeners, the gap shown, exit 0."""
    done = subprocess.run([sys.executable, "-m", "kprobe", "demo", "--no-color"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for listener in ("LISTENER_FRED", "LISTENER_BOB", "LISTENER_ALICE"):
        assert f"== {listener}, probed from" in out
    assert out.count("ERROR ADVERTISED_UNRESOLVABLE") == 2  # BOB and ALICE from the Docker host
    assert out.count("\nOK: ") == 2  # FRED from the host, BOB from inside the Docker network
    assert "broker 0 at never-gonna-give-you-up:" in out
    assert "lab stopped" in done.stderr


# -- list shares probe's options -----------------------------------------------------------------

# Options whose meaning is the same for `list` as for `probe`: same flags, same environment variable,
# same help. -b (list takes the first that answers) and --json (kcat's JSON) keep their own help.
SHARED_WITH_LIST = ("props", "prop_files", "nameservers", "timeout", "deadline", "no_color", "verbose")
SHARED_OWN_HELP = ("bootstrap", "json_out")


def _params(command: str) -> dict:
    import typer.main

    from kprobe.cli.app import app

    return {p.name: p for p in typer.main.get_command(app).commands[command].params}


def test_list_shares_probes_options():
    probe, listing = _params("probe"), _params("list")
    for name in (*SHARED_WITH_LIST, *SHARED_OWN_HELP):
        assert name in listing, f"list lacks probe's {name}"
        a, b = probe[name], listing[name]
        assert (a.opts, a.secondary_opts, a.envvar, a.default, a.multiple) == \
            (b.opts, b.secondary_opts, b.envvar, b.default, b.multiple), name
        if name in SHARED_WITH_LIST:
            assert a.help == b.help, name


def test_readme_says_exactly_which_probe_options_list_takes():
    """The README's sentence on `kprobe list` names options; each must be one list accepts, and
    those it says list shares with probe must be probe's too."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    sentence = re.search(r"`kprobe list` takes (.*?)\n\n", readme, re.S)
    assert sentence, "README no longer says which options kprobe list takes"
    named = re.findall(r"`(-[-\w]+)", sentence.group(1))
    assert len(named) >= 8, named
    listing = {o for p in _params("list").values() for o in (*p.opts, *p.secondary_opts)}
    probe = {o for p in _params("probe").values() for o in (*p.opts, *p.secondary_opts)}
    assert set(named) <= listing, set(named) - listing
    shared = re.search(r"(.*?) as `probe` does", sentence.group(1), re.S)
    assert shared, sentence.group(1)
    assert set(re.findall(r"`(-[-\w]+)", shared.group(1))) <= probe


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("command", [["list"], ["-L"]], ids=["list", "kcat-alias"])
def test_list_accepts_no_color(command):
    """The README: `list` takes probe's options; `--no-color` was refused as an unknown option."""
    done = run(*command, "-b", f"127.0.0.1:{_closed_port()}", "--no-color", "--timeout", "1")
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("kprobe: no bootstrap answered (127.0.0.1:"), done.stderr


# -- an internal error is "the run failed" ------------------------------------------------------

def test_a_bug_exits_3_with_one_line_and_no_traceback(monkeypatch):
    """A genuine bug deep in the pipeline (the findings step looking up what is not there), in a
    real run against a closed loopback port: exit 3, never 1 (a gap), one line, no traceback.

    In this process (tests/support/cli_runner.py, which also puts logging back), for the patched rule to apply."""
    import kprobe.runs.probe

    def buggy_diagnose(bootstraps, results, *controllers):
        return {}[bootstraps[0].address]  # KeyError: a bug, not a network condition

    monkeypatch.setattr(kprobe.runs.probe, "diagnose", buggy_diagnose)
    monkeypatch.delenv("KPROBE_DEBUG", raising=False)
    done = run_cli(["probe", "-b", f"127.0.0.1:{_closed_port()}", "--timeout", "1", "--no-identity"])
    assert done.returncode == 3
    assert done.stdout == ""
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith("kprobe: internal error: KeyError: "), err
    assert "KPROBE_DEBUG=1" in err and "Traceback" not in err


@pytest.mark.parametrize("args, module, name", [
    (["schema"], "kprobe.output.json_report", "schema_text"),
    (["lab", "down"], "kprobe.lab.supervisor", "stop_detached"),
])
def test_ctrl_c_in_a_typer_command_is_one_line_and_exit_130(monkeypatch, args, module, name):
    """Typer catches an interrupt around every command and returns a bare 130, without a word: a user saw
    nothing, a script could not tell it from a crash. Every command (here one of the app and one of the lab
    group, an interrupt landing in each) says it in one line, as `guard` says it for probe and list. A real
    SIGINT to a real process: tests/aggregate/test_job.py's warm-driver test interrupts `kprobe aggregate`."""
    import importlib

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), name, interrupted)
    done = run_cli(args)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "\nkprobe: interrupted\n")


def test_an_http_proxy_is_named_when_no_bootstrap_connects(tmp_path):
    """HTTPS_PROXY and friends carry no Kafka client: one line says so when the bootstrap cannot be reached."""
    import os

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        target = f"127.0.0.1:{closed.getsockname()[1]}"
        env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:3128", "no_proxy": ""}
        done = run_cli(["probe", "-b", target, "--timeout", "1"], env=env)
        assert done.returncode == 3
        lines = [line for line in done.stderr.splitlines() if "proxy" in line.lower()]
        assert lines == ["kprobe: HTTPS_PROXY is set, but Kafka clients do not use HTTP proxies: they connect to the "
                         "brokers directly (TCP), so the proxy cannot carry them; a TCP forward (ssh -L, kubectl "
                         "port-forward) with --connect-to can stand in for a path"]
        without = run_cli(["probe", "-b", target, "--timeout", "1"],
                          env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
        assert "proxy" not in without.stderr.lower()
