"""What a run of `kprobe aggregate` has to do, decided before Spark is imported.

Why apart from the job: the job runs from cron, every few minutes, as a new process each time,
and most of those runs find nothing new. Starting a JVM and a Spark session costs seconds of
CPU, so a run first lists its local inputs (Python's own walk), asks each topic for its end
offsets (librdkafka, no JVM), and compares both, and the output it left, with the state's
manifest. When nothing changed it says so in one line (`current`), and PySpark is never
imported. Nothing here imports pyspark.

The output carries a stamp (`STAMP`): the manifest it was built from (its digest), the window
and the page option, and the size of each of its files. An output that a later run of other
options replaced, or that someone damaged or trimmed, does not match it, and the run does the
work again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kprobe.aggregate import state as st
from kprobe.aggregate.checks import is_local
from kprobe.errors import KprobeError
from kprobe.records import field, record
from kprobe.sanitize import safe

# In every output a run writes on a local path: what it was built from (see `current`). Hidden
# (a leading `.`), so Spark's readers of the output skip it.
STAMP = ".kprobe-aggregate-built.json"


@record
class JobOptions:
    """What to read, where to write, which window."""

    inputs: tuple[str, ...]
    out: str
    master: str | None = "local[*]"
    since: str | None = None
    until: str | None = None
    html: bool = True
    kafka: tuple[tuple[str, str], ...] = ()  # (bootstrap, topic)
    full: bool = False  # recompute everything: the state is emptied and rebuilt from the inputs
    state: str | None = None  # the state directory; None: OUT/.state
    progress: bool | None = None  # one line per stage on stderr; None: when stderr is a terminal


def state_dir(options: JobOptions) -> str:
    """Where the state lives: --state, else inside --out."""
    return options.state or st.default_dir(options.out)


def local_path(path: str) -> Path:
    """A local path (no scheme or file://) as an absolute one, symlinks resolved."""
    return Path(path.removeprefix("file://")).resolve()


class Progress:
    """One line per stage on a terminal (stderr), nothing otherwise: scheduled runs log only the summary."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.monotonic()

    def __call__(self, stage: str, detail: str) -> None:
        """Print `[elapsed] stage: detail` if on."""
        if self.enabled:
            sys.stderr.write(f"[{time.monotonic() - self.started:6.1f}s] {stage}: {detail}\n")
            sys.stderr.flush()


@record
class InputFile:
    """One input file as listed: a file whose size or modification time changed is read again."""

    path: str
    size: int
    mtime: int

    @property
    def kind(self) -> str:
        """Lines (JSON Lines), whole (one document or JSON Lines) or other (quarantined unread)."""
        name = self.path.rsplit("/", 1)[-1].lower().removesuffix(".gz")
        if name.endswith((".jsonl", ".ndjson")):
            return "lines"
        return "whole" if name.endswith(".json") else "other"


def hidden(name: str) -> bool:
    """Spark's rule: names starting with `.` or `_` (`_SUCCESS`, `.crc` files, a `.state`) are not data."""
    return name.startswith((".", "_"))


def list_local(item: str) -> list[InputFile]:
    """Every file under one local input (recursively), with its size and modification time.

    Walked by Python: no Spark job, no JVM round trip per file, and no JVM at all when the
    listing shows there is nothing new.
    """
    root = local_path(item)
    if root.is_file():
        info = root.stat()
        return [InputFile(str(root), info.st_size, info.st_mtime_ns)]
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not hidden(d))
        for name in files:
            if not hidden(name):
                path = os.path.join(folder, name)
                info = os.stat(path)
                found.append(InputFile(path, info.st_size, info.st_mtime_ns))
    return found


