"""The Spark session of `kprobe aggregate`, its JVM's options and log, and Spark's failures as one line.

Apart from the job because they are a job of their own: the driver JVM's flags, a quiet JVM (its output
on a log file kept under kprobe's cache, named in any failure), and the translation of Java stack traces
and PySpark's exceptions into kprobe's one-line errors, for the session's start and for the job.
Importing this module imports no PySpark (the functions that need it import it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kprobe.errors import KprobeError, UsageError
from kprobe.paths import cache_root, class_archive, put_archive, remove_stray_dumps
from kprobe.sanitize import safe

if TYPE_CHECKING:
    from py4j.protocol import Py4JError
    from pyspark.sql import SparkSession

# Log files of quiet runs kept under kprobe's cache (see `session`): enough to look back at the
# last few failures, few enough that scheduled runs do not fill the disk.
LOGS_KEPT = 20
_jvm_log: Path | None = None


EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

# The driver JVM's options for a run whose work is small (entry.LIGHT_BELOW). A run of kprobe aggregate is a
# short-lived process, and C2's compiler threads and G1's collector threads are mostly start-up cost for it,
# competing with the work for a few cores. C1 alone gets a smaller code cache than tiered compilation, one a
# light run's compiled methods can fill; a full cache stops the compiler and then fails the JVM's next adapter
# ("Out of space in CodeCache for adapters"), which stops Spark's context: hence the tiered size, reserved, not
# committed. The suite's Spark JVMs take these too (tests/conftest.py), which is why this module imports
# PySpark only where a function needs it.
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"

# The driver JVM's options for a run whose new input is large (entry.LIGHT_BELOW and over), where C2's code
# pays for itself: tiered compilation, with C2 kept for the methods that stay hot. At its defaults C2's one
# thread spends a core for most of a first run compiling the long generated methods of Spark's plans, most of
# them hot only for a while; higher thresholds leave those to C1.
#
# Spark's generated classes (Janino's, new in every process) get C1's code and never C2's: C2 gives up on them
# under a node limit at once, and the JVM compiles a method C2 cannot take at C1's level without profiling,
# rather than leave methods that each run over one run's data in C1's slower, profiling code waiting for C2.
# Methods over 8,000 bytes of byte code are compiled too: the JVM otherwise interprets them whatever runs
# them, and the parse's projection of every report (flatten.flat_records) is one.
#
# C2 inlines less (a callee of up to 100 bytes of byte code where it runs often, not 325; none already compiled
# to more than 1,000 bytes of machine code, not 2,500): C2's time grows faster than the code it compiles, and
# its thread takes a core from the tasks while it compiles.
#
# And the parallel collector, not G1: a batch job wants throughput, not short pauses, and G1's write barriers
# and concurrent marking cost the tasks' CPU. Unlike the serial collector, it collects with every core a larger
# machine has. A collector of the user's own (spark-defaults.conf) replaces it (`leaving_theirs`).
GENERATED_CLASSES = "org/apache/spark/sql/catalyst/expressions/GeneratedClass*.*"
HEAVY_JVM = ("-XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=2400 "
             "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=160000 -XX:-DontCompileHugeMethods "
             "-XX:FreqInlineSize=100 -XX:InlineSmallCode=1000 -XX:+UseParallelGC "
             f"-XX:CompileCommand=quiet -XX:CompileCommand=MaxNodeLimit,{GENERATED_CLASSES},2000")


def driver_options(light: bool) -> str:
    """The driver's extraJavaOptions: the user's own (spark-defaults.conf), LIGHT_JVM or HEAVY_JVM less the flags
    theirs set (`leaving_theirs`), the archive.

    One archive for both: a heavy run loads most of the same classes, and not only at start-up. Whichever
    run finds none writes it, once per JDK and Spark on a machine, as its driver exits.
    """
    own = _defaults().get(EXTRA_JAVA_OPTIONS, "")
    return f"{own} {leaving_theirs(LIGHT_JVM if light else HEAVY_JVM, own)} {archive_option()}".strip()


_XX_FLAG = re.compile(r"-XX:[+-]?(\w+)(=.*)?")
# The collectors by name: other flags end in GC too (UseAdaptiveSizePolicyWithSystemGC, ...).
_COLLECTOR = re.compile(r"-XX:\+Use(?:Serial|Parallel|G1|Z|Shenandoah|Epsilon)GC")


def leaving_theirs(ours: str, theirs: str) -> str:
    """The JVM flags of kprobe less those the user's own options set: theirs are the site's choice, and win.

    Of a flag given twice the JVM takes the last, which would be kprobe's; and a collector of ours beside
    one of theirs (`-XX:+UseG1GC` with `-XX:+UseParallelGC`) stops the JVM before Spark starts ("Multiple
    garbage collectors selected"). Compile commands add up, so those of both are kept.
    """
    words = theirs.split()
    named = {m[1] for m in map(_XX_FLAG.fullmatch, words) if m}
    collector = any(_COLLECTOR.fullmatch(w) for w in words)
    kept = []
    for option in ours.split():
        flag = _XX_FLAG.fullmatch(option)
        if flag and flag[1] != "CompileCommand" and (flag[1] in named or (collector and _COLLECTOR.fullmatch(option))):
            continue
        kept.append(option)
    return " ".join(kept)


# The driver maps Spark's classes from a class-data archive (AppCDS) instead of loading and verifying them
# in every process, a heavy run's too (driver_options): loading them is much of a short run's start-up. The
# first run without one writes it as its driver exits (`keep_archive`).
_dump: tuple[Path, Path] | None = None  # (what this process's driver writes as it exits, where it goes)


def _java() -> str | None:
    """The `java` spark-class runs: JAVA_HOME's, else the first on PATH."""
    import shutil

    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def driver_archive() -> Path | None:
    """Where the driver's archive is kept for this JDK and these jars; None without a `java` to name.

    Keyed by the JDK, PySpark's version and its jars, each jar's size and time included
    (kprobe.paths.class_archive), so another Spark, JDK or install gets its own archive. A driver
    whose class path differs from the one the archive was written with (other --jars, a
    SPARK_CONF_DIR) still starts, without it.
    """
    import pyspark

    java = _java()
    if not java:
        return None
    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    try:
        with os.scandir(os.path.join(home, "jars")) as found:
            jars = sorted(jar.path for jar in found)
    except OSError:
        jars = []
    return class_archive("aggregate", "driver", java, pyspark.__version__, home, files=jars)


def archive_option() -> str:
    """The driver's option to map its archive, or to write one as it exits; nothing without a `java`."""
    global _dump
    archive = driver_archive()
    if archive is None:
        return ""
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    remove_stray_dumps(archive.parent, ".driver-*.jsa.*")  # of a run whose session never started, say
    written = archive.with_name(f".{archive.name}.{os.getpid()}")  # renamed whole, never mapped half-written
    _dump = (written, archive)
    return f"-XX:ArchiveClassesAtExit={written}"


def keep_archive(timeout: float = 60) -> bool:
    """After `spark.stop()`: let the driver exit, and put the archive it wrote in place, if it was to write one;
    whether it was (the run's time then includes writing it: kprobe.aggregate.startup).

    PySpark's driver JVM exits when its standard input closes (the Python process ending); it writes
    the archive as it exits, so this closes that input and waits, bounded, then renames the file.
    """
    global _dump
    if _dump is None:
        return False
    (written, archive), _dump = _dump, None
    try:
        if let_driver_exit(timeout) and written.is_file() and written.stat().st_size:
            put_archive(written, archive)
    except OSError:
        pass  # no archive this time; the next run writes one
    finally:
        written.unlink(missing_ok=True)
    return True


def let_driver_exit(timeout: float) -> bool:
    """After `spark.stop()`: close the standard input of the driver JVM this process started, and wait for it
    to exit (PySpark's JVM exits when its input closes), at most `timeout` seconds; whether it did.

    True when this process started no JVM (under spark-submit, say): there is none to wait for.
    """
    from pyspark import SparkContext

    proc = getattr(getattr(SparkContext, "_gateway", None), "proc", None)
    if proc is None:
        return True
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return True


def _defaults() -> dict[str, str]:
    r"""spark-defaults.conf as spark-submit's launcher finds it (SPARK_CONF_DIR, else SPARK_HOME/conf), or nothing.

    SPARK_HOME unset is PySpark's own package (what PySpark sets it to before it starts the launcher).
    Read as Spark reads it: `java.util.Properties.load` (kprobe.clientprops.javaprops follows it rule for
    rule: continuations, `\uXXXX` escapes), then each value trimmed.
    """
    import pyspark

    from kprobe.clientprops.javaprops import parse_java_properties

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(home, "conf")
    path = Path(conf_dir, "spark-defaults.conf")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return {key: value.strip() for key, value in parse_java_properties(text, source=str(path)).items()}


def session(master: str | None, app: str = "kprobe-aggregate", kafka: bool = False,
            verbose: bool = False, light: bool | None = None, authenticate: bool = False) -> SparkSession:
    """A session; under spark-submit the master is already set and `master` is None.

    With `kafka`, the Kafka source's jars are resolved (cached) and put on the session. A local
    driver JVM this call starts gets LIGHT_JVM when `light` is True, HEAVY_JVM when it is False, and
    the JVM's defaults when it is None, or when PYSPARK_SUBMIT_ARGS says how to start it.

    With `authenticate` (a local master), Spark's own ports (the driver's RPC and its block manager, on
    loopback) take only peers that prove they hold the session's secret: a session kept for hours (the
    warm driver) would otherwise take Java-serialized messages and block requests from any local user.

    Quiet unless `verbose`. The JVM that PySpark starts inherits the terminal, and writes its own
    start-up lines (`WARNING: Using incubator modules`, log4j's profile and default-level notes,
    `WARN NativeCodeLoader`) before any log level applies, so no log level hides them. So it is
    started with its stdout and stderr on a log file it keeps for life (`spark_log()`, named in
    any failure), where Spark logs at WARN: the detail behind a failure (an executor's stack
    trace) is kept, off the terminal, where it would bury kprobe's one-line error. With
    `verbose` the JVM writes to the terminal, as Spark's own tools do.
    """
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if kafka:
        import pyspark

        from kprobe.aggregate.kafka_source import connector_jars

        builder = builder.config("spark.jars", ",".join(connector_jars(pyspark.__version__)))
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # One machine: the driver on loopback. Left alone, Spark picks the first non-loopback
        # interface when the hostname maps to 127.0.0.1, sends its own traffic through it, and
        # stalls about 30 s on start-up looking that address up.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
        if not verbose:
            # A scheduled run is a process of its own each time: the web UI (a Jetty server and its
            # listeners, started with the context) is start-up cost that no one looks at.
            builder = builder.config("spark.ui.enabled", "false")
        if authenticate:
            # A local master needs no secret from us: Spark makes one for the session, kept in the JVM
            # (not in its configuration, nor in any log), and its in-process executor holds the same.
            builder = builder.config("spark.authenticate", "true")
        if light is not None and "PYSPARK_SUBMIT_ARGS" not in os.environ and _starts_jvm():
            # spark-submit's launcher builds the driver's command line from this in client mode; a
            # --conf replaces spark-defaults.conf's value, so the user's options are kept in it.
            builder = builder.config(EXTRA_JAVA_OPTIONS, driver_options(light))
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", os.environ.get("KPROBE_SPARK_DRIVER_MEMORY", "2g"))
               .config("spark.ui.showConsoleProgress", "false")
               # PySpark 4 otherwise records the Python call site of every column function in the JVM
               # (three or four gateway calls each, a few thousand per run) for a failure's context,
               # which kprobe does not show (see below: its own one line instead).
               .config("spark.python.sql.dataFrameDebugging.enabled", "false")
               .config("spark.sql.shuffle.partitions", os.environ.get("KPROBE_SHUFFLE_PARTITIONS", "8")))
    global _jvm_log
    log = None if verbose or not _starts_jvm() else _new_log()
    try:
        with _jvm_output_to(log):
            if log is not None:
                _jvm_log = log
            spark = builder.getOrCreate()
    except PySparkException as exc:  # the JVM exited at once (a bad memory size or master, broken Java)
        cause = _log_cause(log) if log is not None else None
        raise KprobeError(f"Spark did not start: {cause or _first_line(str(exc))}{_log_hint()}") from None
    except Py4JError as exc:  # the JVM started, the SparkContext did not (its driver could not bind, ...)
        raise KprobeError(f"Spark did not start: {_java_cause(exc)}{_log_hint()}") from None
    # Where Spark's lines go to the terminal (spark-submit's own JVM, or no log file could be
    # made) they are off, so they cannot bury the one-line error; into a log file (or with
    # `verbose`) they come at WARN. KPROBE_SPARK_LOG_LEVEL chooses either way.
    default = "WARN" if verbose or _jvm_log is not None else "OFF"
    spark.sparkContext.setLogLevel(os.environ.get("KPROBE_SPARK_LOG_LEVEL", default))
    if not verbose:
        try:
            from pyspark.logger import PySparkLogger
        except ImportError:  # PySpark 3.5: no such loggers
            return spark
        # PySpark logs a failed query's context itself (as JSON on Python's stderr, the terminal).
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).disabled = True
    return spark


