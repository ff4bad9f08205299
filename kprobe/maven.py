"""Jars resolved from Maven Central with `mvn`, once, into kprobe's cache.

Why Maven rather than a distribution tarball or a hand-written downloader: Maven Central is the
one artifact source every developer machine and CI here reaches, `mvn` verifies checksums and
works out the transitive dependencies. The first use resolves (seconds to minutes); later uses
find the cache complete and never start Maven or touch the network.

Both users, the lab's broker jars (kprobe.lab.jars) and Spark's Kafka source
(kprobe.aggregate.kafka_source), go through `dependencies` here, so the cache layout, the lock
and the failure cases are the same for both; each turns a `MavenError` into its own message.
"""

from __future__ import annotations

import enum
import fcntl
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from kprobe.errors import KprobeError

TIMEOUT_S = 900.0


class Failure(str, enum.Enum):
    """Why Maven gave no jars; the value is a short reason fit to show the user."""

    NO_MVN = "mvn not found (apt-get install maven)"
    TIMEOUT = "mvn timed out"
    NOT_FOUND = "not on Maven Central"
    FAILED = "mvn failed"


class MavenError(KprobeError):
    """Maven gave no jars. `failure` says why; `tail` is Maven's last output lines, if it ran."""

    def __init__(self, failure: Failure, tail: tuple[str, ...] = ()) -> None:
        self.failure = failure
        self.tail = tail
        super().__init__(failure.value + (f": {' / '.join(tail)}" if tail else ""))


def cached(root: Path) -> Path | None:
    """The jars directory of a cache entry that a previous resolve completed, else None."""
    return root / "libs" if (root / ".complete").exists() else None


def dependencies(root: Path, pom: str, properties: Mapping[str, str], *, expect: str | None = None,
                 update: bool = False, timeout_s: float | None = None) -> Path:
    """The directory holding the runtime dependencies of `pom` (its text), resolved on first use.

    `root` is the cache entry (e.g. `cache_root() / "kafka-4.1.1"`): it receives the pom, a lock,
    `libs/` and the `.complete` marker. `properties` become `-Dkey=value` (the version to fetch).
    `expect` is a glob that must match in the result, for a pom whose success alone proves
    nothing. `update` is Maven's `-U`: ask Central again about artifacts it recently lacked.
    `timeout_s` bounds Maven's run (default TIMEOUT_S).

    Why the lock and the staging directory: two processes (parallel tests, two terminals) may
    start at once; one resolves while the other waits, and a run killed halfway leaves only
    `libs.partial`, never a `libs/` that looks complete.
    """
    done = cached(root)
    if done is not None:
        return done
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = cached(root)
        if done is None:
            _resolve(root, pom, properties, expect, update, TIMEOUT_S if timeout_s is None else timeout_s)
            (root / ".complete").write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
            done = root / "libs"
    return done


def _resolve(root: Path, pom: str, properties: Mapping[str, str], expect: str | None, update: bool,
             timeout_s: float) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise MavenError(Failure.NO_MVN)
    pom_file = root / "pom.xml"
    pom_file.write_text(pom)
    staging, libs = root / "libs.partial", root / "libs"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [mvn, "-B", "-q", *(["-U"] if update else []), "-f", str(pom_file),
           *(f"-D{k}={v}" for k, v in properties.items()),
           "dependency:copy-dependencies", f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise MavenError(Failure.TIMEOUT) from None
    output = run.stdout + run.stderr
    tail = tuple(output.strip().splitlines()[-3:])
    if run.returncode != 0:
        missing = "was not found" in output or "Could not find artifact" in output
        raise MavenError(Failure.NOT_FOUND if missing else Failure.FAILED, tail)
    if expect is not None and not any(staging.glob(expect)):
        raise MavenError(Failure.FAILED, tail)
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
