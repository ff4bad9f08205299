"""Bad user input: one line naming the problem and the fix, exit code 2, never a traceback.

The cases run kprobe's entry point in this process (tests/support/cli_runner.py: the same stdout, stderr and
exit code a `python -m kprobe` child gives, without its start-up); test_in_process_runs_match_real_processes
runs a few both ways, and test_read_only_file_system_is_named runs real processes only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from kprobe.errors import UsageError
from kprobe.options import parse_address, parse_duration, parse_nameserver, parse_properties

B = ["-b", "127.0.0.1:9"]
CASES = [
    # addresses
    ["probe", "-b", ""], ["probe", "-b", ","], ["probe", "-b", "host:"], ["probe", "-b", "host:0"],
    ["probe", "-b", "host:65536"], ["probe", "-b", "host:-1"], ["probe", "-b", "host:9092x"],
    ["probe", "-b", "::1:9092"], ["probe", "-b", "[::1"], ["probe", "-b", "[nope]:1"], ["probe", "-b", "[::1]x"],
    ["probe", "-b", "bad host"], ["probe", "-b", "a..b:1"], ["probe", "-b", "ho$t:1"], ["probe", "-b", "x" * 300],
    ["probe", "-b", "-dash:1"], ["probe", "-b", "9://x:1"],
    # durations
    ["probe", *B, "--timeout", "soon"], ["probe", *B, "--timeout", "0"], ["probe", *B, "--timeout", "-5"],
    ["probe", *B, "--timeout", "25h"], ["probe", *B, "--deadline", "1d"], ["probe", *B, "--deadline", ""],
    # properties and files
    ["probe", *B, "-X", "novalue"], ["probe", *B, "-X", "=x"], ["probe", *B, "-X", "security.protocol=TLS"],
    ["probe", *B, "-F", "/nonexistent/client.properties"], ["probe", *B, "-F", "/"],
    ["probe", *B, "--nameserver", "dns.example.com"], ["probe", *B, "--nameserver", "127.0.0.1:99999"],
    ["probe", *B, "--compare-nameserver", "nope"],
    ["probe", *B, "-F", "{malformed}"], ["probe", *B, "-F", "{not_utf8}"], ["list", *B, "-F", "{malformed}"],
    # a secret typed in a form -X does not take: the message must not echo it (checked below)
    ["probe", *B, "-X", "sasl.password:hunter2"], ["probe", *B, "-X", "sasl.password hunter2"],
    ["probe", *B, "-X", "sasl.password", "hunter2"],
    # output
    ["probe", *B, "-o", "/nonexistent-dir/report.json"], ["probe", *B, "-o", "/"],
    ["probe", *B, "--out", "/proc/x"], ["probe", *B, "-o", "/proc/x/y"], ["probe", *B, "--prom-file", "/proc/k.prom"],
    ["probe", *B, "--out", "/proc/version"], ["probe", *B, "--publish", "127.0.0.1:9/t", "--spool", "/proc/x"],
    # options
    ["probe", "--no-such-option"], ["probe"], ["probe", *B, "--tls-expiry-days", "many"], ["probe", *B, "extra"],
    # list
    ["list"], ["list", "-b", "host:0"], ["list", *B, "-t", ""], ["list", *B, "--timeout", "x"],
    ["list", *B, "-F", "/nonexistent"], ["-L"], ["-L", "-b", "[::1"],
    # watch
    ["watch"], ["watch", *B, "--every", "never"], ["watch", *B, "--every", "0"], ["watch", *B, "--count", "0"],
    ["watch", *B, "--jitter", "x"], ["watch", *B, "--out", "/proc/version"], ["watch", *B, "--format", "xml"],
    ["watch", *B, "--publish", "no-topic"], ["watch", *B, "--publish", "h:1/bad topic"],
    ["watch", *B, "--spool-max", "0"], ["watch", *B, "--json", "--format", "prometheus"],
    # aggregate
    ["aggregate", "--out", "/tmp/x"], ["aggregate", "/nonexistent/reports", "--out", "/tmp/x"],
    ["aggregate", ".", "--out", "/tmp/x", "--since", "yesterday"], ["aggregate", ".", "--out", "/proc/version"],
    ["aggregate", ".", "--out", "/tmp/x", "--kafka", "nobroker"], ["aggregate", ".", "--out", "/tmp/x", "--keep-warm", "2d"],
    # a warm driver waited forever on NaN and stopped on a negative idle time: the flag takes neither, nor inf
    ["aggregate", ".", "--out", "/tmp/x", "--keep-warm", "nan"], ["aggregate", ".", "--out", "/tmp/x", "--keep-warm", "inf"],
    ["aggregate", ".", "--out", "/tmp/x", "--keep-warm", "-5m"],
    # --resolve HOST=ADDR and --connect-to HOST:PORT=ADDR:PORT, one message per bad form
    ["probe", *B, "--resolve", "broker0"], ["probe", *B, "--resolve", "broker0=broker1"],
    ["probe", *B, "--resolve", "bad host=127.0.0.1"], ["probe", *B, "--resolve", "=127.0.0.1"],
    ["probe", *B, "--resolve", "broker0=127.0.0.1", "--resolve", "broker0=127.0.0.2"],
    ["probe", *B, "--connect-to", "broker0:9092"], ["probe", *B, "--connect-to", "broker0=127.0.0.1:9092"],
    ["probe", *B, "--connect-to", "broker0:9092=127.0.0.1"], ["probe", *B, "--connect-to", "broker0:x=127.0.0.1:1"],
    ["probe", *B, "--connect-to", "broker0:9092=127.0.0.1:70000"],
    ["probe", *B, "--connect-to", "SSL://broker0:9092=127.0.0.1:1"],
    ["probe", *B, "--connect-to", "[::1]=127.0.0.1:1"],
    ["probe", *B, "--connect-to", "b:1=127.0.0.1:2", "--connect-to", "b:1=127.0.0.1:3"],
    ["watch", *B, "--count", "1", "--resolve", "broker0"],
    # lab
    ["lab", "up", "no-such-scenario"], ["lab", "up"], ["lab", "up", "listeners", "--backend", "vm"],
    ["lab", "nope"],
    # each a usage error (2), never a crash (3): `²` and `٣` pass str.isdigit(); `$` in a
    # regular expression takes a trailing newline; 5,000 digits are past int()'s limit; 20,000 levels
    # of nesting are past the parsers' recursion; an impossible date is a ValueError from YAML's resolver.
    ["probe", "-b", "127.0.0.1:\u00b2"], ["probe", "-b", "127.0.0.1:\u0663"], ["probe", "-b", "kafka-1\n:9092"],
    ["probe", "-b", "127.0.0.1:" + "9" * 5000], ["probe", *B, "--resolve", "kafka-1\n=127.0.0.1"],
    ["check", "{deep_yaml}"], ["check", "{deep_flow_map}"], ["check", "{bad_date}"], ["check", "{huge_int}"],
    ["show", "{deep_report}"], ["show", "{deep_stream}"], ["diff", "{deep_report}", "{deep_report}"],
    # -F files that are not text (bytes 0-255 repeated; the same without NUL), and a JAAS password with spaces
    # left unquoted (its words must not be echoed).
    ["probe", *B, "-F", "{binary}"], ["probe", *B, "-F", "{control_keys}"], ["probe", *B, "-F", "{jaas_spaces}"],
]


# After the problem comes what to do: "<problem>: <fix>", the fix an instruction or a pointer.
HINT = re.compile(r"\b(give|use|write|see|choose|set|make|keep|run|drop|remove)\b|e\.g\.", re.IGNORECASE)


SECRET = "hunter2"


def test_there_are_at_least_40_cases():
    assert len(CASES) >= 40


def _files(tmp_path: Path) -> dict[str, str]:
    """Bad -F files made fresh per test: one line without '=', bytes that are not UTF-8, files that are not
    text, an unquoted password with spaces."""
    malformed = tmp_path / "malformed.properties"
    # librdkafka's own keys make it a librdkafka file, read line by line as kcat reads it (a Java file would
    # take `just-a-word` as a key with an empty value, as java.util.Properties does: tests/clientprops/test_load.py).
    malformed.write_text("# client settings\nsasl.username=app\njust-a-word\n", encoding="utf-8")
    not_utf8 = tmp_path / "latin1.properties"
    not_utf8.write_bytes(b"sasl.username=j\xf6rg\n")
    files = {"{malformed}": str(malformed), "{not_utf8}": str(not_utf8)}
    for name, data in (("binary.properties", bytes(range(256)) * 64),
                       ("control_keys.properties", bytes(range(1, 256)) * 64),
                       ("jaas_spaces.properties", b"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        b"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        b"username=app password=correct " + SECRET.encode() + b" battery staple;\n")):
        (tmp_path / name).write_bytes(data)
        files["{" + name.split(".")[0] + "}"] = str(tmp_path / name)
    # Nested 20,000 deep, and values YAML's resolver cannot build.
    for name, text in (("deep_yaml.yaml", "services: " + "[" * 20_000 + "]" * 20_000 + "\n"),
                       ("deep_flow_map.yaml", "services: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n"),
                       ("bad_date.yaml", "services:\n  kafka:\n    image: apache/kafka\n    built: 2026-13-45\n"),
                       ("huge_int.yaml", "services:\n  kafka:\n    image: apache/kafka\n    n: " + "9" * 5000 + "\n"),
                       ("deep_report.json", "[" * 20_000 + "]" * 20_000 + "\n"),
                       ("deep_stream.jsonl", '{"a":' * 20_000 + "1" + "}" * 20_000 + "\n")):
        path = tmp_path / name
        path.write_text(text)
        files["{" + name.split(".")[0] + "}"] = str(path)
    return files


def run_kprobe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """kprobe's entry point in this process: what a user's shell would get (tests/support/cli_runner.py)."""
    return run_cli(args)


def run_process(args: list[str]) -> subprocess.CompletedProcess[str]:
    """A real `python -m kprobe` child, for the cases that check the in-process runs against one."""
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=30,
                          check=False)


@pytest.mark.timeout(30)  # what a child of each case was given: a hang fails the case, not the session
@pytest.mark.parametrize("args", CASES, ids=[" ".join(a)[:40] for a in CASES])
def test_one_line_exit_2(args, tmp_path):
    files = _files(tmp_path)
    args = [files.get(a, a) for a in args]
    if args[-2:] == ["-F", "/"]:
        args = [*args[:-1], str(tmp_path)]
    done = run_kprobe(args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kprobe: error: "), done.stderr
    assert "Traceback" not in done.stderr
    body = lines[0].removeprefix("kprobe: error: ")
    pointer = re.search(r" \(see `kprobe [^`]*`\)$", body)  # click's own errors end with a pointer
    if pointer:
        problem, fix = body[: pointer.start()], pointer.group(0)
    else:
        problem, sep, fix = body.partition(": ")
        assert sep, f"no '<problem>: <fix>' in {lines[0]!r}"
    assert problem.strip(), lines[0]
    assert HINT.search(fix), f"no fix named after the problem: {lines[0]!r}"
    assert SECRET not in done.stderr


# One case of each way main() turns an input into a line: click's usage error, kprobe's UsageError, a secret
# scrubbed from click's message, and a file nested past the recursion limit (the in-process stack starts
# deeper than a child's).
BOTH_WAYS = [["probe", "--no-such-option"], ["probe", "-b", "host:0"], ["probe", *B, "-X", "sasl.password", "hunter2"],
             ["show", "{deep_report}"]]


@pytest.mark.parametrize("args", BOTH_WAYS, ids=[" ".join(a)[:40] for a in BOTH_WAYS])
def test_in_process_runs_match_real_processes(args, tmp_path):
    """The in-process runner (tests/support/cli_runner.py) gives what a real `python -m kprobe` gives, byte for byte."""
    files = _files(tmp_path)
    args = [files.get(a, a) for a in args]
    real, here = run_process(args), run_kprobe(args)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode == 2 and real.stderr.count("\n") == 1 and "Traceback" not in real.stderr, real.stderr


def test_malformed_properties_file_names_the_line(tmp_path):
    path = _files(tmp_path)["{malformed}"]
    done = run_kprobe(["probe", *B, "-F", path])
    assert done.returncode == 2
    assert done.stderr == (f"kprobe: error: bad line 3 in -F {path}: expected key=value: "
                           "write each line as key=value ('#' starts a comment)\n")


def test_unreadable_properties_file(tmp_path):
    """A -F file kprobe may not read. Tests run as root here, and root reads a mode-000 file, so
    where permission cannot deny the test says so (skip) rather than pass vacuously; the
    not-UTF-8 and directory cases in the table cover "unreadable" either way."""
    path = tmp_path / "secret.properties"
    path.write_text("sasl.password=hunter2\n", encoding="utf-8")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: a mode-000 file is still readable, permission cannot be denied")
        done = run_kprobe(["probe", *B, "-F", str(path)])
    finally:
        path.chmod(0o600)
    assert done.returncode == 2
    assert done.stderr == (f"kprobe: error: cannot read -F {path}: permission denied: "
                           "make it readable (chmod u+r) or give another file\n")


@pytest.mark.parametrize("form", [["-X", "sasl.password:hunter2"], ["-X", "sasl.password hunter2"],
                                  ["-X", "sasl.password", "hunter2"], ["-X", "ssl.key.password", "hunter2"]],
                         ids=["colon", "space", "stray-argument", "key-password-stray"])
def test_secret_in_a_wrong_form_is_never_echoed(form):
    done = run_kprobe(["probe", *B, *form])
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stderr and SECRET not in done.stdout
    assert done.stderr.startswith("kprobe: error: ") and len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr


# -- output paths: made where they can be, refused before any probing where they cannot --

@pytest.fixture
def silent_broker():
    """A loopback listener that accepts connections and never answers: a probe of it would wait out
    its whole --timeout, and every connection kprobe made stays in the accept queue to be counted."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield sock


