"""Hostile brokers: kprobe never crashes, never hangs, never lets a broker write to the terminal."""

from __future__ import annotations

import json
import subprocess
import time

import jsonschema
import pytest
from cli_runner import run_cli_bytes
from hostile_broker import Broker, HostileBroker, Partition, Script, Topic
from measured_run import measured as measured_run

from kprobe.output import json_report

SCHEMA = json_report.schema()
TIMEOUT = 2.0


def run(broker: HostileBroker, *args: str, command: str = "probe") -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    done = run_cli_bytes([command, "-b", broker.address, "--timeout", str(TIMEOUT), "--deadline", "20", *args])
    return done, time.monotonic() - started


def sane(done: subprocess.CompletedProcess[bytes], elapsed: float, codes: set[int]) -> None:
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode in codes, (done.returncode, done.stderr[-500:])
    assert elapsed < 15, elapsed


def probe_both(script: Script, codes: set[int] = frozenset({0, 1})) -> tuple[dict, str]:
    with HostileBroker(script) as broker:
        done, elapsed = run(broker, "--json")
        sane(done, elapsed, codes)
        data = json.loads(done.stdout)
        jsonschema.validate(data, SCHEMA)
        text, elapsed = run(broker, "--no-color")
        sane(text, elapsed, codes)
    assert b"\x1b" not in text.stdout and b"\r" not in text.stdout
    return data, text.stdout.decode("utf-8")


def test_ansi_escapes_and_control_characters_are_escaped():
    evil = b"\x1b[2J\x1b[31mpwned\x1b[0m\r\nbroker 9 at fake:1"
    data, text = probe_both(Script(brokers=[Broker(0, evil, 9092)]))
    assert data["bootstraps"][0]["brokers"][0]["host"] == evil.decode()  # exact value, JSON-escaped
    assert "\\x1b[2J\\x1b[31mpwned\\x1b[0m\\x0d\\x0abroker 9 at fake:1" in text
    assert "\nbroker 9 at fake:1" not in text  # no forged line
    assert [f["code"] for f in data["findings"]] == ["INVALID_ADVERTISED_HOST"]


def test_non_utf8_host_is_kept_exactly_and_shown_escaped():
    data, text = probe_both(Script(brokers=[Broker(0, b"kafka-\xff\xfe", 9092)]))
    host = data["bootstraps"][0]["brokers"][0]["host"]
    assert host.encode("utf-8", "surrogateescape") == b"kafka-\xff\xfe"
    assert "kafka-\\xff\\xfe" in text
    assert [f["code"] for f in data["findings"]] == ["INVALID_ADVERTISED_HOST"]


def test_very_long_and_empty_hosts():
    data, text = probe_both(Script(brokers=[Broker(0, b"a" * 300, 9092), Broker(1, b"", 9092)]))
    assert {(f["code"], f["node_id"]) for f in data["findings"]} == {
        ("INVALID_ADVERTISED_HOST", 0), ("INVALID_ADVERTISED_HOST", 1)
    }
    assert "(300 chars)" in text
    assert len(data["endpoints"][0]["host"]) == 300


@pytest.mark.parametrize("port", [0, -1, 65536, 2**31 - 1])
def test_impossible_ports(port):
    data, _ = probe_both(Script(brokers=[Broker(0, b"127.0.0.1", port)]))
    assert [f["code"] for f in data["findings"]] == ["INVALID_ADVERTISED_PORT"]
    assert data["endpoints"][0]["tcp"] == []


def test_duplicate_node_ids():
    data, _ = probe_both(Script(brokers=[Broker(0, b"127.0.3.1", 9), Broker(0, b"127.0.3.2", 9)]))
    assert "DUPLICATE_NODE_ID" in {f["code"] for f in data["findings"]}


def test_partitions_naming_unknown_brokers_are_shown():
    script = Script(brokers=[Broker(0, b"127.0.3.1", 9)],
                    topics=[Topic(b"orders", [Partition(0, 7, [7, 0], [7]), Partition(1, -1, [0], [])])])
    with HostileBroker(script) as broker:
        done, elapsed = run(broker, "--no-reachability", command="list")
    sane(done, elapsed, {1})
    text = done.stdout.decode()
    assert "    partition 0, leader 7, replicas: 7,0, isrs: 7" in text
    assert "partitions led by a broker missing from the broker list: orders/0 (leader 7)" in text
    assert "partitions offline (no leader): orders/1" in text
    with HostileBroker(script) as broker:
        done, elapsed = run(broker, "--no-reachability", "-J", command="list")
    sane(done, elapsed, {1})
    data = json.loads(done.stdout)
    # JSON keeps what the broker said, unknown ids included, beside the broker list that lacks them.
    assert [b["id"] for b in data["brokers"]] == [0]
    orders = data["topics"][0]["partitions"]
    assert orders[0]["leader"] == 7 and [r["id"] for r in orders[0]["replicas"]] == [7, 0]
    assert orders[0]["leader_known"] is False and data["summary"]["unknown_leader_partitions"] == 1
    assert [r["id"] for r in orders[0]["isrs"]] == [7]
    assert orders[1]["leader"] == -1
    assert data["summary"]["status"] == "gap"
    assert data["summary"]["offline_partitions"] == 1 and data["summary"]["under_replicated_partitions"] == 1


BROKEN = {
    # mode: (bootstrap status, what the error must say)
    "truncate": ("error", "truncated response"),
    "close_mid": ("error", "connection closed by the broker before a full response"),
    "slowloris": ("timeout", "timed out waiting for the response"),
    "huge_size": ("error", "response size 2147483647 is not plausible"),
    "garbage": ("error", "a required array is null"),
}