def topic_ranges(bootstrap: str, topic: str, done: dict[str, int]) -> dict[int, tuple[int, int]]:
    """Per partition of a topic: (first offset not yet read, end offset now), for the partitions with news.

    The ends are fixed before Spark reads, so what a run read is known exactly and the next run
    starts there (a message published meanwhile waits for the next run, it is not lost). Asked
    with librdkafka (confluent-kafka, already kprobe's client): a metadata and a ListOffsets
    request per partition, no JVM.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kprobe-aggregate", "enable.auto.commit": False,
                         "socket.timeout.ms": 10000, "log_level": 0})
    try:
        meta = consumer.list_topics(topic, timeout=15)
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            reason = info.error.str() if info is not None and info.error is not None else "not found"
            raise KprobeError(f"cannot read the topic {topic!r} at {bootstrap}: {reason} (`kprobe list -b {bootstrap}` "
                              "lists the topics there)")
        ranges = {}
        for partition in sorted(info.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
            start = max(low, done.get(str(partition), low))
            if start < high:
                ranges[partition] = (start, high)
        return ranges
    except KafkaException as exc:
        error = exc.args[0]
        reason = error.str() if hasattr(error, "str") else str(error)  # librdkafka's words, not KafkaError{...}
        raise KprobeError(f"cannot read the topic {topic!r} at {bootstrap}: {reason}; check that a broker answers "
                          f"there (`kprobe probe -b {bootstrap}` says why not)") from None
    finally:
        consumer.close()


@record(frozen=False)
class News:
    """What the inputs hold that the state has not read: new files, changed files, topic offset ranges."""

    listed: list[InputFile]
    new: list[InputFile] = field(default_factory=list)
    changed: list[InputFile] = field(default_factory=list)
    topics: dict[tuple[str, str], dict[int, tuple[int, int]]] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        """Topic messages not read yet."""
        return sum(hi - lo for ranges in self.topics.values() for lo, hi in ranges.values())

    @property
    def any(self) -> bool:
        """Whether there is anything to read."""
        return bool(self.new or self.changed or self.messages)


def news(listed: list[InputFile], manifest: st.Manifest, kafka: tuple[tuple[str, str], ...]) -> News:
    """Compare a listing and the topics' end offsets with what the manifest says was read."""
    seen = manifest.files
    return News(listed, new=[f for f in listed if f.path not in seen],
                changed=[f for f in listed if f.path in seen and seen[f.path] != [f.size, f.mtime]],
                topics={(b, t): topic_ranges(b, t, manifest.topics.get(f"{b}/{t}", {})) for b, t in kafka})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _built_from(options: JobOptions, state_root: Path) -> dict[str, Any]:
    """What an output depends on besides the inputs the manifest lists: the state, its commit, the options."""
    return {"state": str(state_root), "manifest": _digest(state_root / st.MANIFEST), "since": options.since,
            "until": options.until, "html": options.html}


