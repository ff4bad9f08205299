"""The native lab: real Kafka 4.x brokers on loopback, real DNS views."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid

import dns.resolver
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kprobe.errors import LabError
from kprobe.kafka.exchanges import fetch_and_identify
from kprobe.lab import jars
from kprobe.lab.helpers import HelperCommand, HelperProcess, listening_socket, running_helpers
from kprobe.lab.native import NativeLab
from kprobe.lab.native import running_jvms as lab_jvms
from kprobe.lab.scenarios import SCENARIOS, get_scenario
from kprobe.paths import cache_root


def _split(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def test_listeners_each_port_advertises_its_own_endpoint(listeners_lab):
    fred = listeners_lab.listener("LISTENER_FRED").port
    bob = listeners_lab.listener("LISTENER_BOB").port
    alice = listeners_lab.listener("LISTENER_ALICE").port
    expected = {
        "LISTENER_FRED": ("localhost", fred),
        "LISTENER_BOB": ("kafka0", bob),
        "LISTENER_ALICE": ("never-gonna-give-you-up", alice),
    }
    for listener, (host, port) in expected.items():
        ip, real_port = _split(listeners_lab.real_endpoint(listener))
        meta = fetch_and_identify(ip, real_port, timeout=5, identity=False)[0]
        assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(0, host, port)], listener
        assert meta.cluster_id == listeners_lab.cluster_id
        assert meta.controller_id == 0


def test_confluent_kafka_list_topics_through_fred(listeners_lab):
    """librdkafka, the clients' own library, sees what the lab advertises through FRED.

    Only FRED here: through BOB and ALICE librdkafka >= 2.10 drops the bootstrap connection once
    it learns the unreachable advertised name (design notes, section 7), so kprobe's wire client
    is what answers for those (test above) - and librdkafka would send DNS queries off this host.
    """
    bootstrap = listeners_lab.bootstrap("LISTENER_FRED")
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kprobe-test"})
    md = admin.list_topics(timeout=15)
    _host, port = _split(bootstrap)
    assert {(b.id, b.host, b.port) for b in md.brokers.values()} == {(0, "localhost", port)}
    assert md.orig_broker_name in (f"{bootstrap}/bootstrap", f"{bootstrap}/0")
    assert md.cluster_id == listeners_lab.cluster_id


def test_dns_views_answer_per_network(listeners_lab):
    def ask(view: str, name: str) -> list[str]:
        ip, port = _split(listeners_lab.nameserver(view))
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [ip]
        resolver.nameserver_ports = {ip: port}
        resolver.lifetime = 2
        return [r.to_text() for r in resolver.resolve(name, "A")]

    assert ask("docker", "kafka0") == ["127.0.0.11"]
    with pytest.raises(dns.resolver.NXDOMAIN):
        ask("host", "kafka0")
    with pytest.raises(dns.resolver.NXDOMAIN):
        ask("docker", "never-gonna-give-you-up")


def test_three_brokers_each_on_its_own_address_and_rf3_topic(three_lab):
    ip, port = _split(three_lab.real_endpoint("CLIENT", 0))
    meta = fetch_and_identify(ip, port, timeout=5, identity=False)[0]
    assert sorted((b.node_id, b.host) for b in meta.brokers) == [
        (0, "127.0.0.31"), (1, "127.0.0.32"), (2, "127.0.0.33")
    ]
    admin = AdminClient({"bootstrap.servers": three_lab.bootstrap_all("CLIENT")})
    futures = admin.create_topics([NewTopic("lab-rf3", num_partitions=3, replication_factor=3)])
    futures["lab-rf3"].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        topic = admin.list_topics(topic="lab-rf3", timeout=10).topics["lab-rf3"]
        if topic.error is None and len(topic.partitions) == 3 and all(
            len(p.isrs) == 3 for p in topic.partitions.values()
        ):
            break
        assert time.monotonic() < deadline, f"topic not fully replicated: {topic.partitions}"
        time.sleep(0.5)
    assert all(sorted(p.replicas) == [0, 1, 2] for p in topic.partitions.values())


def test_brokers_map_their_classes_from_the_archive_the_first_format_left(three_lab):
    """The lab's class-data archive (AppCDS): written by a `kafka-storage format` as it exited, named for this JDK
    and these jars, given to every format and to the brokers until they have their own (written by one broker as
    its lab stops: test_teardown_leaves_no_jvm_and_no_port); and usable: with -Xshare:on a JVM refuses to start on
    an archive it cannot map, and here it loads a thousand classes and more (Scala's, Kafka's) from it."""
    from kprobe.lab.native import JVM_OPTS, broker_archive, class_archive

    archive = three_lab.archive
    assert archive == class_archive(three_lab.java, three_lab.classpath) and archive.is_file()
    assert three_lab.broker_archive == broker_archive(three_lab.java, three_lab.classpath)
    shared = {n: [a for a in proc.args if a.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="))]
              for n, proc in three_lab.processes.items()}
    if three_lab._dump is None:  # the brokers' own archive was there when the lab started
        assert shared == {n: [f"-XX:SharedArchiveFile={three_lab.broker_archive}"] for n in shared}
    else:  # one broker writes it when the lab stops, on the JDK's base archive; the others map the format's
        writer, written = three_lab._dump
        assert shared == {n: [f"-XX:ArchiveClassesAtExit={written}"] if n == writer else
                          [f"-XX:SharedArchiveFile={archive}"] for n in shared}
    done = subprocess.run([three_lab.java, *JVM_OPTS, f"-XX:SharedArchiveFile={archive}", "-Xshare:on",
                           "-Xlog:class+load=info", "-cp", three_lab.classpath, "kafka.tools.StorageTool", "version"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    top = [line for line in done.stdout.splitlines() if "source: shared objects file (top)" in line]
    kafka = [line for line in done.stdout.splitlines() if " kafka." in line or " org.apache.kafka." in line]
    assert len(top) > 1000 and len([line for line in kafka if line in top]) > 0.9 * len(kafka), (len(top), len(kafka))


def test_state_and_description_name_only_the_brokers_that_have_a_listener(three_lab):
    # `kprobe lab up three-brokers` once died here: PARTIAL exists on brokers 0 and 1 only.
    state = three_lab.to_state()
    assert state["bootstraps"]["PARTIAL"] == ",".join(three_lab.bootstrap("PARTIAL", n) for n in (0, 1))
    assert state["bootstraps"]["CLIENT"].count(",") == 2
    assert sum("PARTIAL" in line for line in three_lab.describe()) == 2


def test_blackholed_listener_advertises_a_dead_endpoint(three_lab):
    hole = three_lab.blackholes["bh2"]
    ip, port = _split(three_lab.real_endpoint("BLACKHOLED", 0))
    meta = fetch_and_identify(ip, port, timeout=5, identity=False)[0]
    by_id = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
    assert by_id[2] == hole.endpoint
    probe = socket.socket()
    probe.settimeout(0.5)
    started = time.monotonic()
    with pytest.raises(OSError):
        probe.connect((hole.host, hole.port))
    assert time.monotonic() - started >= 0.45
    probe.close()


@pytest.mark.lab  # starts and stops a lab of its own
def test_teardown_leaves_no_jvm_and_no_port(tmp_path, monkeypatch):
    """Killed, all of it; but the broker writing the brokers' class-data archive (none here: a path of
    this test's own) is shut down first and leaves it whole, an archive of the broker's own classes."""
    from kprobe.lab import native

    archive, template = tmp_path / "broker.jsa", tmp_path / "bootstrap.checkpoint"
    monkeypatch.setattr(native, "broker_archive", lambda java, classpath: archive)
    monkeypatch.setattr(native, "storage_template", lambda java, classpath: template)
    # The dump's time is the machine's (seconds alone, more beside a loaded suite): this test is about what the
    # stop leaves, so it waits for the dump as long as a hang would take.
    monkeypatch.setattr(native, "ARCHIVE_WAIT_S", 60.0)
    lab = NativeLab(get_scenario("listeners")).start()
    # The node was formatted by `kafka-storage format` (no template yet), which left its file as the template;
    # a node written from it later has what format wrote, with a directory of its own.
    data = lab.node_dir(0) / "data"
    assert template.read_bytes() == (data / "bootstrap.checkpoint").read_bytes()
    native.write_storage(tmp_path / "copy", template, 0, lab.cluster_id)
    formatted, copied = (dict(line.split("=", 1) for line in (folder / "meta.properties").read_text().splitlines()
                              if not line.startswith("#")) for folder in (data, tmp_path / "copy"))
    assert formatted.pop("directory.id") != copied.pop("directory.id") and formatted == copied
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["bootstrap.checkpoint", "meta.properties"]
    shutil.rmtree(tmp_path / "copy")
    template.unlink()
    assert lab._dump is not None and f"-XX:ArchiveClassesAtExit={lab._dump[1]}" in lab.processes[0].args
    node = lab.nodes[0]
    ports = [(rl.bind_ip, rl.port) for rl in node.listeners.values()]
    ports.append((node.spec.address, node.controller_port))  # the KRaft controller listener too
    dns = [server.address for server in lab.dns.values()]
    assert lab_jvms(lab.lab_id), "the lab's JVM should be visible to pgrep while it runs"
    for ip, port in ports:
        socket.create_connection((ip, port), timeout=5).close()  # each one really listened
    lab.stop()
    lab.stop()  # idempotent
    assert lab_jvms(lab.lab_id) == []
    for ip, port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((ip, port), timeout=2).close()
    for ip, port in dns:  # the DNS views' TCP side is closed as well
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((ip, port), timeout=2).close()
    assert not lab.workdir.exists()
    # The archive, whole and in place, and what the next lab's brokers map; it holds what a broker loads
    # and `kafka-storage format` does not (the network layer, raft), which is what it is for.
    assert [p.name for p in tmp_path.iterdir()] == ["broker.jsa"]
    assert f"-XX:SharedArchiveFile={archive}" in lab._java_cmd(0, ["kafka.Kafka", "server.properties"])
    listed = {}
    for name in (archive, lab.archive):
        done = subprocess.run([lab.java, f"-XX:SharedArchiveFile={name}", "-Xshare:on", "-XX:+PrintSharedArchiveAndExit",
                               "-cp", lab.classpath, "kafka.Kafka"], capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0 and "archive is valid" in done.stdout, done.stdout[-2000:]
        listed[name] = done.stdout
    for broker_only in (" org.apache.kafka.raft.KafkaRaftClient ", " kafka.network.SocketServer "):
        assert broker_only in listed[archive] and broker_only not in listed[lab.archive]


def test_jars_are_cached_for_offline_starts(tmp_path, monkeypatch):
    cp = jars.kafka_classpath()
    root = cache_root() / f"kafka-{jars.KAFKA_VERSION}"
    assert (root / ".complete").exists()
    assert cp.endswith("*") and any((root / "libs").glob("kafka_2.13-*.jar"))
    # The second start needs no Maven at all: a PATH with java only still gets the classpath.

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").symlink_to(shutil.which("java"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert shutil.which("mvn") is None
    assert jars.kafka_classpath() == cp  # no Maven, so nothing was resolved again


def test_every_scenario_renders_with_an_inter_broker_listener():
    for scenario in SCENARIOS.values():
        for node in scenario.nodes:
            # A controller-only node (process.roles=controller) has its CONTROLLER listener only.
            wanted = 1 if node.is_broker else 0
            assert sum(1 for lst in node.listeners if lst.inter_broker) == wanted, scenario.name


def test_failed_start_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setenv("KPROBE_KAFKA_LIBS", str(tmp_path))
    lab = NativeLab(get_scenario("listeners"))
    with pytest.raises(Exception, match=r"no kafka_2\.13 jar"):
        lab.start()
    assert lab_jvms(lab.lab_id) == []


@pytest.mark.lab  # `kprobe lab up` starts brokers
# One unit with the namespace labs' tests: a bare `kprobe lab down` stops every detached lab of the machine,
# a namespace lab another worker holds included.
@pytest.mark.serial("netns-lab")
def test_lab_cli_up_detach_and_down(tmp_path):
    """Two scenarios detached side by side (the second is not refused), each stopped by name or all at once;
    `lab up` prints the exact -n of each view."""
    import os
    import re

    env = {**os.environ, "KPROBE_LAB_STATE": str(tmp_path / "labs")}

    def lab(*args: str, timeout: float = 180) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "kprobe", "lab", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def done(proc: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    try:
        starting = [lab("up", "listeners", "--detach"), lab("up", "collector", "--detach")]  # at once: both start
        (code, up, err), (code2, collector, err2) = (done(p) for p in starting)
        assert (code, code2) == (0, 0), err + err2
        assert "LISTENER_FRED" in up and "DNS view docker" in up
        lines = up.splitlines()
        for view, bootstrap_of in (("docker", "LISTENER_BOB"), ("host", "LISTENER_FRED")):
            nameserver = re.search(rf"^DNS view {view} +nameserver (\S+)", up, re.M).group(1)  # type: ignore[union-attr]
            bootstrap = next(ln for ln in lines if ln.startswith(f"  {bootstrap_of} ")).split("bootstrap")[1].split()[0]
            assert (f"  as a host on the {view} network: -n {nameserver} (--nameserver); without -n, this machine's "
                    "resolver is asked instead. Each listener from here:") in lines
            assert f"    {bootstrap_of}: kprobe probe -b {bootstrap} -n {nameserver}" in lines
        line = next(ln for ln in lines if ln.startswith("  LISTENER_FRED "))
        host, port = _split(line.split("bootstrap")[1].split()[0])
        socket.create_connection((host, port), timeout=5).close()
        topic_line = next(ln for ln in collector.splitlines() if ln.startswith("topic "))
        assert re.fullmatch(r"topic kprobe-reports \(6 partitions, replication factor 1\), made at start: publish "
                            r"with --publish 127\.0\.0\.71:\d+/kprobe-reports", topic_line)
        assert sorted(p.name for p in (tmp_path / "labs").glob("*.json")) == ["collector.json", "listeners.json"]
        again = done(lab("up", "collector", "--detach"), timeout=30)
        assert again[0] == 2 and re.fullmatch(r"kprobe: error: lab collector is already running \(pid \d+\): stop it "
                                              r"with `kprobe lab down collector`, or use it as it is\n", again[2])

        assert done(lab("down", "collector"), timeout=60)[:2] == (0, "stopped lab collector\n")
        socket.create_connection((host, port), timeout=5).close()  # listeners runs on
        assert done(lab("down"), timeout=60)[:2] == (0, "stopped lab listeners\n")
        time.sleep(0.5)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, port), timeout=2).close()
        assert list((tmp_path / "labs").glob("*.json")) == []
        assert done(lab("down"), timeout=30)[:2] == (0, "no detached lab is running\n")
        assert done(lab("down", "nosuch"), timeout=30)[0] == 2
    finally:
        done(lab("down"), timeout=60)  # nothing left running, whatever failed above


# -- helper processes (the SNI proxy's machinery, kprobe/lab/helpers.py) -------------------------

# This process's own: a helper test on another xdist worker must not see these helpers as its own.
HELPER_LAB = f"helper{uuid.uuid4().hex[:6]}"


def _helper(tmp_path, program: str, args: tuple[str, ...], config: str = "", listens=()) -> HelperProcess:
    return HelperProcess(HelperCommand(name="probe-helper", program=program, package="some-package", args=args,
                                       config=config, listens=tuple(listens)), tmp_path, lab_id=HELPER_LAB)


def test_helper_missing_binary_names_the_package(tmp_path, monkeypatch):
    import kprobe.lab.helpers

    looked: list[object] = []
    monkeypatch.setattr(kprobe.lab.helpers.shutil, "which", lambda *a, **k: looked.append((a, k)))  # finds nothing
    helper = HelperProcess(HelperCommand(name="sni-proxy-ingress", program="haproxy", package="haproxy",
                                         args=("-f", "{config}"), config="", listens=()), tmp_path, HELPER_LAB)
    with pytest.raises(LabError, match=r"needs the haproxy command.*apt-get install haproxy"):
        helper.start()
    assert looked == [(("haproxy",), {}), (("haproxy",), {"path": "/usr/local/sbin:/usr/sbin:/sbin"})]
    assert not helper.config_path.exists()  # nothing started, nothing written


def test_helper_start_is_bounded_and_leaves_nothing(tmp_path):
    """A helper that never listens is stopped after the timeout, with its config named; nothing is left running."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connects to it are refused
        port = sock.getsockname()[1]
        helper = _helper(tmp_path, sys.executable, ("-c", "import time; time.sleep(60)", "{config}"),
                         listens=[("127.0.0.1", port)])
        started = time.monotonic()
        with pytest.raises(LabError, match=rf"not ready within 1s \(waiting for 127\.0\.0\.1:{port} to accept"):
            helper.start(timeout=1.0)
    assert time.monotonic() - started < 8
    assert helper.proc is not None and helper.proc.poll() is not None
    assert running_helpers(HELPER_LAB) == []