@pytest.mark.parametrize("mode", list(BROKEN))
def test_broken_responses_fail_the_bootstrap_cleanly(mode):
    """Each way a response can break is named as what happened, in JSON and in the text."""
    status, said = BROKEN[mode]
    script = Script(brokers=[Broker(0, b"127.0.3.1", 9)], mode=mode)
    with HostileBroker(script) as broker:
        done, elapsed = run(broker, "--json")
        text, text_elapsed = run(broker, "--no-color")
    sane(done, elapsed, {3})
    sane(text, text_elapsed, {3})
    data = json.loads(done.stdout)
    jsonschema.validate(data, SCHEMA)
    [bootstrap] = data["bootstraps"]
    assert bootstrap["status"] == status, bootstrap
    assert said in bootstrap["error"], bootstrap
    assert data["findings"][0]["code"] == "BOOTSTRAP_UNREACHABLE"
    assert elapsed < TIMEOUT + 5 and text_elapsed < TIMEOUT + 5
    shown = text.stdout.decode("utf-8")
    assert f"Bootstrap {broker.address}: {status}: {said}" in shown, shown
    assert "\x1b" not in shown and "Traceback" not in shown and shown.startswith("Bootstrap ")


def test_truncated_and_closed_mid_response_are_different_faults():
    """`truncate` sends a whole frame with a short body; `close_mid` drops the connection.

    Were they the same bytes on the wire, the two tests above would test one thing twice.
    """
    errors = {}
    for mode in ("truncate", "close_mid"):
        with HostileBroker(Script(brokers=[Broker(0, b"127.0.3.1", 9)], mode=mode)) as broker:
            done, elapsed = run(broker, "--json")
        sane(done, elapsed, {3})
        errors[mode] = json.loads(done.stdout)["bootstraps"][0]["error"]
    assert "closed" not in errors["truncate"] and "truncated" not in errors["close_mid"], errors


def test_an_identity_check_cut_by_the_deadline_is_unchecked_not_silent():
    """A broker trickling its Metadata answer: silent when its own timeout passes, but when the
    run's deadline comes first nothing is proven about it (once, only the message told them apart,
    and a deadline inside a response wait was taken for silence)."""
    from kprobe.kafka.security import Security
    from kprobe.models import Endpoint
    from kprobe.probe.identity import check_identity

    with HostileBroker(Script(brokers=[Broker(0, b"127.0.0.1", 9)], mode="slowloris")) as broker:
        endpoint = Endpoint(node_id=0, host=broker.host, port=broker.port, advertised_by=(broker.address,))
        started = time.monotonic()
        cut = check_identity(endpoint, broker.host, Security(), timeout=5, deadline=time.monotonic() + 1)
        cut_after = time.monotonic() - started
        slow = check_identity(endpoint, broker.host, Security(), timeout=1, deadline=time.monotonic() + 5)
    assert cut.status == "unchecked" and "deadline" in (cut.detail or ""), cut
    assert cut_after < 2
    assert slow.status == "silent" and "timed out waiting for the response" in (slow.detail or ""), slow


def measured(command: str, address: str, *args: str) -> dict:
    """Run kprobe against `address` in a child of its own (tests/support/measured_run.py): its exit, peak RSS and CPU, output.

    Its time is bounded as the CPU it used; the wall clock (`s`) is printed only.
    """
    started = time.monotonic()
    done, cpu, mib = measured_run(command, "-b", address, *args, timeout=120)
    return {"rc": done.returncode, "rss_mb": mib, "s": time.monotonic() - started, "cpu": cpu,
            "out": json.loads(done.stdout), "tb": "Traceback" in done.stderr}


@pytest.mark.parametrize("identity", [False, True], ids=["no-identity", "identity"])
def test_ten_thousand_brokers_in_bounded_memory_and_time(identity):
    """Identity on (the default) adds a Kafka conversation per endpoint that connects.

    The 10,000 endpoints are 127.0.x.y port 9, where nothing listens: every connect is
    refused, so identity has nothing to check and the two runs should cost the same. Both
    are measured so a change that makes identity eager (or leaky) shows here.
    """
    brokers = [Broker(i, f"127.0.{3 + i // 250}.{1 + i % 250}".encode(), 9) for i in range(10_000)]
    flags = () if identity else ("--no-identity",)
    with HostileBroker(Script(brokers=brokers)) as broker:
        result = measured("probe", broker.address, "--json", "--timeout", "2", *flags)
    print(f"10,000 brokers, identity {identity}: {result['s']:.1f} s ({result['cpu']:.1f} s of CPU), "
          f"peak RSS {result['rss_mb']:.0f} MB")
    assert result["rc"] == 1 and not result["tb"]
    assert result["out"]["summary"]["endpoints"] == 10_000
    assert result["rss_mb"] < 200
    assert result["cpu"] < 30


def test_hundred_thousand_partitions_in_bounded_memory_and_time():
    topics = [Topic(f"t{t}".encode(), [Partition(p, 0, [0], [0]) for p in range(1000)]) for t in range(100)]
    with HostileBroker(Script(brokers=[Broker(0, b"127.0.3.1", 9)], topics=topics)) as broker:
        result = measured("list", broker.address, "-J", "--timeout", "5")
    print(f"100,000 partitions: {result['s']:.1f} s ({result['cpu']:.1f} s of CPU), peak RSS {result['rss_mb']:.0f} MB")
    assert result["rc"] == 0 and not result["tb"]
    assert result["out"]["summary"]["partitions"] == 100_000
    assert result["rss_mb"] < 300
    assert result["cpu"] < 30