def spark_log() -> Path | None:
    """The log file of the JVM that `session` started quietly in this process, if it did."""
    return _jvm_log


def _log_hint() -> str:
    return f" (Spark's log: {_jvm_log})" if _jvm_log is not None else ""


# What a JVM that starts writes before it fails, none of it the reason: Java's and log4j's
# notices, Spark's timestamped log lines, stack frames.
_NOISE = re.compile(r"WARNING: Using incubator modules|Using Spark's default log4j profile|Setting default log level"
                    r"|To adjust logging level|\d\d/\d\d/\d\d \d\d:\d\d:\d\d |\s|Error: A fatal exception")


def _log_cause(log: Path) -> str | None:
    """The first line of a JVM's log that says why it stopped (`Invalid maximum heap size`, ...).

    Only for a JVM that exited before PySpark could reach it: PySpark then knows nothing more
    than that it exited, and the reason is in the log, which a quiet run keeps off the terminal.
    """
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    line = next((t for t in lines if t.strip() and not _NOISE.match(t)), None)
    return safe(line.removeprefix('Exception in thread "main" '), 300) if line else None


def _starts_jvm() -> bool:
    """Whether getOrCreate will launch a JVM: not under spark-submit, not a second session."""
    from pyspark import SparkContext

    # `_gateway` is PySpark's handle on the JVM it launched, kept across sessions of one
    # process; should it ever be renamed, a log file is made that stays empty, no more.
    return "PYSPARK_GATEWAY_PORT" not in os.environ and getattr(SparkContext, "_gateway", None) is None


