"""Real Kafka clients (Apache Kafka's Java client and librdkafka) run from a vantage the test controls.

Each client produces one record to every partition of a topic and reads them back, as a user's
application would, so a test can say "this client works here" and not "kprobe thinks so". Both run
as child processes inside a command prefix (tests/support/system_network.py's private mount namespace, or a
hosts file and gai.conf of the test's own), so their system resolver sees the test's names. Every
wait is bounded by a budget the caller gives, in the clients' own settings and in the process timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kprobe.lab.native import class_archive
from kprobe.paths import cache_root, put_archive

JAVA_CLIENT = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class RoundTrip {
    static String quote(Throwable e) {
        Throwable c = e.getCause() != null ? e.getCause() : e;
        return "\"" + c.getClass().getSimpleName() + ": " + String.valueOf(c.getMessage()).replace("\\", "/")
            .replace("\"", "'").replace("\n", " ") + "\"";
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        int partitions = Integer.parseInt(a[2]);
        int budget = Integer.parseInt(a[3]);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        for (int i = 4; i < a.length; i++) {
            if (a[i].startsWith("@")) {  // a client.properties, loaded as an application loads it
                try (java.io.InputStream r = new java.io.FileInputStream(a[i].substring(1))) {  // Latin-1, as Kafka's tools
                    Properties file = new Properties();
                    file.load(r);
                    common.putAll(file);
                }
                continue;
            }
            String[] kv = a[i].split("=", 2);
            common.put(kv[0], kv[1]);
        }
        String marker = UUID.randomUUID().toString();
        long t0 = System.nanoTime();
        System.err.println("stage start");
        Properties pp = (Properties) common.clone();
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.putIfAbsent("delivery.timeout.ms", String.valueOf(budget));
        pp.putIfAbsent("request.timeout.ms", String.valueOf(budget));
        pp.putIfAbsent("max.block.ms", String.valueOf(budget));
        pp.put("linger.ms", "0");
        // Every partition at once, each judged on its own: which ones fail is what the caller compares.
        Map<Integer, Long> offsets = new TreeMap<>();
        String firstError = null;
        // Closed with a bound, never by try-with-resources: close() without one waits for every pending record.
        KafkaProducer<String, String> producer = null;
        try {
            producer = new KafkaProducer<>(pp);
            Map<Integer, Future<RecordMetadata>> sent = new TreeMap<>();
            System.err.println("stage send " + (System.nanoTime() - t0) / 1000000);
            for (int p = 0; p < partitions; p++) {
                try {
                    sent.put(p, producer.send(new ProducerRecord<>(topic, p, marker, marker)));
                } catch (Exception e) {
                    if (firstError == null) firstError = quote(e);
                }
            }
            System.err.println("stage acks " + (System.nanoTime() - t0) / 1000000);
            // Bounded: a producer whose sender is stuck connecting (a SYN answered from another address, reset)
            // was seen to keep a record well past delivery.timeout.ms; for the caller it is lost either way.
            long acksBy = System.currentTimeMillis() + budget + 2000;
            for (Map.Entry<Integer, Future<RecordMetadata>> f : sent.entrySet()) {
                try {
                    long left = Math.max(0, acksBy - System.currentTimeMillis());
                    offsets.put(f.getKey(), f.getValue().get(left, java.util.concurrent.TimeUnit.MILLISECONDS).offset());
                } catch (java.util.concurrent.TimeoutException e) {
                    if (firstError == null) firstError = "\"no acknowledgement within delivery.timeout.ms + 2 s\"";
                } catch (Exception e) {
                    if (firstError == null) firstError = quote(e);
                }
            }
        } catch (Exception e) {
            if (firstError == null) firstError = quote(e);
        } finally {
            System.err.println("stage close producer " + (System.nanoTime() - t0) / 1000000);
            if (producer != null) producer.close(Duration.ofMillis(500));
        }
        if (offsets.isEmpty()) {
            System.out.println("{\"ok\": false, \"step\": \"produce\", \"ok_partitions\": [], \"error\": "
                + firstError + "}");
            return;
        }
        long produced = System.nanoTime();
        Properties cp = (Properties) common.clone();
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.putIfAbsent("default.api.timeout.ms", String.valueOf(budget));
        cp.putIfAbsent("request.timeout.ms", String.valueOf(budget));
        Set<Integer> seen = new TreeSet<>();
        KafkaConsumer<String, String> consumer = null;
        try {
            System.err.println("stage consume " + (System.nanoTime() - t0) / 1000000);
            consumer = new KafkaConsumer<>(cp);
            List<TopicPartition> tps = new ArrayList<>();
            for (int p : offsets.keySet()) tps.add(new TopicPartition(topic, p));
            consumer.assign(tps);
            for (TopicPartition tp : tps) consumer.seek(tp, offsets.get(tp.partition()));
            long end = System.currentTimeMillis() + budget;
            while (seen.size() < tps.size() && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (marker.equals(r.value())) seen.add(r.partition());
                }
            }
        } catch (Exception e) {
            if (firstError == null) firstError = quote(e);
        } finally {
            System.err.println("stage close consumer " + (System.nanoTime() - t0) / 1000000);
            if (consumer != null) consumer.close(Duration.ofMillis(500));
        }
        System.err.println("stage done " + (System.nanoTime() - t0) / 1000000);
        long done = System.nanoTime();
        System.out.println("{\"ok\": " + (seen.size() == partitions) + ", \"step\": \""
            + (offsets.size() < partitions ? "produce" : "consume") + "\", \"consumed\": " + seen.size()
            + ", \"ok_partitions\": " + seen + ", \"error\": " + (firstError == null ? "\"\"" : firstError)
            + ", \"produce_s\": " + (produced - t0) / 1e9 + ", \"total_s\": " + (done - t0) / 1e9 + "}");
    }
}
"""