def write_stamp(staging: Path, options: JobOptions, state_root: Path) -> None:
    """The output's stamp, written last into the complete staging output (before the state joins it)."""
    files = {}
    for folder, _, names in os.walk(staging):
        for name in names:
            path = Path(folder, name)
            files[str(path.relative_to(staging))] = path.stat().st_size
    stamp = {**_built_from(options, state_root), "files": dict(sorted(files.items()))}
    (staging / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def _intact(out: Path, options: JobOptions, state_root: Path) -> bool:
    """Whether `out` is the output of the state's last commit with these options, every file of it there."""
    try:
        stamp = json.loads((out / STAMP).read_text())
        if not isinstance(stamp, dict) or not isinstance(stamp.get("files"), dict):
            return False
        if any(stamp.get(k) != v for k, v in _built_from(options, state_root).items()):
            return False
        return all((out / rel).stat().st_size == size for rel, size in stamp["files"].items())
    except (OSError, ValueError):
        return False


def current(options: JobOptions) -> str | None:
    """The one line a run with nothing to do prints, or None when it has work (and so needs Spark).

    Nothing to do: the inputs are local and list the same files, of the same size and
    modification time, as the state has read; every topic ends where the last run stopped; and
    the output is intact (`_intact`). Inputs elsewhere (s3a, hdfs) are listed through Hadoop,
    in the JVM: such a run always starts Spark.
    """
    return survey(options)[0]


def survey(options: JobOptions) -> tuple[str | None, News | None]:
    """`current`'s line, or None and the news it found against the committed state (None if it did not look).

    Why both: a run with work sizes it next (`new_input_bytes`), and the news in hand spares it a
    second listing of the inputs and a second ask of each topic's end offsets.
    """
    if options.full or not is_local(options.out) or not all(is_local(i) for i in options.inputs):
        return None, None
    root, out = local_path(state_dir(options)), local_path(options.out)
    if not (root / st.MANIFEST).exists() or not (out / STAMP).exists():
        return None, None
    with st.locked(root):
        manifest = st.load(root)
        if not manifest.run or not _intact(out, options, root):
            return None, None
        listed = [f for item in options.inputs for f in list_local(item)]
        found = news(listed, manifest, options.kafka)
        if found.any:
            return None, found
    topics = f" and {len(options.kafka)} topic{'s' if len(options.kafka) != 1 else ''}" if options.kafka else ""
    return (f"nothing new: {len(listed)} input files{topics} as run {manifest.run} left them; "
            f"the outputs in {safe(options.out, 300)} are current"), None


# What a topic message is counted as in `new_input_bytes`, where no message has a size until Spark reads it:
# ten times a recorded report (3 to 6 kB of JSON), so a scheduled run reading up to 4,096 new reports from a
# topic gets the light JVM. Only how the JVM starts depends on it, never what is read.
MESSAGE_BYTES = 64 * 1024


def new_input_bytes(options: JobOptions, found: News | None = None) -> int | None:
    """The bytes of input this run will read (new and changed files; each new topic message as MESSAGE_BYTES),
    or None when that is not known before Spark starts: inputs or a state off this machine.

    Why: the size of the work decides how the JVM is started (kprobe.aggregate.entry). `found`: what
    `survey` found against the same committed state; without it the inputs are listed and each topic's
    end offsets asked with librdkafka here (a topic that cannot be read fails in one line, as the run
    itself would).
    """
    if not all(is_local(i) for i in options.inputs) or not is_local(state_dir(options)):
        return None
    if found is None:
        root = local_path(state_dir(options))
        manifest = st.Manifest() if options.full or not (root / st.MANIFEST).exists() else st.load(root)
        found = news([f for item in options.inputs for f in list_local(item)], manifest, options.kafka)
    return sum(f.size for f in (*found.new, *found.changed)) + found.messages * MESSAGE_BYTES


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What the terminal shows: the counts, then the worst gaps first."""
    from kprobe.aggregate.flatten import BOOTSTRAP_NODE

    c = result["counts"]
    lines = [f"{c['input_records']} records: {c['reports']} reports aggregated ({c['reports_in_window']} in the "
             f"window, {c['observations']} endpoint observations), {c['duplicates']} duplicates, "
             f"{c['quarantined']} quarantined"]
    for reason, n in sorted(c.get("quarantine_reasons", {}).items()):
        lines.append(f"  quarantined {n}: {safe(reason, 200)}")
    gaps = [w for w in result["worst"] if w["success_rate"] < 1]
    lines.append("worst gaps:" if gaps else "no gaps: every endpoint reachable from every vantage")
    for w in gaps:
        # Names come from reports, i.e. from brokers and hosts: escaped, never raw terminal input.
        who = "bootstrap" if w["node_id"] == BOOTSTRAP_NODE else f"broker {w['node_id']}"
        lines.append(f"  {succeeded(w['success_rate'], w['probes'])}  cluster {safe(w['cluster_id'], 80)} {who} "
                     f"{safe(w['host'], 120)}:{w['port']} from {safe(w['vantage'], 80)} "
                     f"(last {safe(w['last_status'], 40)})")
    return lines


def succeeded(rate: float, probes: int) -> str:
    """A gap's figure in report.html's words (a cell's "N/M probes succeeded", its `success` column):
    `  0.0% of 5 probes succeeded`, so the number says what it counts.

    A rate strictly between 0 and 1 shows as 0.1 % to 99.9 %, as on the page: 999 of 1,000 probes is a gap,
    never "100.0%".
    """
    shown = rate * 100 if rate in (0, 1) else min(99.9, max(0.1, rate * 100))
    return f"{shown:5.1f}% of {probes} probe{'' if probes == 1 else 's'} succeeded"
