"""What both entry points check before Spark starts: `kprobe aggregate` and `python -m kprobe.aggregate`.

Why one module: the job replaces `--out` whole, so a wrong `--out` (an input directory, its
parent, someone's home) would be deleted. The checks that prevent that, and the ones that turn
a missing JVM or a mistyped time into one line instead of a Java stack trace, must not depend
on which entry point ran. Nothing here imports pyspark: the first check is whether it exists.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import shutil
from pathlib import Path

from kprobe.errors import UsageError

# Written into every output directory the job creates: the only sign that a non-empty existing
# directory is kprobe's to replace. Spark skips names starting with "." when it reads a directory.
MARKER = ".kprobe-aggregate"


def check_runtime() -> None:
    """PySpark and a JVM are there; otherwise say how to get them."""
    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("kprobe aggregate needs PySpark: pip install 'kprobe[spark]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UsageError("kprobe aggregate needs Java (Spark runs on the JVM): install a JDK 17 or set JAVA_HOME")


def check_time(value: str, flag: str) -> None:
    """An RFC 3339 time or a date, as `--since`/`--until` take; Spark would silently read garbage as null."""
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"bad {flag} {value!r}: give an RFC 3339 time or a date, e.g. 2026-11-22T18:00:00Z") from None


def parse_kafka(text: str) -> tuple[str, str]:
    """`host:port[,host:port]/topic` -> (bootstrap, topic), or a usage error naming the form."""
    from kprobe.delivery.publish import parse_target  # publish's own imports are light; confluent_kafka waits

    target = parse_target(text, "--kafka")
    return target.bootstrap, target.topic


def keep_warm_seconds(value: str | None) -> float:
    """`--keep-warm`'s duration in seconds (0: not given), or a usage error naming the form."""
    if value is None:
        return 0.0
    from kprobe.options import parse_duration  # only when given: a run's start-up need not load it

    return parse_duration(value, "--keep-warm")


def is_local(path: str) -> bool:
    """A path on this machine (no scheme, or file://): the job swaps it in whole."""
    return "://" not in path or path.startswith("file://")


def _norm(path: str) -> str:
    """A comparable form: local paths absolute with symlinks resolved, URIs without trailing '/'."""
    if is_local(path):
        return str(Path(path.removeprefix("file://")).resolve())
    return path.rstrip("/")


def _related(a: str, b: str) -> bool:
    """Same path, or one inside the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def check_out(out: str, inputs: tuple[str, ...] | list[str], state: str | None = None) -> None:
    """Refuse an `--out` whose replacement would delete something that is not a previous result.

    The job replaces `out` whole: it must not be, contain or lie inside an input, and an existing
    non-empty directory must carry the marker the job writes. A `--state` of its own must not
    be related to an input either (the job writes there), nor lie inside `out` (the swap would
    take it away; the default state inside `out` is carried across the swap).
    """
    if state is not None:
        if not state.strip():
            raise UsageError("bad --state '': give a directory for the job's state")
        for item in [*inputs, out]:
            if is_local(item) == is_local(state) and _related(_norm(state), _norm(item)):
                what = "--out" if item == out else f"the input {item!r}"
                raise UsageError(f"bad --state {state!r}: it overlaps {what}; give a separate directory")
    if not out.strip():
        raise UsageError("bad --out '': give a directory for the results")
    target = _norm(out)
    for item in inputs:
        if is_local(item) != is_local(out):
            continue
        source = _norm(item)
        if _related(target, source):
            where = ("is" if target == source else "contains" if source.startswith(target.rstrip("/") + "/")
                     else "is inside")
            raise UsageError(f"bad --out {out!r}: it {where} the input {item!r}, and --out is replaced whole; "
                             "give a separate directory")
    if not is_local(out):
        return
    path = Path(target)
    if path.exists() and not path.is_dir():
        raise UsageError(f"bad --out {out!r}: it is a file, give a directory")
    if path.is_dir() and any(path.iterdir()) and not (path / MARKER).exists():
        raise UsageError(f"bad --out {out!r}: it is a non-empty directory kprobe aggregate did not write, and "
                         "--out is replaced whole; give a new or empty directory")


def validate(inputs: list[str] | tuple[str, ...], out: str, kafka: list[str] | tuple[str, ...],
             since: str | None, until: str | None, state: str | None = None,
             full: bool = False) -> tuple[tuple[str, str], ...]:
    """Every check, in the order a user fixes them; returns the parsed Kafka topics.

    The state (--state, else OUT/.state) is checked here too, before Spark starts: a foreign or
    damaged one is one line and exit 2, not a minute of JVM start-up first.
    """
    check_runtime()
    for value, flag in ((since, "--since"), (until, "--until")):
        if value is not None:
            check_time(value, flag)
    if not inputs and not kafka:
        raise UsageError("nothing to aggregate: give report files or directories, or --kafka BOOTSTRAP/TOPIC")
    topics = tuple(parse_kafka(k) for k in kafka)
    for item in inputs:
        if is_local(item) and not Path(item.removeprefix("file://")).exists():
            raise UsageError(f"no such input {item!r}: give report files or directories")
    check_out(out, tuple(inputs), state)
    from kprobe.aggregate import state as st

    if state is None and is_local(out):
        st.recover(Path(_norm(out)))
    where = state or st.default_dir(out)
    if is_local(where):
        st.check(Path(_norm(where)), full)
    return topics