# librdkafka through confluent-kafka, in a child process so the namespace's resolver applies to it.
LIBRDKAFKA_CLIENT = r"""
import json, logging, sys, time, uuid
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, partitions, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
extra = dict(arg.split("=", 1) for arg in sys.argv[5:])
lines = []

class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())

log = logging.getLogger("rdkafka")
log.addHandler(Keep())
log.setLevel(logging.DEBUG)
common = {"bootstrap.servers": bootstrap, "logger": log, "socket.timeout.ms": budget, **extra}
marker = uuid.uuid4().hex
t0 = time.monotonic()
producer = Producer({**common, "message.timeout.ms": budget, "linger.ms": 0})
results = {}
for p in range(partitions):
    producer.produce(topic, value=marker, partition=p,
                     on_delivery=lambda err, msg: results.__setitem__(msg.partition(), (err, msg.offset())))
producer.flush(budget / 1000 + 5)
failed = [str(err) for err, _ in results.values() if err is not None]
delivered = {p: offset for p, (err, offset) in results.items() if err is None}
if not delivered:
    print(json.dumps({"ok": False, "step": "produce", "ok_partitions": [],
                      "error": (failed or ["no delivery report"])[0],
                      "log": [l for l in lines if "Connect to" in l or "failed" in l][:5]}))
    sys.exit(0)
produced = time.monotonic()
consumer = Consumer({**common, "group.id": "kprobe-" + marker, "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, p, offset) for p, offset in delivered.items()])
seen, end = set(), time.monotonic() + budget / 1000
while len(seen) < len(delivered) and time.monotonic() < end:
    msg = consumer.poll(0.2)
    if msg is not None and msg.error() is None and msg.value() == marker.encode():
        seen.add(msg.partition())
consumer.close()
print(json.dumps({"ok": len(seen) == partitions, "step": "produce" if failed else "consume", "consumed": len(seen),
                  "ok_partitions": sorted(seen), "error": (failed or [""])[0],
                  "produce_s": produced - t0, "total_s": time.monotonic() - t0,
                  "log": [l for l in lines if "Connect to" in l][:5]}))
"""


@dataclass(frozen=True)
class Outcome:
    """What one client run did: worked end to end, or where it stopped and why."""

    client: str
    ok: bool
    step: str
    seconds: float
    produce_seconds: float = 0.0
    error: str = ""
    log: tuple[str, ...] = ()
    # The partitions whose record came back: which ones failed is what a verdict is held to.
    ok_partitions: tuple[int, ...] = ()


