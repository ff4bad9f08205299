"""`kprobe serve` against hostile scrape URLs, slow clients and configs.

Each test reproduces its defect from outside: a real `kprobe serve` process (tests/serve/test_serve.py's
`serving`) or, where the server's threads are counted, the server in-process; HTTP over loopback,
and listeners on loopback that count what reaches them. No lab: these need no broker.
"""

from __future__ import annotations

import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import yaml
from cli_runner import run_cli
from test_serve import families, get, serving

from kprobe.serve.allow import parse_patterns
from kprobe.serve.exporter import ServeOptions, make_server
from kprobe.serve.modules import default_config


class Listener:
    """A loopback TCP listener that counts the connections it accepts and keeps what they send.

    `silent`: never accept, so a client's connect completes in the backlog and its request is never
    answered (a broker that hangs). Otherwise each connection is read for a moment, then closed.
    """

    def __init__(self, host: str = "127.0.0.1", *, silent: bool = False) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.received = b""
        self._stop = threading.Event()
        if not silent:
            threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.settimeout(0.2)
            try:
                self.received += conn.recv(65536)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


@contextmanager
def listening(host: str = "127.0.0.1", *, silent: bool = False) -> Iterator[Listener]:
    listener = Listener(host, silent=silent)
    try:
        yield listener
    finally:
        listener.close()


