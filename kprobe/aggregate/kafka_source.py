"""Spark's Kafka source for `kprobe aggregate --kafka`, its jars resolved from Maven Central.

Like the lab's broker jars: `mvn` copies the connector and what it needs into kprobe's cache
once; later runs are offline. Only the jars PySpark does not already ship are handed to Spark
(the Hadoop client, Scala and compression libraries come with PySpark).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path

from kprobe.errors import UsageError
from kprobe.lab.jars import cache_root

WANTED = ("spark-sql-kafka-0-10", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")
# Maven Central has no connector for every PySpark release; the newest one that resolved here,
# tried after the exact version (override with KPROBE_SPARK_KAFKA_VERSION).
FALLBACK = "4.2.0"
# A version Maven Central said it does not have is not asked for again for a day: asking costs
# a Maven start and a network round trip on every run.
MISSING_TTL_S = 86400.0


def connector_jars(spark_version: str) -> list[str]:
    """Paths of the Kafka source's jars, resolving them on first use."""
    versions = [v for v in (os.environ.get("KPROBE_SPARK_KAFKA_VERSION"), spark_version, FALLBACK) if v]
    failures = []
    for version in dict.fromkeys(versions):
        root = cache_root() / f"spark-kafka-{version}"
        libs, marker, missing = root / "libs", root / ".complete", root / ".missing"
        if not marker.exists() and missing.exists() and time.time() - missing.stat().st_mtime < MISSING_TTL_S:
            failures.append(f"{version}: not on Maven Central (remembered; delete {missing} to ask again)")
            continue
        if not marker.exists():
            root.mkdir(parents=True, exist_ok=True)
            with open(root / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not marker.exists():
                    error = _resolve(version, root, libs)
                    if error:
                        if error == NOT_ON_CENTRAL:
                            missing.write_text(version + "\n")
                        failures.append(f"{version}: {error}")
                        continue
                    marker.write_text(version + "\n")
        return sorted(str(p) for p in libs.glob("*.jar") if any(w in p.name for w in WANTED))
    raise UsageError("cannot resolve Spark's Kafka source with Maven (" + "; ".join(failures) + "): "
                     "check mvn's access to Maven Central, or set KPROBE_SPARK_KAFKA_VERSION")


NOT_ON_CENTRAL = "not on Maven Central"


def _resolve(version: str, root: Path, libs: Path) -> str | None:
    mvn = shutil.which("mvn")
    if not mvn:
        return "mvn not found (apt-get install maven)"
    pom = root / "pom.xml"
    pom.write_text(resources.files("kprobe.aggregate").joinpath("pom.xml").read_text())
    staging = root / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    done = subprocess.run([mvn, "-B", "-q", "-U", "-f", str(pom), f"-Dspark.version={version}",
                           "dependency:copy-dependencies", f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        return NOT_ON_CENTRAL if "was not found" in output or "Could not find artifact" in output else "mvn failed"
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    return None
