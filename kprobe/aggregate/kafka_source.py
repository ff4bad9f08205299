"""Spark's Kafka source for `kprobe aggregate --kafka`, its jars resolved from Maven Central.

Like the lab's broker jars (kprobe.maven): `mvn` copies the connector and what it needs into
kprobe's cache once; later runs are offline. Only the jars PySpark does not already ship are
handed to Spark (the Hadoop client, Scala and compression libraries come with PySpark).
"""

from __future__ import annotations

import os
import time
from importlib import resources

from kprobe.errors import UsageError
from kprobe.maven import Failure, MavenError, cached, dependencies
from kprobe.paths import cache_root

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
    pom = resources.files("kprobe.aggregate").joinpath("pom.xml").read_text()
    failures = []
    for version in dict.fromkeys(versions):
        root = cache_root() / f"spark-kafka-{version}"
        missing = root / ".missing"
        if cached(root) is None and missing.exists() and time.time() - missing.stat().st_mtime < MISSING_TTL_S:
            failures.append(f"{version}: not on Maven Central (remembered; delete {missing} to ask again)")
            continue
        try:
            # -U: a release Central lacked yesterday may be there today, and Maven's own record of
            # the miss would hide it; when to ask again is the `.missing` file's call, above.
            libs = dependencies(root, pom, {"spark.version": version}, update=True)
        except MavenError as exc:
            if exc.failure is Failure.NOT_FOUND:
                missing.write_text(version + "\n")
            failures.append(f"{version}: {exc.failure.value}")
            continue
        return sorted(str(p) for p in libs.glob("*.jar") if any(w in p.name for w in WANTED))
    raise UsageError("cannot resolve Spark's Kafka source with Maven (" + "; ".join(failures) + "): "
                     "check mvn's access to Maven Central, or set KPROBE_SPARK_KAFKA_VERSION")
