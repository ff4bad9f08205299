"""Real applications that need more than reachable leaders: a group consumer and a transactional producer.

Apache Kafka's Java client and librdkafka each run as the user's application would: a consumer that
subscribes with a `group.id`, reads and commits; a producer with a `transactional.id` that initialises
its transactions and commits one. Each is given the same properties file as kprobe's `-F`, so a test
sets a verdict beside what a real application does. Every wait is bounded by the budget given, in
the clients' own settings and in the process timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from real_clients import compiled_java_client

JAVA_APP = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class App {
    static String quote(Throwable e) {
        Throwable c = e.getCause() != null ? e.getCause() : e;
        return "\"" + c.getClass().getSimpleName() + ": " + String.valueOf(c.getMessage()).replace("\\", "/")
            .replace("\"", "'").replace("\n", " ") + "\"";
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], topic = a[1];
        int budget = Integer.parseInt(a[2]);
        Properties p = new Properties();
        try (java.io.InputStream r = new java.io.FileInputStream(a[3])) { p.load(r); }
        long t0 = System.nanoTime();
        if (mode.equals("consume")) {
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            p.putIfAbsent("auto.offset.reset", "earliest");
            p.putIfAbsent("enable.auto.commit", "false");
            p.putIfAbsent("default.api.timeout.ms", String.valueOf(budget));
            int records = 0;
            String error = null;
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                long end = System.currentTimeMillis() + budget;
                while (records == 0 && System.currentTimeMillis() < end) {
                    records += c.poll(Duration.ofMillis(200)).count();
                }
                if (records > 0) c.commitSync(Duration.ofMillis(budget));
                else error = "\"no record within the budget\"";
            } catch (Exception e) {
                error = quote(e);
            }
            System.out.println("{\"ok\": " + (error == null) + ", \"step\": \"consume\", \"records\": " + records
                + ", \"error\": " + (error == null ? "\"\"" : error) + ", \"seconds\": " + (System.nanoTime() - t0) / 1e9 + "}");
        } else {
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            p.putIfAbsent("max.block.ms", String.valueOf(budget));
            p.putIfAbsent("delivery.timeout.ms", String.valueOf(budget));
            p.putIfAbsent("request.timeout.ms", String.valueOf(budget));
            String error = null;
            KafkaProducer<String, String> producer = null;
            try {
                producer = new KafkaProducer<>(p);
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "v"));
                producer.commitTransaction();
            } catch (Exception e) {
                error = quote(e);
            } finally {
                if (producer != null) producer.close(Duration.ofMillis(500));
            }
            System.out.println("{\"ok\": " + (error == null) + ", \"step\": \"transact\", \"error\": "
                + (error == null ? "\"\"" : error) + ", \"seconds\": " + (System.nanoTime() - t0) / 1e9 + "}");
        }
    }
}
"""

LIBRDKAFKA_APP = r"""
import json, sys, time
from confluent_kafka import Consumer, KafkaException, Producer

mode, topic, budget, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
conf = {}
for line in open(path):
    line = line.strip()
    if line and not line.startswith("#") and "=" in line:
        key, value = line.split("=", 1)
        conf[key.strip()] = value.strip()
t0 = time.monotonic()
error = None
if mode == "consume":
    conf.setdefault("auto.offset.reset", "earliest")
    conf.setdefault("enable.auto.commit", "false")
    records = 0
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        end = time.monotonic() + budget / 1000
        while not records and time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records += 1
        if records:
            consumer.commit(asynchronous=False)
        else:
            error = "no record within the budget"
    except KafkaException as exc:
        error = str(exc)
    finally:
        consumer.close()
    print(json.dumps({"ok": error is None, "step": "consume", "records": records, "error": error or "",
                      "seconds": time.monotonic() - t0}))
else:
    conf.setdefault("transaction.timeout.ms", str(max(budget, 1000)))
    conf.setdefault("message.timeout.ms", str(budget))
    producer = Producer(conf)
    try:
        producer.init_transactions(budget / 1000)
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=b"v")
        producer.commit_transaction(budget / 1000)
    except KafkaException as exc:
        error = str(exc)
    print(json.dumps({"ok": error is None, "step": "transact", "error": error or "",
                      "seconds": time.monotonic() - t0}))
"""


@dataclass(frozen=True)
class AppOutcome:
    """What one application run did: worked, or where it stopped and why."""

    client: str
    mode: str
    ok: bool
    error: str
    seconds: float