def java_round_trip(prefix: Sequence[str], classpath: str, workdir: Path, bootstrap: str, topic: str,
                    partitions: int, *, budget_ms: int, props: Mapping[str, str] | None = None,
                    jvm: Sequence[str] = (), properties_file: Path | None = None) -> Outcome:
    """The Java client produces to and consumes from every partition; `jvm` are `-D` options.

    `properties_file`: a client.properties the client loads with java.util.Properties before `props`.
    """
    jar = compiled_java_client(classpath, workdir)
    args = [f"@{properties_file}"] if properties_file is not None else []
    args += [f"{k}={v}" for k, v in dict(props or {}).items()]
    full = f"{classpath}{os.pathsep}{jar}"
    archive, dump = _class_archive(full)
    cmd = [*prefix, "java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1",
           *archive, *jvm, "-cp", full, "RoundTrip", bootstrap, topic, str(partitions), str(budget_ms), *args]
    outcome = Outcome("java", False, "start", 0.0)
    try:
        outcome = _run("java", cmd, budget_ms, JAVA_STARTS)
        return outcome
    finally:
        if dump is not None:
            _keep_archive(dump, full, whole=outcome.step not in ("hung", "start"))


_COMPILED: dict[tuple[str, str], Path] = {}
_COMPILE_LOCK = threading.Lock()
_DUMPING: set[str] = set()  # class paths whose archive a client of this process is writing


def compiled_java_client(classpath: str, workdir: Path, source_text: str = JAVA_CLIENT,
                         name: str = "RoundTrip") -> Path:
    """`name`.class (from `source_text`) in a jar, compiled once per process: a source-file launch compiles on
    every run (~2 s of CPU).

    A jar in the cache, named for the source and the class path, because the class-data archive
    (`_class_archive`) records the jar's path, size and time: the same jar for every run, every process.
    """
    with _COMPILE_LOCK:
        if (classpath, name) not in _COMPILED:
            key = hashlib.sha256(f"{source_text}\0{classpath}".encode()).hexdigest()[:16]
            jar = cache_root() / "tests" / f"{name.lower()}-{key}.jar"
            if not jar.exists():
                out = workdir / f"{name.lower()}-classes"
                out.mkdir(parents=True, exist_ok=True)
                source = out / f"{name}.java"
                source.write_text(source_text)
                subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(out), str(source)], check=True,
                               capture_output=True, timeout=120)
                jar.parent.mkdir(parents=True, exist_ok=True)
                made = jar.with_name(f".{jar.name}.{os.getpid()}")
                subprocess.run(["jar", "cf", str(made), "-C", str(out), f"{name}.class"], check=True,
                               capture_output=True, timeout=120)
                # Whole, and never replaced once there: the archive records the jar's time and size, so a
                # second copy made by the other worker at the same moment must not take its place.
                try:
                    os.link(made, jar)
                except FileExistsError:
                    pass
                made.unlink()
            _COMPILED[(classpath, name)] = jar
        return _COMPILED[(classpath, name)]


def _archive_path(full_classpath: str) -> Path:
    """The lab's archive naming (JDK and class path), for the client's class path."""
    return class_archive(shutil.which("java") or "java", full_classpath)


def _class_archive(full_classpath: str) -> tuple[list[str], Path | None]:
    """The client JVM's class-data archive options (AppCDS), and where this run dumps one, if it does.

    Why: a client's run is mostly loading and verifying kafka-clients' classes; mapped from an
    archive, a round trip costs about 40 % less CPU, and the suite
    starts about 75 of them. The first client of a process with no archive dumps it as it exits; the
    others meanwhile run without one, as a JVM with an archive that does not match does (-Xshare:auto).
    """
    archive = _archive_path(full_classpath)
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}"], None
    with _COMPILE_LOCK:
        if full_classpath in _DUMPING:
            return [], None
        _DUMPING.add(full_classpath)
    archive.parent.mkdir(parents=True, exist_ok=True)
    dump = archive.with_name(f".{archive.name}.{os.getpid()}-{threading.get_ident()}")
    return [f"-XX:ArchiveClassesAtExit={dump}"], dump


def _keep_archive(dump: Path, full_classpath: str, *, whole: bool) -> None:
    """Put a dumped archive in place whole (a JVM never maps a half-written one), or drop what a killed run left."""
    try:
        if whole and dump.exists() and dump.stat().st_size > 0:
            put_archive(dump, _archive_path(full_classpath))
        else:
            dump.unlink(missing_ok=True)  # a client killed at its time limit exits before its dump is complete
    finally:
        with _COMPILE_LOCK:
            _DUMPING.discard(full_classpath)


def librdkafka_round_trip(prefix: Sequence[str], bootstrap: str, topic: str, partitions: int, *, budget_ms: int,
                          props: Mapping[str, str] | None = None) -> Outcome:
    """librdkafka (confluent-kafka) produces to and consumes from every partition."""
    args = [f"{k}={v}" for k, v in dict(props or {}).items()]
    cmd = [*prefix, sys.executable, "-c", LIBRDKAFKA_CLIENT, bootstrap, topic, str(partitions), str(budget_ms), *args]
    return _run("librdkafka", cmd, budget_ms)


