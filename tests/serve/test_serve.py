"""`kprobe serve` against real brokers, scraped by a real Prometheus (Debian's package), alerting.

The exporter runs as users run it, a `kprobe serve` process; Prometheus is started on loopback by
the test with the shipped rules (docker/prometheus/kprobe-rules.yml) and blackbox-style relabelling,
and read back through its HTTP API. The rules' own unit tests run through `promtool test rules`.
What is refused at start (a bad config, a bad option, a port in use) never serves: those run
kprobe.cli.main in-process (tests/support/cli_runner.py) and check what it prints and returns.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from prometheus_client.parser import text_string_to_metric_families
from real_clients import Relay

from kprobe import __version__

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
needs_prometheus = pytest.mark.skipif(not os.path.exists(PROMTOOL), reason="Debian's prometheus package (.ci/run "
                                      "installs it) provides promtool and the server")


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A `kprobe serve` process on a free loopback port: its base URL; SIGTERM at the end must exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "kprobe", "serve", "--listen", "127.0.0.1:0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"kprobe serve did not start: {line}{proc.stderr.read()}")
    try:
        yield match.group(1), proc
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def get(url: str, timeout_header: str | None = None, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, method=method)
    if timeout_header is not None:
        request.add_header("X-Prometheus-Scrape-Timeout-Seconds", timeout_header)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_prometheus
@pytest.mark.labs("three-brokers")
def test_prometheus_scrapes_serve_and_the_shipped_rule_alerts(three_lab, tmp_path):
    """Broker 2 of the BLACKHOLED listener is unreachable: Prometheus stores up 0 for it, 1 for the others, and
    the shipped rule is pending (its `for:` has not passed) for broker 2 only."""
    config = tmp_path / "kprobe.yml"
    config.write_text("modules:\n  default:\n    timeout: 1s\n")
    bootstrap = three_lab.real_endpoint("BLACKHOLED", 0)
    with serving("--config", str(config), "--allow-target", "127.0.0.3*:*", "--vantage", "ci") as (url, _):
        prom_port = free_port()
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
            "rule_files": [str(DOCKER / "prometheus" / "kprobe-rules.yml")],
            "scrape_configs": [{
                "job_name": "kprobe", "metrics_path": "/probe", "params": {"module": ["default"]},
                "static_configs": [{"targets": [bootstrap]}],
                "relabel_configs": [
                    {"source_labels": ["__address__"], "target_label": "__param_target"},
                    {"source_labels": ["__param_target"], "target_label": "instance"},
                    {"target_label": "__address__", "replacement": url.removeprefix("http://")}],
            }],
        }))
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}",
                                 "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        api = f"http://127.0.0.1:{prom_port}/api/v1"
        try:
            deadline = time.monotonic() + 60
            up: dict[str, float] = {}
            alerts: list[dict] = []
            while time.monotonic() < deadline:
                time.sleep(0.5)
                try:
                    result = json.loads(get(f"{api}/query?query=kprobe_endpoint_up")[1])["data"]["result"]
                    alerts = json.loads(get(f"{api}/alerts")[1])["data"]["alerts"]
                except (OSError, ValueError, KeyError):
                    continue  # Prometheus still starting
                up = {r["metric"]["node_id"]: float(r["value"][1]) for r in result}
                if len(up) == 3 and any(a["labels"]["alertname"] == "KafkaAdvertisedEndpointUnusable" for a in alerts):
                    break
        finally:
            prom.terminate()
            stderr = prom.communicate(timeout=30)[1]
    assert up == {"0": 1.0, "1": 1.0, "2": 0.0}, (up, stderr[-2000:])
    unusable = [a for a in alerts if a["labels"]["alertname"] == "KafkaAdvertisedEndpointUnusable"]
    assert [(a["labels"]["node_id"], a["labels"]["vantage"], a["labels"]["instance"], a["state"]) for a in unusable] \
        == [("2", "ci", bootstrap, "pending")]
    assert "broker 2 advertises" in unusable[0]["annotations"]["summary"].lower()


@needs_prometheus
def test_the_shipped_rules_pass_their_promtool_unit_tests():
    done = subprocess.run([PROMTOOL, "test", "rules", "kprobe-rules.test.yml"], cwd=DOCKER / "prometheus",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@needs_prometheus
def test_probe_exposition_parses_and_follows_prometheus_conventions(three_lab, tmp_path):
    with serving("--allow-target", "127.0.0.3*:*") as (url, _):
        started = time.monotonic()
        status, body, headers = get(f"{url}/probe?target={three_lab.bootstrap('CLIENT')}", timeout_header="10")
        elapsed = time.monotonic() - started
        own = get(f"{url}/metrics")[1]
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    found = families(body)
    assert found["kprobe_probe_success"].samples[0].value == 1  # type: ignore[attr-defined]
    assert {s.labels["phase"] for s in found["kprobe_probe_phase_duration_seconds"].samples} >= {  # type: ignore[attr-defined]
        "metadata", "connect", "identity"}
    assert len(found["kprobe_endpoint_up"].samples) == 3  # type: ignore[attr-defined]
    duration = found["kprobe_probe_duration_seconds"].samples[0].value  # type: ignore[attr-defined]
    assert elapsed < duration + 5  # no process start per scrape (bench/bench_serve.py measures the margin)
    for text in (body, own):
        path = tmp_path / "metrics.txt"
        path.write_text(text)
        with path.open() as stdin:
            check = subprocess.run([PROMTOOL, "check", "metrics"], stdin=stdin, capture_output=True, text=True,
                                   timeout=60, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
    counts = families(own)
    probes = {tuple(sorted(s.labels.items())): s.value for s in counts["kprobe_exporter_probes"].samples}  # type: ignore[attr-defined]
    assert probes == {(("module", "default"), ("outcome", "ok")): 1.0}


def test_bad_requests_each_get_their_answer_and_no_connection():
    """Each bad request is refused before anything is dialled: a relay at an allowed target and one outside the
    allowed globs count the connections they accept, and neither accepts any. (No broker: none is ever reached.)"""
    allowed = Relay(("127.0.0.35", 0), ("127.0.0.1", 9))
    broker = f"127.0.0.35:{allowed.port}"
    relay = Relay(("127.0.0.40", 0), ("127.0.0.1", 9))
    try:
        with serving("--allow-target", "127.0.0.3*:*") as (url, proc):
            outside = f"127.0.0.40:{relay.port}"
            cases = [
                (f"{url}/probe?target={outside}", 403, f"target {outside} is not allowed"),
                (f"{url}/probe?target={broker}&module=nope", 400, "unknown module 'nope': this exporter has default"),
                (f"{url}/probe", 400, "missing target"),
                (f"{url}/probe?target=not%20a%20host:x", 400, "bad"),
                (f"{url}/probe?target={broker}&debug=true", 400, "unknown parameter 'debug'"),
                (f"{url}/nothing-here", 404, "not found"),
            ]
            for request, status, says in cases:
                got, body, _ = get(request)
                assert got == status and says in body and body.count("\n") == 1, (request, got, body)
            assert get(f"{url}/probe?target={broker}", timeout_header="soon")[0] == 400
            assert get(f"{url}/probe?target={broker}", method="POST")[0] == 405
            healthy, says_healthy, headers = get(f"{url}/-/healthy")
            assert (healthy, says_healthy) == (200, "Healthy\n")
            assert headers["Server"] == f"kprobe-serve/{__version__}"
            rejected = families(get(f"{url}/metrics")[1])["kprobe_exporter_requests_rejected"]
            counted = {s.labels["reason"]: s.value for s in rejected.samples}  # type: ignore[attr-defined]
            assert counted == {"forbidden": 1.0, "bad_request": 5.0, "not_found": 1.0}
            assert proc.poll() is None
    finally:
        relay.close()
        allowed.close()
    assert relay.accepted == 0 and allowed.accepted == 0


def test_nothing_is_probed_until_targets_are_allowed():
    target = Relay(("127.0.0.35", 0), ("127.0.0.1", 9))  # counts what would reach a broker there
    try:
        with serving() as (url, proc):
            status, body, _ = get(f"{url}/probe?target=127.0.0.35:{target.port}")
            assert status == 403 and "no target is allowed yet: start kprobe serve with --allow-target" in body
    finally:
        target.close()
    assert "warning: no target is allowed" in proc.stderr.read()  # type: ignore[union-attr]
    assert target.accepted == 0


def test_probes_at_once_are_bounded_and_a_short_scrape_is_kept(three_lab):
    """100 scrapes at once against --max-concurrent 4: four probe, the rest are answered 503 at once; each probe of a
    listener with a blackholed broker ends inside its scrape's timeout; the server answers afterwards."""
    bootstrap = three_lab.real_endpoint("BLACKHOLED", 0)
    with serving("--allow-target", "127.0.0.3*:*", "--max-concurrent", "4") as (url, proc):
        started = time.monotonic()
        status, body, _ = get(f"{url}/probe?target={bootstrap}", timeout_header="1")
        assert status == 200 and time.monotonic() - started < 1.0 + 0.5
        assert families(body)["kprobe_probe_success"].samples[0].value == 0  # type: ignore[attr-defined]

        def scrape(_: int) -> int:
            return get(f"{url}/probe?target={bootstrap}", timeout_header="3")[0]

        with ThreadPoolExecutor(max_workers=100) as pool:
            statuses = list(pool.map(scrape, range(100)))
        ok, busy = statuses.count(200), statuses.count(503)
        assert ok + busy == 100 and 4 <= ok <= 8, statuses
        assert get(f"{url}/-/healthy")[0] == 200 and proc.poll() is None
        rejected = families(get(f"{url}/metrics")[1])["kprobe_exporter_requests_rejected"]
        assert {s.labels["reason"]: s.value for s in rejected.samples} == {"busy": float(busy)}  # type: ignore[attr-defined]