def java_app(mode: str, classpath: str, workdir: Path, topic: str, properties: Path, budget_ms: int) -> AppOutcome:
    """The Java client as the application: `consume` in a group, or `transact`, with `properties` as its file."""
    jar = compiled_java_client(classpath, workdir, JAVA_APP, "App")
    cmd = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{classpath}{os.pathsep}{jar}",
           "App", mode, topic, str(budget_ms), str(properties)]
    return _run("java", mode, cmd, budget_ms)


def librdkafka_app(mode: str, topic: str, properties: Path, budget_ms: int) -> AppOutcome:
    """librdkafka (confluent-kafka) as the application, with the same file."""
    cmd = [sys.executable, "-c", LIBRDKAFKA_APP, mode, topic, str(budget_ms), str(properties)]
    return _run("librdkafka", mode, cmd, budget_ms)


def _run(client: str, mode: str, cmd: list[str], budget_ms: int) -> AppOutcome:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=2 * budget_ms / 1000 + 30, check=False,
                              env={**os.environ, "JAVA_TOOL_OPTIONS": ""})
    except subprocess.TimeoutExpired:
        return AppOutcome(client, mode, False, "hung past its budget", 2 * budget_ms / 1000 + 30)
    last = next((line for line in reversed(done.stdout.splitlines()) if line.startswith("{")), None)
    if last is None:
        return AppOutcome(client, mode, False, (done.stderr.strip().splitlines() or ["no output"])[-1], 0.0)
    data = json.loads(last)
    return AppOutcome(client, mode, bool(data["ok"]), str(data.get("error", "")), float(data.get("seconds", 0.0)))


# An application written against the oldest client APIs (poll(long), no Duration): it compiles against
# kafka-clients 0.11 to 4.x alike, so one program tells whether each client version works.
JAVA_OLD_APP = r"""
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class OldApp {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], group = a[2];
        String marker = UUID.randomUUID().toString();
        String error = null;
        try {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("max.block.ms", "15000");
            p.put("request.timeout.ms", "15000");
            KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
            producer.send(new ProducerRecord<>(topic, marker, marker)).get(15, TimeUnit.SECONDS);
            producer.close();
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            c.put("group.id", group);
            c.put("auto.offset.reset", "earliest");
            c.put("enable.auto.commit", "false");
            KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer());
            consumer.subscribe(Collections.singletonList(topic));
            boolean seen = false;
            long end = System.currentTimeMillis() + 20000;
            while (!seen && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(200L)) {
                    if (marker.equals(r.value())) seen = true;
                }
            }
            if (seen) consumer.commitSync(); else error = "its record was not read back through the group";
            consumer.close();
        } catch (Exception e) {
            error = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        System.out.println(error == null ? "{\"ok\": true, \"error\": \"\"}"
            : "{\"ok\": false, \"error\": \"" + error.replace("\\", "/").replace("\"", "'").replace("\n", " ") + "\"}");
    }
}
"""


def old_java_app(classpath: str, workdir: Path, bootstrap: str, topic: str, group: str) -> AppOutcome:
    """A producer then a group consumer (subscribe, read back, commit) with the kafka-clients on `classpath`."""
    jar = compiled_java_client(classpath, workdir, JAVA_OLD_APP, "OldApp")
    cmd = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp",
           f"{classpath}{os.pathsep}{jar}", "OldApp", bootstrap, topic, group]
    return _run("java", "produce and consume", cmd, 20000)


# The oldest Java clients measured against Kafka 4.1.1 (docs/application.md): each asks ApiVersions and picks
# what both sides speak, so KIP-896's removals leave it working.
OLD_JAVA_CLIENTS = ("0.11.0.3", "1.1.1", "2.0.1", "2.1.1")
_CLIENTS_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>kprobe.tests</groupId><artifactId>old-clients</artifactId><version>1</version>
<dependencies><dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
<version>${kafka.version}</version></dependency></dependencies></project>
"""


def old_clients_classpath(version: str) -> str:
    """The class path of kafka-clients `version` and its dependencies, resolved from Maven Central once (the
    session resolves them before its DNS closes: tests/support/hermetic_dns.py)."""
    from kprobe.maven import dependencies
    from kprobe.paths import cache_root

    libs = dependencies(cache_root() / "tests" / f"kafka-clients-{version}", _CLIENTS_POM, {"kafka.version": version},
                        expect=f"kafka-clients-{version}.jar")
    return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
