"""The one Maven resolver (kprobe.maven) as its two users see it: the lab's broker jars and Spark's Kafka source.

A fake `mvn` on PATH stands in for Maven Central: it writes jars or fails as each test tells it and
logs every call, so the cache, the lock, the one-day memory of a missing version and each user's
error wording are checked without the network.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from kprobe import maven, paths
from kprobe.aggregate.kafka_source import FALLBACK, connector_jars
from kprobe.errors import LabError, UsageError
from kprobe.lab.jars import kafka_classpath

FAKE_MVN = """#!{python}
import json, os, sys, time
args = sys.argv[1:]
plan = json.loads(open(os.environ["FAKE_MVN_PLAN"]).read())
with open(os.environ["FAKE_MVN_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
props = dict(a[2:].split("=", 1) for a in args if a.startswith("-D"))
version = props.get("kafka.version") or props.get("spark.version")
what = plan.get(version, "ok")
if what == "slow":
    time.sleep(plan.get("sleep", 1.0))
if what == "missing":
    print("[ERROR] Failed to execute goal on project x: Could not find artifact "
          "org.apache.spark:spark-sql-kafka-0-10_2.13:jar:" + version + " in central")
    sys.exit(1)
if what == "fail":
    print("line 1\\nline 2\\nline 3\\nline 4")
    sys.exit(1)
out = props["outputDirectory"]
os.makedirs(out)
if what != "empty":
    names = (["kafka_2.13-{{v}}.jar", "kafka-clients-{{v}}.jar"] if "kafka.version" in props else
             ["spark-sql-kafka-0-10_2.13-{{v}}.jar", "kafka-clients-3.9.1.jar", "commons-pool2-2.12.1.jar",
              "scala-library-2.13.16.jar"])
    for name in names:
        open(os.path.join(out, name.format(v=version)), "w").close()
"""


class FakeMaven:
    def __init__(self, root: Path) -> None:
        self.plan_file = root / "plan.json"
        self.log = root / "calls.jsonl"
        self.plan({})

    def plan(self, plan: dict) -> None:
        self.plan_file.write_text(json.dumps(plan))

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture
def mvn(tmp_path, monkeypatch) -> FakeMaven:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(FAKE_MVN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    fake = FakeMaven(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_MVN_PLAN", str(fake.plan_file))
    monkeypatch.setenv("FAKE_MVN_LOG", str(fake.log))
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("KPROBE_KAFKA_LIBS", "KPROBE_SPARK_KAFKA_VERSION"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_cache_root_honours_kprobe_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("KPROBE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_root() == tmp_path / "home" / ".cache" / "kprobe"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_root() == tmp_path / "xdg" / "kprobe"
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "mine"))
    assert paths.cache_root() == tmp_path / "mine"


def test_lab_jars_resolved_once_then_offline(mvn, tmp_path, monkeypatch):
    root = tmp_path / "cache" / "kafka-4.1.1"
    assert kafka_classpath("4.1.1") == f"{root / 'libs'}{os.sep}*"
    [call] = mvn.calls()
    assert call[:2] == ["-B", "-q"] and "-U" not in call and "-Dkafka.version=4.1.1" in call
    assert "dependency:copy-dependencies" in call and "-DincludeScope=runtime" in call
    assert (root / ".complete").exists() and (root / "libs" / "kafka_2.13-4.1.1.jar").exists()
    assert not (root / "libs.partial").exists()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no Maven at all now
    assert kafka_classpath("4.1.1") == f"{root / 'libs'}{os.sep}*"
    assert len(mvn.calls()) == 1


@pytest.mark.parametrize(("plan", "message"), [
    ("fail", "Maven could not resolve Kafka 4.1.1's jars: line 2 / line 3 / line 4"),
    ("empty", "Maven could not resolve Kafka 4.1.1's jars: no output"),  # success, but no broker jar
    ("no mvn", "the native lab resolves Kafka's jars with Maven: install it (apt-get install maven) "
               "or set KPROBE_KAFKA_LIBS to a Kafka distribution's libs/ directory"),
    ("slow", "resolving Kafka's jars with Maven took over 15 minutes: check Maven's network access"),
])
def test_lab_failures_keep_their_messages(mvn, tmp_path, monkeypatch, plan, message):
    mvn.plan({"4.1.1": plan, "sleep": 10})
    if plan == "no mvn":
        monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    if plan == "slow":
        monkeypatch.setattr(maven, "TIMEOUT_S", 0.5)
    with pytest.raises(LabError) as failure:
        kafka_classpath("4.1.1")
    assert str(failure.value) == message
    root = tmp_path / "cache" / "kafka-4.1.1"
    assert not (root / ".complete").exists() and not (root / "libs").exists()


def test_parallel_first_uses_run_maven_once(mvn):
    mvn.plan({"4.1.1": "slow", "sleep": 1.0})
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(kafka_classpath("4.1.1"))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 3 and len(set(results)) == 1
    assert len(mvn.calls()) == 1


def test_connector_falls_back_and_remembers_a_missing_version(mvn, tmp_path):
    mvn.plan({"9.9.9": "missing"})
    jars = connector_jars("9.9.9")
    libs = tmp_path / "cache" / f"spark-kafka-{FALLBACK}" / "libs"
    assert jars == sorted(str(libs / name) for name in (
        f"spark-sql-kafka-0-10_2.13-{FALLBACK}.jar", "kafka-clients-3.9.1.jar", "commons-pool2-2.12.1.jar"))
    calls = mvn.calls()
    assert [c for c in calls if "-Dspark.version=9.9.9" in c] and [c for c in calls if f"-Dspark.version={FALLBACK}" in c]
    assert all("-U" in c for c in calls) and len(calls) == 2
    assert (tmp_path / "cache" / "spark-kafka-9.9.9" / ".missing").exists()
    assert connector_jars("9.9.9") == jars
    assert len(mvn.calls()) == 2  # 9.9.9 remembered as missing, the fallback cached


def test_connector_failures_in_one_line(mvn, tmp_path):
    mvn.plan({"9.9.9": "missing", FALLBACK: "fail"})
    with pytest.raises(UsageError) as failure:
        connector_jars("9.9.9")
    assert str(failure.value) == (f"cannot resolve Spark's Kafka source with Maven (9.9.9: not on Maven Central; "
                                  f"{FALLBACK}: mvn failed): check mvn's access to Maven Central, or set "
                                  "KPROBE_SPARK_KAFKA_VERSION")
    missing = tmp_path / "cache" / "spark-kafka-9.9.9" / ".missing"
    with pytest.raises(UsageError) as again:
        connector_jars("9.9.9")
    assert f"9.9.9: not on Maven Central (remembered; delete {missing} to ask again); {FALLBACK}: mvn failed" in str(
        again.value)
    assert len(mvn.calls()) == 3  # the failed fallback is asked again; the missing version is not
