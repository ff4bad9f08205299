"""Kafka's broker jars, resolved once from Maven Central and cached.

Why Maven rather than a distribution tarball: Maven Central is the one artifact source every
developer machine and CI here reaches, and `mvn` verifies checksums. The first start resolves
(a few seconds); later starts find the cache and never touch the network.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from kprobe.errors import LabError

KAFKA_VERSION = os.environ.get("KPROBE_KAFKA_VERSION", "4.1.1")


def cache_root() -> Path:
    """The user's cache for kprobe (jars, detached lab state), XDG-style."""
    base = os.environ.get("KPROBE_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kprobe"


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
    root = cache_root() / f"kafka-{version}"
    libs = root / "libs"
    marker = root / ".complete"
    if marker.exists():
        return str(libs / "*")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        # Two test processes starting at once must not both half-write the cache.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _resolve(version, root, libs)
            marker.write_text(version + "\n")
    return str(libs / "*")


def _resolve(version: str, root: Path, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise LabError(
            "the native lab resolves Kafka's jars with Maven: install it (apt-get install maven) "
            "or set KPROBE_KAFKA_LIBS to a Kafka distribution's libs/ directory"
        )
    pom = root / "pom.xml"
    pom.write_text(resources.files("kprobe.lab").joinpath("pom.xml").read_text())
    staging = root / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn, "-B", "-q", "-f", str(pom), f"-Dkafka.version={version}",
        "dependency:copy-dependencies", f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        raise LabError("resolving Kafka's jars with Maven took over 15 minutes: check Maven's network access") from None
    if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise LabError(f"Maven could not resolve Kafka {version}'s jars: {' / '.join(tail) or 'no output'}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