# How many Java clients start at once. A client's CPU is mostly its start: the JVM, kafka-clients' classes,
# the first metadata (and TLS handshake); then it waits, for its records or, failing, for its budget. A start
# is held from launch until the client reports its records sent (the first metadata came back), or for
# START_SECONDS at most (a client whose bootstrap fails waits in send() for its whole budget), so that a
# scenario's clients wait together while never more than these few start together: eight or nine TLS
# clients starting at once on two CPUs spend most of a 15 s budget starting, four at a time well under it.
JAVA_STARTS = threading.BoundedSemaphore(4)
START_SECONDS = 3.0
_STARTED = ("stage acks", "stage close producer", "stage done")


def _run(client: str, cmd: list[str], budget_ms: int, starts: threading.BoundedSemaphore | None = None) -> Outcome:
    started = time.monotonic()
    # Produce and consume each get the budget, plus JVM start-up: the process can never outlive this.
    limit = 2 * budget_ms / 1000 + 30
    held = threading.Lock()  # taken when the start slot is given back: exactly once
    if starts is not None:
        starts.acquire()

    def started_up() -> None:
        if starts is not None and held.acquire(blocking=False):
            starts.release()

    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "JAVA_TOOL_OPTIONS": ""})
    except BaseException:
        started_up()
        raise
    err: list[str] = []
    killed = threading.Event()

    def read_err() -> None:
        for line in proc.stderr:
            err.append(line)
            if line.startswith(_STARTED):
                started_up()

    def kill() -> None:
        killed.set()
        proc.kill()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    timers = [threading.Timer(START_SECONDS, started_up), threading.Timer(limit, kill)]
    for timer in timers:
        timer.start()
    try:
        out = proc.stdout.read()
        proc.wait()
        reader.join()
    finally:
        for timer in timers:
            timer.cancel()
        started_up()  # ended (or the wait failed) before its records were sent
    seconds = time.monotonic() - started
    if killed.is_set():
        # A hung client is a result to report with where it stood (its stage lines), not a test crash.
        return Outcome(client, False, "hung", seconds,
                       error=f"still running after {limit:.0f} s; last lines: {''.join(err).strip().splitlines()[-6:]}")
    last = next((line for line in reversed(out.splitlines()) if line.startswith("{")), None)
    if last is None:
        return Outcome(client, False, "start", seconds, error=(''.join(err).strip().splitlines() or ["no output"])[-1])
    data = json.loads(last)
    return Outcome(client, bool(data["ok"]), data["step"], float(data.get("total_s", seconds)),
                   produce_seconds=float(data.get("produce_s", 0.0)), error=data.get("error", ""),
                   log=tuple(data.get("log", ())), ok_partitions=tuple(data.get("ok_partitions", ())))


class Relay:
    """A TCP relay from `listen` to `target`, as a port-forward is: a real path to the broker, not a fake.

    It lets a test put a working IPv6 address in front of an IPv4-only broker (the reverse of the
    usual dual-stack case), give a client pinned to IPv6 a bootstrap it can reach, or stand for
    `kubectl port-forward` / `ssh -L` (tests/probe/test_remap.py). Each accepted connection is copied
    both ways by two threads until either side closes; `accepted` counts them.
    """

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self.accepted = 0
        self.server = socket.socket(socket.AF_INET6 if ":" in listen[0] else socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(listen)
        self.server.listen(64)
        self.port = int(self.server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def wait_accepted(self, at_least: int, timeout: float = 5.0) -> int:
        """`accepted` once it reaches `at_least` (or the timeout passes): a client's connect completes in the
        kernel's queue before this relay's thread accepts it, so a run in-process can end before the count moves."""
        deadline = time.monotonic() + timeout
        while self.accepted < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.accepted

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting; open connections end with their clients.

        shutdown() first: close() alone leaves the socket listening while the accept thread is
        blocked in accept() (the kernel keeps it for that call), so a later test found the port
        still answering: the dual-stack lab's [::1] "refused" address, taken over by the reverse
        case's relay, answered the docs' ADVERTISED_ONE_FAMILY_FAILS staging when it ran after
        tests/net/test_dualstack.py.
        """
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(), which then returns
        except OSError:
            pass  # never listened, or already shut
        self.server.close()