def test_helper_that_exits_at_start_says_why(tmp_path):
    """HAProxy with a config it refuses: the error carries its own alert, not a timeout."""
    helper = _helper(tmp_path, "haproxy", ("-f", "{config}", "-db"), config="frontend broken\n    bind 127.0.0.1:notaport\n",
                     listens=[("127.0.0.1", 1)])
    with pytest.raises(LabError, match=r"exited with \d+ at start: .*ALERT"):
        helper.start(timeout=10.0)
    assert running_helpers(HELPER_LAB) == []


def test_helper_runs_until_stopped(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = f"import socket, time; s = socket.create_server(('127.0.0.1', {port})); time.sleep(60)"
    helper = _helper(tmp_path, sys.executable, ("-c", server, "{config}"), listens=[("127.0.0.1", port)]).start()
    assert running_helpers(HELPER_LAB) == [helper.pid]
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    helper.stop()
    helper.stop()  # idempotent
    assert helper.pid is None and running_helpers(HELPER_LAB) == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_listening_socket_prefers_the_given_port_holds_it_and_moves_off_a_taken_one():
    with listening_socket("127.0.0.1") as first:
        port = first.getsockname()[1]
        with socket.socket() as rival, pytest.raises(OSError):
            rival.bind(("127.0.0.1", port))  # held from the moment it is chosen: nobody else gets it
        with listening_socket("127.0.0.1", port) as moved:
            assert moved.getsockname()[1] not in (port, 0)
        with listening_socket("127.0.0.2", port) as same:
            assert same.getsockname()[1] == port  # free on another address