def run_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`kprobe serve` that is refused at start: kprobe.cli.main in-process (tests/support/cli_runner.py), nothing served."""
    import os

    return run_cli(["serve", "--listen", "127.0.0.1:0", *args], env={**os.environ, **(env or {})})


# The allow-list matches parsed hosts and ports.

def test_allow_patterns_match_the_parsed_host_and_port_not_the_text():
    """`127.0.0.3*:*` once admitted the name `127.0.0.3x.attacker.example`; `[::1]:P` never matched `[::1]:P`.

    Now an IP-shaped pattern admits IP literals only, a name glob names only (its `*` within one label), CIDR
    patterns admit the addresses in them, and IPv6 is written in brackets. Allowed targets reach their listener;
    refused ones are 403 with no connection to anything."""
    with listening("::1") as v6, listening("127.0.0.65") as inside, listening("127.0.0.68") as outside, \
            listening("127.0.0.1") as local:
        allow = ["127.0.0.3*:*", f"[::1]:{v6.port}", f"127.0.0.64/30:{inside.port}", "kafka-*.example:*",
                 f"127.0.0.1/32:{local.port}", f"[::1/128]:{inside.port}"]
        with serving(*[a for pattern in allow for a in ("--allow-target", pattern)]) as (url, proc):
            def status(target: str) -> tuple[int, str]:
                code, body, _ = get(f"{url}/probe?target={target}", timeout_header="2")
                return code, body

            refused = {
                "127.0.0.3x.attacker.example:9092": "a name is not admitted by an IP glob",
                "kafka-1.attacker.example:9092": "a name glob's * stays within one label",
                f"127.0.0.68:{outside.port}": "outside the /30",
                f"localhost:{local.port}": "a name that resolves into 127.0.0.1/32 is still a name",
                f"[::ffff:127.0.0.65]:{inside.port}": "an IPv4-mapped IPv6 address is IPv6",
                f"127.0.0.65:{inside.port + 1 if inside.port < 65535 else 1}": "another port",
            }
            for target, why in refused.items():
                code, body = status(target)
                assert code == 403 and "is not allowed" in body, (target, why, code, body)
            for target, listener in ((f"[::1]:{v6.port}", v6), (f"127.0.0.65:{inside.port}", inside),
                                     (f"[0:0::1]:{v6.port}", v6)):
                before = listener.accepted
                code, body = status(target)
                assert code == 200 and "kprobe_probe_success" in body, (target, code, body)
                assert listener.accepted > before, target
            code, body = status(f"2130706433:{local.port}")  # 127.0.0.1 as a number: neither a name nor an IP
            assert code == 400 and "reads as an IPv4 address" in body, body
            assert proc.poll() is None
        assert (outside.accepted, local.accepted) == (0, 0)


@pytest.mark.parametrize(("pattern", "says"), [
    ("127.0.0.3*", "has no port"),
    ("fd00::/8:*", "has an IPv6 address outside brackets"),
    ("[fd00::*]:9092", "globs an IPv6 address"),
    ("10.0.0.1/8:9092", "has host bits set after the address: write the network as 10.0.0.0/8"),
    ("10.*:9092", "is not four dot-separated parts"),
    ("kafka[12]:9092", "has a character no host name has"),
    ("kafka\x1b[2J:9092", "has a character no host or port has"),
])
@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_an_odd_allow_pattern_is_refused_at_start_in_one_line(pattern, says):
    done = run_serve("--allow-target", pattern)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("kprobe: error: bad --allow-target ") and says in line, line
    assert "\x1b" not in line


@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_an_odd_config_target_is_refused_at_start_in_one_line(tmp_path):
    config = tmp_path / "kprobe.yml"
    config.write_text("targets: ['[::1]:9092', '127.0.0.1.*:9092']\n")
    done = run_serve("--config", str(config))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert f"--config {config}: target pattern '127.0.0.1.*:9092' is not four dot-separated parts" in line, line


# The scrape URL cannot choose the security protocol.

def test_a_protocol_prefix_in_the_scrape_cannot_turn_sasl_on(tmp_path):
    """A module that sets no security.protocol holds a SASL password: `target=SASL_PLAINTEXT://...` used to turn
    SASL on and send it in cleartext. Now it is 400, saying the module must set it, and nothing is dialled; a prefix
    equal to the module's own setting (or the default, PLAINTEXT) is accepted."""
    password = "s3cret-Pa55word"
    config = tmp_path / "kprobe.yml"
    config.write_text(yaml.safe_dump({"modules": {
        "creds": {"properties": {"sasl.mechanism": "PLAIN", "sasl.username": "monitor",
                                 "sasl.password": {"env": "KP_TEST_PASSWORD"}}},
        "sasl": {"properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                "sasl.username": "monitor", "sasl.password": {"env": "KP_TEST_PASSWORD"}}},
        "from_env": {"properties": {"security.protocol": {"env": "KP_TEST_PROTOCOL"}}},
    }}))
    with listening() as broker, serving("--config", str(config), "--allow-target", f"127.0.0.1:{broker.port}",
                                        env={"KP_TEST_PASSWORD": password, "KP_TEST_PROTOCOL": "sasl_ssl"}) as (url, proc):
        target = f"127.0.0.1:{broker.port}"
        for prefix, module in (("SASL_PLAINTEXT", "creds"), ("sasl_ssl", "creds"), ("SSL", "sasl")):
            code, body, _ = get(f"{url}/probe?target={prefix}://{target}&module={module}", timeout_header="2")
            assert code == 400 and "a scrape cannot choose the security protocol" in body, (prefix, body)
            assert "set security.protocol" in body and body.count("\n") == 1 and password not in body
        code, body, _ = get(f"{url}/probe?target=SASL_PLAINTEXT://{target}&module=from_env")
        assert code == 400 and "module from_env sets security.protocol from {env: KP_TEST_PROTOCOL}" in body, body
        assert "sasl_ssl" not in body.lower()  # a value read from {env:} is never echoed, even this one
        assert broker.accepted == 0
        for prefix, module in (("PLAINTEXT", "creds"), ("SASL_PLAINTEXT", "sasl"), ("sasl_plaintext", "sasl")):
            code, body, _ = get(f"{url}/probe?target={prefix}://{target}&module={module}", timeout_header="2")
            assert code == 200 and "kprobe_probe_success" in body, (prefix, body)
        assert broker.accepted >= 3
        assert proc.poll() is None
    assert password.encode() not in broker.received


# The bound on bootstraps per /probe.

def test_one_probe_names_at_most_16_bootstraps():
    """4,000 bootstraps in one /probe were 4,000 connections (4.7 s, 45 threads); now one line, 400, nothing dialled."""
    with listening() as broker, serving("--allow-target", f"127.0.0.1:{broker.port}") as (url, _):
        many = ",".join([f"127.0.0.1:{broker.port}"] * 17)
        code, body, _ = get(f"{url}/probe?target={many}")
        assert code == 400 and "one /probe takes at most 16 bootstrap addresses" in body, body
        fields = "&".join([f"target=127.0.0.1:{broker.port},127.0.0.1:{broker.port}"] * 9)  # 9 fields of 2
        assert get(f"{url}/probe?{fields}")[0] == 400
        assert broker.accepted == 0
        code, body, _ = get(f"{url}/probe?target={','.join([f'127.0.0.1:{broker.port}'] * 16)}", timeout_header="2")
        assert code == 200 and broker.accepted >= 1
        code, body, _ = get(f"{url}/probe?target={','.join(f'127.0.0.1:{p}' for p in range(1, 5001))}")
        assert (code, body) == (414, "414 Request-URI Too Long\n")  # past 64 KiB, one line as well


# Slow clients.

@contextmanager
def in_process(**settings: object) -> Iterator[tuple[str, object]]:
    """The exporter's server in this process (its threads can be counted), on a free loopback port."""
    options = ServeOptions(host="127.0.0.1", port=0, config=default_config(), **settings)  # type: ignore[arg-type]
    server, _ = make_server(options)
    worker = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    worker.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        worker.join(timeout=5)


def _trickler(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=2)
    sock.sendall(b"G")
    return sock


def _answer_of(sock: socket.socket) -> bytes | None:
    """What the server sent before closing, once it has closed; None while the connection is open."""
    if not select.select([sock], [], [], 0)[0]:
        return None
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except OSError:
        pass
    return data


def test_slow_clients_are_cut_at_the_deadline_and_cost_no_thread():
    """Three clients trickle a request one byte every 0.1 s into a server with a 1 s head deadline: each is answered
    408 and closed at about 1 s (a per-read timeout would never cut them), no thread is spent on any of them while
    they trickle, and /-/healthy answers at once meanwhile."""
    head = b"ET /-/healthy HTTP/1.0\r\nX-Slow: " + b"x" * 200
    with in_process(head_timeout=1.0, max_connections=8) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        time.sleep(0.1)
        baseline = threading.active_count()
        started = time.monotonic()
        slow = [_trickler(port) for _ in range(3)]
        cut: dict[int, tuple[float, bytes]] = {}
        most_threads, healthy_took = 0, None
        for i in range(60):  # 6 s at most
            for n, sock in enumerate(slow):
                if n in cut:
                    continue
                answer = _answer_of(sock)
                if answer is not None:
                    cut[n] = (time.monotonic() - started, answer)
                    continue
                try:
                    sock.send(head[i:i + 1])
                except OSError:
                    cut[n] = (time.monotonic() - started, b"")
            most_threads = max(most_threads, threading.active_count() - baseline)
            if i == 3:
                asked = time.monotonic()
                assert get(f"{url}/-/healthy")[:2] == (200, "Healthy\n")
                healthy_took = time.monotonic() - asked
            if len(cut) == len(slow):
                break
            time.sleep(0.1)
        for sock in slow:
            sock.close()
        assert len(cut) == 3, cut
        for took, answer in cut.values():
            assert 0.9 <= took <= 2.0, cut
            assert answer.startswith(b"HTTP/1.0 408 Request Timeout") and b"not sent within 1 s" in answer, answer
        assert most_threads <= 1, most_threads  # /-/healthy's own thread, perhaps still closing
        assert healthy_took is not None and healthy_took < 0.5
        rejected = families(get(f"{url}/metrics")[1])["kprobe_exporter_requests_rejected"]
        assert {s.labels["reason"]: s.value for s in rejected.samples} == {"timeout": 3.0}  # type: ignore[attr-defined]


def test_open_connections_are_bounded_and_a_quick_request_still_gets_in():
    """--max-connections 4: four slow clients fill it, and /-/healthy still answers at once, closing the oldest slow
    one (503); when all four are requests being served (probes of a broker that never answers), a fifth connection
    is answered 503 at once, and the open connections stay at 4 until the probes end."""
    with listening(silent=True) as hung, in_process(head_timeout=5.0, max_connections=4,
                                                    allow=parse_patterns(["127.0.0.1:*"], "test")) as (url, server):
        port = int(url.rsplit(":", 1)[1])
        slow = [_trickler(port) for _ in range(4)]
        time.sleep(0.2)
        assert server.open_connections == 4  # type: ignore[attr-defined]
        asked = time.monotonic()
        assert get(f"{url}/-/healthy")[:2] == (200, "Healthy\n")
        assert time.monotonic() - asked < 0.5
        deadline = time.monotonic() + 2
        while (first := _answer_of(slow[0])) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first is not None and first.startswith(b"HTTP/1.0 503") and b"had not sent its request" in first
        assert all(_answer_of(s) is None for s in slow[1:])  # the younger ones are still open
        for sock in slow:
            sock.close()
        time.sleep(0.2)

        def scrape(_: int) -> int:
            return get(f"{url}/probe?target=127.0.0.1:{hung.port}", timeout_header="2")[0]

        with ThreadPoolExecutor(max_workers=4) as pool:
            probes = [pool.submit(scrape, n) for n in range(4)]
            deadline = time.monotonic() + 2
            while server.serving < 4 and time.monotonic() < deadline:  # type: ignore[attr-defined]
                time.sleep(0.02)  # all four heads whole: a head still arriving would be evicted, not refused
            asked = time.monotonic()
            code, body, _ = get(f"{url}/-/healthy")
            assert (code, time.monotonic() - asked < 0.5) == (503, True), body
            assert "busy: 4 connections are open (--max-connections)" in body
            most = 0
            while not all(p.done() for p in probes) and time.monotonic() < deadline + 10:
                most = max(most, server.open_connections)  # type: ignore[attr-defined]
                time.sleep(0.02)
            assert [p.result(timeout=10) for p in probes] == [200] * 4
            assert most == 4
        assert get(f"{url}/-/healthy")[0] == 200
        own = families(get(f"{url}/metrics")[1])
        rejected = {s.labels["reason"]: s.value for s in own["kprobe_exporter_requests_rejected"].samples}  # type: ignore[attr-defined]
        assert rejected == {"too_many_connections": 2.0}
        assert 1 <= own["kprobe_exporter_connections_open"].samples[0].value <= 2  # type: ignore[attr-defined]


def test_an_event_for_a_connection_evicted_earlier_in_the_same_turn_is_skipped():
    """One select() turn can hold both a new connection and a read event for the oldest head. Accepting at the
    bound evicts that head (503, now closing) before its own event comes up; reading it then as a head once
    killed the loop (KeyError; every later request timed out). Driven turn by turn here, without the loop."""
    import selectors

    from kprobe.serve.connections import HeadFirstHandler, Server

    server = Server(("127.0.0.1", 0), HeadFirstHandler, family=socket.AF_INET, max_connections=1, head_timeout=5.0)
    port = server.socket.getsockname()[1]
    with selectors.DefaultSelector() as selector:
        first = socket.create_connection(("127.0.0.1", port), timeout=2)
        deadline = time.monotonic() + 2
        while not server.open_connections and time.monotonic() < deadline:
            server._accept(selector)
        (stale,) = server._pending.values()
        first.sendall(b"GET /-/healthy HTTP/1.0\r\n\r\n")  # whole, but its event is not handled yet
        second = socket.create_connection(("127.0.0.1", port), timeout=2)
        while server.open_connections and not server._closing and time.monotonic() < deadline:
            server._accept(selector)  # the bound: the oldest head is evicted for the newcomer
        server._read(selector, stale)  # the event select() returned for it before the eviction
        assert (server.open_connections, server.serving) == (1, 0)  # the newcomer's head only; nothing dispatched
        assert _answer_of_within(first, 2).startswith(b"HTTP/1.0 503")
        for sock in (first, second):
            sock.close()
    server.server_close()


def _answer_of_within(sock: socket.socket, seconds: float) -> bytes:
    select.select([sock], [], [], seconds)
    return _answer_of(sock) or b""


@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_max_connections_is_an_option_checked_at_start():
    done = run_serve("--max-connections", "0")
    assert done.returncode == 2 and "bad --max-connections 0: give at least 1" in done.stderr


# Values read from {env:} / {file:} are never echoed; a non-UTF-8 config is one line.

@pytest.mark.parametrize("where", ["env", "file"])
@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_a_value_from_env_or_file_is_never_echoed_at_start(tmp_path, where):
    """`security.protocol: {env: KP_PW}` used to print the variable's value in the start-up error."""
    secret = "Hunter2-Sekret"
    ref = {"env": "KP_TEST_PW"} if where == "env" else {"file": str(tmp_path / "pw")}
    (tmp_path / "pw").write_text(secret + "\n")
    config = tmp_path / "kprobe.yml"
    config.write_text(yaml.safe_dump({"modules": {"m": {"properties": {"security.protocol": ref}}}}))
    done = run_serve("--config", str(config), env={"KP_TEST_PW": secret})
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    source = "{env: KP_TEST_PW}" if where == "env" else f"{{file: {tmp_path / 'pw'}}}"
    assert f"modules.m: properties.security.protocol (from {source}): the value is refused" in line, line
    for shown in (secret, secret.upper(), secret.lower()):
        assert shown not in done.stderr


def test_a_value_from_a_file_is_never_echoed_by_a_scrape(tmp_path):
    """The file behind `security.protocol` is rewritten after start with a value kprobe refuses: the scrape is 400
    naming the key and the file, and neither the answer nor the log holds the value in any case."""
    secret = "Rotated-Sekret-42"
    value = tmp_path / "protocol"
    value.write_text("PLAINTEXT\n")
    config = tmp_path / "kprobe.yml"
    config.write_text(yaml.safe_dump({"targets": ["127.0.0.1:*"], "modules": {"m": {"properties": {
        "security.protocol": {"file": str(value)}}}}}))
    with serving("--config", str(config), "-v") as (url, proc):
        value.write_text(secret + "\n")
        code, body, _ = get(f"{url}/probe?target=127.0.0.1:9&module=m")
    log = proc.stderr.read()  # type: ignore[union-attr]
    assert code == 400 and f"module m: properties.security.protocol (from {{file: {value}}})" in body, body
    for shown in (secret, secret.upper(), secret.lower()):
        assert shown not in body and shown not in log


@pytest.mark.parametrize(("content", "says"), [
    (b"modules:\n  m:\n    timeout: 5s\n# caf\xe9\n", "not UTF-8 text (a byte at offset 35 is not): save it as UTF-8"),
    (b"\xff\xfe" + "modules: {}\n".encode("utf-16-le"), "not UTF-8 text (a byte at offset 0 is not)"),
    (b"[" * 20000, "nested too deep to read"),
])
@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_a_config_that_is_not_utf8_or_too_deep_is_one_line_and_exit_2(tmp_path, content, says):
    config = tmp_path / "kprobe.yml"
    config.write_bytes(content)
    done = run_serve("--config", str(config))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"kprobe: error: --config {config}: ") and says in line, line