def _new_log() -> Path | None:
    """A new log file for this run's JVM under kprobe's cache (else the temp dir); older ones pruned.

    One file per run: parallel runs (tests, two terminals) must not write into one another's. Made by
    `mkstemp` (a name of its own, created with O_EXCL, never through a link, mode 0600) in either place:
    a name another user could guess in the temp directory, or one planted in a cache shared with
    others, would let a link there turn this run's writes onto a file of their choosing.
    """
    prefix = f"spark-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-"
    mine = cache_root() / "aggregate"
    for folder, name in ((mine, prefix), (Path(tempfile.gettempdir()), f"kprobe-{prefix}")):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, made = tempfile.mkstemp(prefix=name, suffix=".log", dir=folder)
        except OSError:
            continue
        os.close(fd)
        if folder == mine:
            for old in sorted(mine.glob("spark-*.log"))[:-LOGS_KEPT]:
                old.unlink(missing_ok=True)
        return Path(made)
    return None  # nowhere to write: the JVM's lines reach the terminal, as with `verbose`


@contextmanager
def _jvm_output_to(log: Path | None) -> Iterator[None]:
    """File descriptors 1 and 2 on `log` inside the block, Python's own again after it.

    A child started inside (PySpark's gateway JVM, through spark-submit) inherits the file as
    its stdout and stderr and keeps it. Whatever Python itself wrote meanwhile would land in the
    log too; getOrCreate writes nothing. Why not PySpark's `launch_gateway(popen_kwargs=...)`:
    it means building the SparkContext by hand, around the builder, on PySpark internals.
    """
    if log is None:
        yield
        return
    _flush()
    # Not through a link: the file `_new_log` made is opened again, and a link put in its place since
    # would send the JVM's output to another file. Refused in one line, as a log that cannot be written.
    try:
        target = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise KprobeError(f"cannot write Spark's log {log}: {exc.strerror}: remove it and run again") from None
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        _flush()  # what Python wrote inside goes to the log now, not to the terminal later
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (target, *saved):
            os.close(fd)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()