def _connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def _hanging_probe(sock: socket.socket) -> list[str]:
    host, port = sock.getsockname()
    return ["probe", "-b", f"{host}:{port}", "--timeout", "20", "--deadline", "20", "--no-identity"]


def test_out_makes_missing_directories_and_writes_the_report_there(tmp_path):
    with socket.socket() as sock:  # a closed port: refused at once, the run fails fast (exit 3)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "not" / "yet" / "reports"
    done = run_kprobe(["probe", "-b", f"127.0.0.1:{port}", "--timeout", "1", "--out", str(out), "--json"])
    assert done.returncode == 3, done.stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) == 1 and written[0].parent.parent == out, written
    assert json.loads(written[0].read_text())["id"] == json.loads(done.stdout)["id"]


def _os_says(action) -> str:
    """What the OS answers here for the action kprobe should have tried (it differs for root)."""
    try:
        action()
    except OSError as exc:
        return exc.strerror[0].lower() + exc.strerror[1:]
    raise AssertionError("the action succeeded: this case cannot test a refusal here")


def _mkdir(path: str) -> str:
    return f"cannot create directory {path}: {_os_says(lambda: os.mkdir(path))}"


def _new_file(directory: str) -> str:
    return f"cannot create a file in {directory}: {_os_says(lambda: os.close(os.open(f'{directory}/.k', os.O_CREAT)))}"