@pytest.mark.labs("sasl")
def test_modules_hold_the_secrets_and_none_leaks(sasl_lab, tmp_path):
    password = sasl_lab.passwords["alice"]
    secret_file = tmp_path / "password"
    secret_file.write_text(password + "\n")
    config = tmp_path / "kprobe.yml"
    config.write_text(yaml.safe_dump({
        "targets": [sasl_lab.bootstrap("SASL_PLAIN").rsplit(":", 1)[0] + ":*"],
        "modules": {
            "from_file": {"properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                         "sasl.username": "alice", "sasl.password": {"file": str(secret_file)}}},
            "from_env": {"properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                        "sasl.username": "alice", "sasl.password": {"env": "KAFKA_PASSWORD"}}},
            "wrong": {"properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                     "sasl.username": "alice", "sasl.password": {"env": "WRONG_PASSWORD"}}},
        }}))
    target = sasl_lab.bootstrap("SASL_PLAIN")
    with serving("--config", str(config), "-v", env={"KAFKA_PASSWORD": password,
                                                      "WRONG_PASSWORD": "not-" + password}) as (url, proc):
        outputs = []
        for module, success in (("from_file", 1), ("from_env", 1), ("wrong", 0)):
            status, body, _ = get(f"{url}/probe?target={target}&module={module}")
            assert status == 200
            assert families(body)["kprobe_probe_success"].samples[0].value == success, (module, body)  # type: ignore[attr-defined]
            outputs.append(body)
        outputs.append(get(f"{url}/metrics")[1])
        outputs.append(get(f"{url}/probe?target={target}&module={password}")[1])  # a secret typed into a URL
    log = proc.stderr.read()  # type: ignore[union-attr]
    assert "AUTH_FAILED" in outputs[2]
    for text in (*outputs[:-1], log):
        assert password not in text


@pytest.mark.parametrize(("config", "says"), [
    ("modules:\n  m:\n    properties:\n      sasl.password: hunter2\n",
     "modules.m.properties.sasl.password: a secret's value never sits in the config: give {file: PATH} or {env: NAME}"),
    ("modules:\n  m:\n    timout: 5s\n", "modules.m: unknown setting 'timout'"),
    ("modules:\n  m:\n    timeout: soon\n", "modules.m.timeout 'soon': give a duration"),
    ("modules:\n  m:\n    properties:\n      sasl.password: {env: KPROBE_TEST_UNSET_VARIABLE}\n",
     "sasl.password: environment variable KPROBE_TEST_UNSET_VARIABLE is not set"),
    ("modules:\n  m:\n    nameservers: [not-an-ip]\n", "modules.m: bad --nameserver 'not-an-ip'"),
    ("modules:\n  m:\n    roundtrip: canary\n    nameservers: [127.0.0.1]\n", "modules.m: "),
    ("targets: [kafka-1]\n", "target pattern 'kafka-1' has no port"),
    ("modules: [1, 2]\n", "modules: must map module names to their settings"),
    ("modules:\n  m: {\n", "not valid YAML at line"),
    ("bogus: 1\n", "unknown key 'bogus' at the top level"),
])
@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_a_bad_config_is_one_line_and_exit_2(tmp_path, config, says):
    path = tmp_path / "kprobe.yml"
    path.write_text(config)
    done = run_cli(["serve", "--listen", "127.0.0.1:0", "--config", str(path)])
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("kprobe: error: ") and says in line, line
    assert "hunter2" not in done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["--listen", "nowhere"], "bad --listen 'nowhere'"),
    (["--listen", "127.0.0.1:0", "--max-concurrent", "0"], "bad --max-concurrent 0"),
    (["--listen", "127.0.0.1:0", "--allow-target", "kafka"], "bad --allow-target 'kafka'"),
    (["--listen", "127.0.0.1:0", "--config", "/nonexistent/kprobe.yml"], "cannot read --config /nonexistent/kprobe.yml"),
])
@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_bad_options_are_one_line_and_exit_2(args, says):
    done = run_cli(["serve", *args])
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.timeout(30)  # a refusal that wrongly starts serving fails here, not at the suite's 300 s
def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = run_cli(["serve", "--listen", f"127.0.0.1:{port}"])
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr


@pytest.mark.labs("three-brokers")
def test_a_module_with_a_round_trip_is_a_canary(three_lab, tmp_path):
    topic = f"serve-canary-{uuid.uuid4().hex[:8]}"
    made = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", three_lab.bootstrap("CLIENT"), "--roundtrip",
                           topic, "--roundtrip-create"], capture_output=True, text=True, timeout=90, check=False)
    assert made.returncode == 0, made.stdout
    config = tmp_path / "kprobe.yml"
    config.write_text(yaml.safe_dump({"modules": {"canary": {"roundtrip": topic}}, "targets": ["127.0.0.3*:*"]}))
    with serving("--config", str(config)) as (url, _):
        status, body, _ = get(f"{url}/probe?target={three_lab.bootstrap('CLIENT')}&module=canary", timeout_header="10")
    found = families(body)
    assert status == 200
    assert found["kprobe_roundtrip_success"].samples[0].value == 1  # type: ignore[attr-defined]
    assert len(found["kprobe_roundtrip_partition_ok"].samples) == 3  # type: ignore[attr-defined]
    assert "roundtrip" in {s.labels["phase"] for s in found["kprobe_probe_phase_duration_seconds"].samples}  # type: ignore[attr-defined]


def _exposed_names() -> set[str]:
    """Every metric name kprobe can expose: the report's families and the exporter's own (with their suffixes)."""
    names = {"up"}
    source = (ROOT / "kprobe" / "output" / "prometheus.py").read_text()
    names |= set(re.findall(r'family\(\s*"(kprobe_[a-z_]+)"', source))
    tree = ast.parse((ROOT / "kprobe" / "serve" / "exporter.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Counter", "Gauge", "Histogram"):
            base = node.args[0].value  # type: ignore[attr-defined]
            kind = node.func.id  # type: ignore[attr-defined]
            names |= {f"{base}_total"} if kind == "Counter" else (
                {f"{base}_bucket", f"{base}_sum", f"{base}_count"} if kind == "Histogram" else {base})
    return names


def _queried(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords or label names."""
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return {w for w in words if w not in {"and", "or", "unless", "bool", "offset", "time"} and not w.isdigit()}


def test_every_metric_the_rules_and_dashboard_query_is_one_kprobe_exposes():
    exposed = _exposed_names()
    rules = yaml.safe_load((DOCKER / "prometheus" / "kprobe-rules.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads((DOCKER / "grafana" / "kprobe-dashboard.json").read_text())
    exprs += [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [v["definition"].split("(", 1)[1].split(",")[0] for v in dashboard["templating"]["list"]]
    unknown = {name for expr in exprs for name in _queried(expr)} - exposed
    assert not unknown, unknown
    assert {"kprobe_endpoint_usable", "kprobe_bootstrap_up", "kprobe_tls_not_after_timestamp_seconds",
            "kprobe_probe_phase_duration_seconds", "kprobe_exporter_probes_total"} <= {
        name for expr in exprs for name in _queried(expr)}