@contextmanager
def spark_errors(out: str, state: Path | None = None) -> Iterator[None]:
    """Spark's failures (a Java stack trace) as one line that names the cause, and the log with the rest.

    A file of the state that Spark cannot read (truncated, deleted by hand) is a damaged state:
    one line and exit 2, like a damaged manifest, never a partial result.
    """
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except PySparkException as exc:
        condition = exc.getCondition() or ""
        text = _first_line(str(exc))
        if condition.startswith("PATH_NOT_FOUND") and not (state and str(state) in str(exc)):
            raise UsageError(f"cannot read the input: {text}; give report files or directories") from None
        if state and str(state) in str(exc):
            raise UsageError(f"the state in {state} is unreadable ({text}): run with --full to rebuild it from "
                             f"the inputs{_log_hint()}") from None
        raise KprobeError(f"the Spark job failed: {text}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None
    except Py4JError as exc:
        cause = _java_cause(exc)
        if state and str(state) in str(exc):
            raise UsageError(f"the state in {state} is unreadable ({cause}): run with --full to rebuild it from "
                             f"the inputs{_log_hint()}") from None
        raise KprobeError(f"the Spark job failed: {cause}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None




def _first_line(text: str, limit: int = 300) -> str:
    line = next((t.strip() for t in text.splitlines() if t.strip()), "unknown error")
    return safe(line, limit)


def _java_cause(exc: Py4JError) -> str:
    """The Spark error's headline and its root cause, without the stack frames."""
    lines = [t.strip() for t in str(exc).splitlines()]
    head = next((t.removeprefix(": ") for t in lines if t.startswith(": ")), lines[0] if lines else "")
    causes = [t.removeprefix("Caused by: ") for t in lines if t.startswith("Caused by: ")]
    text = head + (f" (caused by {causes[-1]})" if causes and causes[-1] not in head else "")
    return safe(text or "unknown error", 400)