UNUSABLE = [
    (["--out", "/proc/kprobe-reports"], lambda: _mkdir("/proc/kprobe-reports")),
    (["--out", "/proc"], lambda: _new_file("/proc")),
    (["--out", "/sys"], lambda: _new_file("/sys")),
    (["--out", "/proc/version"], lambda: "it is a file, give a directory"),
    (["--out", "/proc/version/reports"],
     lambda: "cannot create directory /proc/version/reports: /proc/version is a file, not a directory"),
    (["-o", "/proc/x/y.json"], lambda: "directory /proc/x does not exist"),
    (["-o", "/proc/report.json"], lambda: _new_file("/proc")),
    (["--prom-file", "/proc/kprobe.prom"], lambda: _new_file("/proc")),
    (["--publish", "127.0.0.1:9/reports", "--spool", "/proc/spool"], lambda: _mkdir("/proc/spool")),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("option", "cause"), UNUSABLE, ids=[" ".join(o) for o, _ in UNUSABLE])
def test_unusable_output_path_exits_2_naming_the_cause_before_probing(option, cause, silent_broker):
    top = "/" + option[-1].split("/")[1]
    if not os.path.isdir(top):
        pytest.skip(f"no {top} here")
    started = time.monotonic()
    done = run_kprobe([*_hanging_probe(silent_broker), *option])
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(f"kprobe: error: cannot write {option[-2]} {option[-1]}: {cause()}"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert _connections(silent_broker) == 0, "kprobe probed before refusing the output path"
    assert elapsed < 15, elapsed  # a probe of the silent broker would have waited 20 s


def test_a_real_process_refuses_an_unusable_output_path_before_probing(silent_broker):
    """The table above in-process; here one case as a real child, against the broker it would hang on."""
    started = time.monotonic()
    done = run_process([*_hanging_probe(silent_broker), "--out", "/proc/version"])
    elapsed = time.monotonic() - started
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == "kprobe: error: cannot write --out /proc/version: it is a file, give a directory\n"
    assert _connections(silent_broker) == 0, "kprobe probed before refusing the output path"
    assert elapsed < 15, elapsed


def test_read_only_file_system_is_named(tmp_path, silent_broker):
    """EROFS, in a private mount namespace (root, or a user namespace, and util-linux's unshare)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare here: cannot mount a read-only file system for the test")
    shell = "mount -t tmpfs -o ro tmpfs \"$1\" || exit 99; shift; exec \"$@\""
    results = {}
    for out in (mount, mount / "reports"):
        done = subprocess.run([unshare, "-m", "sh", "-c", shell, "sh", str(mount), sys.executable, "-m", "kprobe",
                               *_hanging_probe(silent_broker), "--out", str(out)],
                              capture_output=True, text=True, timeout=30, check=False)
        if done.returncode == 99:
            pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
        results[out] = done
    assert results[mount].returncode == 2
    assert results[mount].stderr.startswith(f"kprobe: error: cannot write --out {mount}: cannot create a file in "
                                            f"{mount}: read-only file system: ")
    assert results[mount / "reports"].returncode == 2
    assert results[mount / "reports"].stderr.startswith(
        f"kprobe: error: cannot write --out {mount}/reports: cannot create directory {mount}/reports: "
        "read-only file system: ")
    assert all(d.stderr.count("\n") == 1 for d in results.values())
    assert _connections(silent_broker) == 0


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_address_parser_fuzz(text):
    try:
        address = parse_address(text)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= address.port <= 65535 and address.host


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_duration_parser_fuzz(text):
    try:
        value = parse_duration(text, "--timeout")
    except UsageError as exc:
        assert "--timeout" in str(exc)
        return
    assert 0 < value <= 86400


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_nameserver_and_properties_fuzz(text):
    for parse in (parse_nameserver, lambda t: parse_properties([t])):
        try:
            parse(text)
        except UsageError:
            pass
