"""Kafka's broker jars, resolved once from Maven Central and cached (kprobe.maven).

The first start resolves (a few seconds); later starts find the cache and never touch the network.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

from kprobe.errors import LabError
from kprobe.maven import Failure, MavenError, dependencies
from kprobe.paths import cache_root

# Re-exported while kprobe.delivery.deliver and kprobe.lab.supervisor still import it from here; the
# cache belongs to kprobe.paths, and new code takes it from there.
__all__ = ["KAFKA_VERSION", "kafka_classpath", "require_java"]

KAFKA_VERSION = os.environ.get("KPROBE_KAFKA_VERSION", "4.1.1")


def require_java() -> str:
    """Path of `java`, or a one-line reason why the native lab cannot run."""
    java = shutil.which("java")
    if not java:
        raise LabError("the native lab needs a JDK (17 or later) on PATH: install one, e.g. openjdk-17-jre")
    return java


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """A `-cp` value with every jar a broker needs, resolving them first if not cached.

    `KPROBE_KAFKA_LIBS` may point at an unpacked Kafka distribution's `libs/` instead.
    """
    override = os.environ.get("KPROBE_KAFKA_LIBS")
    if override:
        if not any(Path(override).glob("kafka_2.13-*.jar")):
            raise LabError(f"KPROBE_KAFKA_LIBS={override} holds no kafka_2.13 jar: point it at a Kafka libs/ dir")
        return str(Path(override) / "*")
    pom = resources.files("kprobe.lab").joinpath("pom.xml").read_text()
    try:
        # The broker jar itself is expected: a pom that resolves to nothing would start no broker.
        libs = dependencies(cache_root() / f"kafka-{version}", pom, {"kafka.version": version},
                            expect="kafka_2.13-*.jar")
    except MavenError as exc:
        raise LabError(_message(exc, version)) from None
    return str(libs / "*")


def _message(exc: MavenError, version: str) -> str:
    """The lab's wording of a Maven failure: what to install or check."""
    if exc.failure is Failure.NO_MVN:
        return ("the native lab resolves Kafka's jars with Maven: install it (apt-get install maven) "
                "or set KPROBE_KAFKA_LIBS to a Kafka distribution's libs/ directory")
    if exc.failure is Failure.TIMEOUT:
        return "resolving Kafka's jars with Maven took over 15 minutes: check Maven's network access"
    return f"Maven could not resolve Kafka {version}'s jars: {' / '.join(exc.tail) or 'no output'}"
