"""The command line: help, version, schema, and what a run imports."""

from __future__ import annotations

import json
import subprocess
import sys

from kprobe import __version__


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True,
                          timeout=60, check=False)


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
    from kprobe.cli import _app_for, app

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
    assert names == ["listeners", "cloud", "three-brokers", "tls", "sasl", "collector"]


def test_schema_is_valid_json_schema():
    import jsonschema

    done = run("schema")
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == "kprobe.report/v1"


def test_probe_path_never_imports_heavy_modules():
    code = (
        "import sys; import kprobe.cli, kprobe.probe_run, kprobe.output.text, kprobe.output.json_report;"
        "print(','.join(m for m in ('pyspark', 'confluent_kafka', 'testcontainers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_help_never_imports_dns_or_kafka_clients():
    code = (
        "import sys, runpy; sys.argv=['kprobe','--help'];\n"
        "try:\n    runpy.run_module('kprobe', run_name='__main__')\nexcept SystemExit: pass\n"
        "print('LOADED', ','.join(m for m in ('pyspark', 'confluent_kafka', 'dns.resolver', 'kprobe.lab.native', 'kprobe.config', 'kprobe.kafka.connection', 'ssl') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "LOADED"


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
