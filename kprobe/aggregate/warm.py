"""A warm Spark driver kept between scheduled runs of `kprobe aggregate --keep-warm DURATION`.

Why: a run every few minutes otherwise pays a new JVM's cold costs every time (the JVM and the
session started, Catalyst and the generated code interpreted, then compiled), which in a driver that
has run a job before are paid already, a small rerun's most. As Gradle's daemon does for builds,
the first run with --keep-warm starts a driver process of its own that outlives it, and the later
ones hand it their job over a Unix socket and print what it answers. It exits after DURATION without
a job, and a scheduler's next run starts another.

What does not change: every run is still a process the scheduler starts and waits for, with the
same lines, exit codes and outputs, because the driver runs the same `job.run` on the same options.
The state's guarantees are the job's own: a run whose caller goes away (killed, Ctrl-C) has its
Spark jobs cancelled, so it fails and cleans up as a killed process's run would, or, past its
commit, counts once. A run with nothing new never gets here (`plan.survey` answers first).

Who may use a driver: the same user (the socket's directory is theirs alone, mode 0700, and the
driver checks its peer's uid), with the same kprobe, Python, Java and Spark settings (all in the
socket's name, `_key`), so a driver never runs a job with other code or other settings than the
run that asked would have.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kprobe.aggregate.checks import is_local
from kprobe.aggregate.jvm import LOGS_KEPT
from kprobe.aggregate.plan import JobOptions, local_path
from kprobe.errors import KprobeError
from kprobe.private import private_dir

# How long a run waits for a driver it started to listen (a Python start and kprobe's imports: well under
# a second; the JVM starts with the first job), and between two lines of one that runs its job (the
# driver says it is alive every HEARTBEAT seconds, so a driver stopped or wedged is not waited for forever).
START_WAIT = 20.0
HEARTBEAT = 5.0
SILENCE = 60.0
# A driver retires once it is this old (after the job it is running, if one is), and the next run starts a new
# one: a schedule every few minutes would otherwise keep one driver (its JVM, Spark's scratch directories under
# /tmp, its ports on loopback) for weeks. Its idle wait never reaches past it either.
MAX_AGE = 12 * 3600.0
# The longest line either side reads: a request (the options), a progress line, the summary (ten gaps). A
# longer one is not the other side's: the connection is dropped rather than read without end.
LINE_MAX = 1 << 20
# Environment that changes how the driver's session starts or what its job does: a run with other values
# gets a driver of its own (part of `_key`).
_ENVIRONMENT = ("JAVA_HOME", "SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "PYSPARK_PYTHON",
                "KPROBE_CACHE_DIR", "KPROBE_SPARK_DRIVER_MEMORY", "KPROBE_SHUFFLE_PARTITIONS",
                "KPROBE_SPARK_LOG_LEVEL", "SPARK_LOCAL_IP", "PATH", "TZ")


def can_serve(options: JobOptions, verbose: bool) -> bool:
    """Whether a run may go to a warm driver: a local master, local paths, Spark's lines not wanted here.

    A cluster's driver would hold the cluster's executors between runs; `--verbose` wants the JVM's
    own output on the caller's terminal, which a driver started earlier cannot give; and s3a or hdfs
    paths are read with credentials from the environment, which Hadoop's file systems keep from their
    first use: a driver started hours ago would read with the credentials of then.
    """
    master = options.master or ""
    paths = [*options.inputs, options.out, *([options.state] if options.state else [])]
    return (master.startswith("local") and not verbose and "PYSPARK_GATEWAY_PORT" not in os.environ
            and all(is_local(p) for p in paths))


def run(options: JobOptions, light: bool, keep_warm: float, busy: bool = False) -> tuple[list[str], bool] | None:
    """The run's summary lines as a warm driver answers them, and whether they say nothing was new; the driver
    is started if there is none.

    `busy`: the state was held by another run when this one looked (`plan.survey`), so whether there is
    anything to do is not known yet: the driver looks once it is this run's turn.

    None when no driver can be had (no private directory for its socket, or it did not start within
    START_WAIT): the caller then runs the job itself, after one line saying why. A job that fails in the
    driver raises its own one-line error here, with its exit code.
    """
    try:
        folder = _socket_dir()
    except OSError as exc:
        _note(f"no warm driver ({exc}); running the job in this process")
        return None
    key = _key(options)
    path = folder / f"{key}.sock"
    request = {"options": _portable(options), "light": light, "keep_warm": keep_warm, "busy": busy}
    for _ in range(2):  # a second time if the driver was stopping as this run connected (its idle time ran out)
        conn = _connect(path) or _connect(path, wait=START_WAIT, starting=_start(folder, key, keep_warm))
        if conn is None:
            _note(f"the warm driver did not start (its log: {_log_path(key)}); running the job in this process")
            return None
        with conn:
            answer = _ask(conn, request)
        if answer is not None:
            return answer
    raise KprobeError(f"the warm driver closed the connection before taking the job (its log: {_log_path(key)}); "
                      "run again, or without --keep-warm")


def _note(text: str) -> None:
    sys.stderr.write(f"kprobe: {text}\n")
    sys.stderr.flush()


# A Unix socket's path has at most 107 bytes (108 with its NUL); a socket here is KEY.sock, 24 hex digits.
SOCKET_PATH_MAX = 107
_SOCKET_NAME = len("/" + "0" * 24 + ".sock")


def _socket_dir() -> Path:
    """The directory of this user's driver sockets: theirs alone (`private.private_dir`: 0700, refused if anyone
    else could use it, or if it is a link).

    `$XDG_RUNTIME_DIR/kprobe-UID` when there is one; else `kprobe`'s cache, `warm-UID` under it, rather
    than the temp directory, where another user could make `kprobe-UID` first and so send every warm run
    of a schedule (cron sets no XDG_RUNTIME_DIR) to a cold one. The first of these whose socket paths fit
    a Unix socket's limit is the one; the temp directory only when neither does. The same choice in every
    run of one environment, so that each finds the driver the one before it started.
    """
    from kprobe.paths import cache_root

    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR") or ""
    candidates = [Path(runtime, f"kprobe-{uid}")] if runtime else []
    candidates += [cache_root() / f"warm-{uid}", Path(tempfile.gettempdir(), f"kprobe-{uid}")]
    folder = next((c for c in candidates if len(os.fsencode(c)) + _SOCKET_NAME <= SOCKET_PATH_MAX), candidates[-1])
    if folder.parent == cache_root():
        folder.parent.mkdir(parents=True, exist_ok=True)  # the cache's own, as its other users make it
    return private_dir(folder)


def _key(options: JobOptions) -> str:
    """What a driver must share with the run that asks it: kprobe's code, Python, Spark's settings.

    kprobe's code by its files' names, sizes and modification times (a `pip install` of another version
    or an edited checkout changes them), so a driver never runs older code than the caller would.
    """
    import importlib.metadata
    import shutil

    package = Path(__file__).resolve().parents[1]
    code = sorted((str(p.relative_to(package)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    try:
        pyspark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        pyspark = "none"
    facts = [code, sys.executable, sys.version, pyspark, shutil.which("java"), options.master, bool(options.kafka),
             {name: os.environ.get(name) for name in _ENVIRONMENT}]
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


def _portable(options: JobOptions) -> dict[str, Any]:
    """The options as the driver must take them: local paths absolute (its working directory is not the
    caller's, nor is its JVM's), and whether to show progress decided here, where the terminal is.
    """
    def absolute(path: str) -> str:
        return str(local_path(path)) if is_local(path) else path

    return {"inputs": [absolute(i) for i in options.inputs], "out": absolute(options.out),
            "master": options.master, "since": options.since, "until": options.until, "html": options.html,
            "kafka": [list(k) for k in options.kafka], "full": options.full,
            "state": absolute(options.state) if options.state else None,
            "progress": sys.stderr.isatty() if options.progress is None else options.progress}


def _log_path(key: str) -> Path:
    from kprobe.paths import cache_root

    return cache_root() / "aggregate" / f"warm-{key}.log"


def _connect(path: Path, wait: float = 0.0, starting: subprocess.Popen[bytes] | None = None) -> socket.socket | None:
    """A connection to the driver listening at `path`, trying for `wait` seconds; None if none listens.

    `starting`: the driver this run started; failed (it exits 0 only when another driver has the socket),
    it is not waited for.
    """
    deadline = time.monotonic() + wait
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(5)
            conn.connect(str(path))
            return conn
        except OSError:
            conn.close()
            if time.monotonic() >= deadline or (starting is not None and starting.poll() not in (None, 0)):
                return None
            time.sleep(0.05)


def _start(folder: Path, key: str, keep_warm: float) -> subprocess.Popen[bytes]:
    """A new driver process, of its own session (the caller's end, or its terminal's, does not end it)."""
    log = _log_path(key)
    log.parent.mkdir(parents=True, exist_ok=True)
    # One log per key (kprobe's files, Python, Spark's settings): each upgrade starts another. The newest few
    # are kept, as many as of the JVMs' logs.
    with contextlib.suppress(OSError):
        for old in sorted(log.parent.glob("warm-*.log"), key=lambda p: p.stat().st_mtime)[:-LOGS_KEPT]:
            if old != log:
                old.unlink(missing_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "kprobe.aggregate.warm", str(folder / f"{key}.sock"),
                                 str(keep_warm)], stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd="/",
                                start_new_session=True, close_fds=True)


def _ask(conn: socket.socket, request: dict[str, Any]) -> tuple[list[str], bool] | None:
    """Send the job, relay what the driver writes on stderr, return its summary; None if it never took the job."""
    conn.settimeout(SILENCE)
    taken = False
    reader = conn.makefile("rb")
    try:
        conn.sendall(json.dumps(request).encode() + b"\n")
        for raw in iter(lambda: reader.readline(LINE_MAX), b""):
            if not raw.endswith(b"\n"):
                raise ValueError(f"a line of over {LINE_MAX} bytes, or cut short")
            message = json.loads(raw)
            if "taken" in message:
                taken = True
            elif "stderr" in message:
                sys.stderr.write(message["stderr"])
                sys.stderr.flush()
            elif "lines" in message:
                return [str(line) for line in message["lines"]], bool(message.get("current"))
            elif "error" in message:
                error = KprobeError(str(message["error"]))
                error.exit_code = int(message.get("code", 1))
                raise error
    except TimeoutError:
        raise KprobeError(f"the warm driver said nothing for {SILENCE:.0f} s; the run's outcome is unknown: "
                          "run again (a run the driver finished counts once)") from None
    except (OSError, ValueError) as exc:
        if not taken:
            return None
        raise KprobeError(f"the warm driver stopped during the run ({exc}); run again "
                          "(a run it did not commit left nothing behind)") from None
    finally:
        reader.close()
    if not taken:
        return None
    raise KprobeError("the warm driver stopped during the run; run again (a run it did not commit left nothing behind)")


# The driver's side.

class _ClientGone(Exception):
    """The run that handed over the job went away (killed, interrupted): its job is cancelled."""


class _Caller:
    """One run waiting for its job or running it: JSON lines out (under a lock: a heartbeat thread writes
    too), and `gone` once its end of the socket closes.
    """

    def __init__(self, conn: socket.socket, options: JobOptions, light: bool, keep_warm: float,
                 busy: bool = False, pid: int = 0) -> None:
        self.conn, self.options, self.light, self.keep_warm, self.busy = conn, options, light, keep_warm, busy
        self.pid = pid
        self.lock = threading.Lock()
        self.gone = threading.Event()
        self.running = threading.Event()
        self.finished = threading.Event()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        with self.lock:
            try:
                self.conn.sendall(data)
            except OSError:
                self.gone.set()
                raise _ClientGone() from None

    def close(self) -> None:
        self.finished.set()
        with contextlib.suppress(OSError):
            self.conn.close()


class _Relay:
    """sys.stderr while a job runs (one at a time): its progress lines go to the caller's terminal."""

    def __init__(self, caller: _Caller) -> None:
        self.caller = caller

    def write(self, text: str) -> int:
        if text:
            self.caller.send({"stderr": text})
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


class _Driver:
    """The jobs handed over, taken one at a time by the main thread; the session, made by the first."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[_Caller] = queue.Queue()
        self.lock = threading.Lock()
        self.closing = False
        self.spark: Any = None

    def offer(self, caller: _Caller) -> bool:
        with self.lock:
            if self.closing:
                return False
            self.jobs.put(caller)
            return True

    def close(self) -> list[_Caller]:
        """No more jobs: those still waiting are returned (their callers start a driver of their own)."""
        with self.lock:
            self.closing = True
            waiting = []
            while not self.jobs.empty():
                waiting.append(self.jobs.get_nowait())
            return waiting


def serve(path: Path, keep_warm: float) -> None:
    """Take jobs on `path` one at a time until `keep_warm` seconds pass without one; then stop the session.

    One driver per socket: the lock beside it is held for the driver's life, so two runs that start a
    driver at once end with one (the other exits at once). The socket is removed, and the lock released,
    before the session stops: a run arriving then starts a new driver rather than wait for this one.
    Runs that come while a job runs wait their turn, told it is alive every HEARTBEAT seconds; one that
    found its state held (`busy`) looks at it again when its turn comes (`_job`). Past
    MAX_AGE, idle or once its job is done, the driver takes no more jobs; those waiting are closed, and
    their runs start a new driver.
    """
    lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return
    path.unlink(missing_ok=True)  # a driver killed before it could remove it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(16)
    driver = _Driver()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    threading.Thread(target=_accept, args=(listener, driver), daemon=True).start()
    born = time.monotonic()
    try:
        while (left := MAX_AGE - (time.monotonic() - born)) > 0:
            try:
                caller = driver.jobs.get(timeout=_idle(keep_warm, left))
            except queue.Empty:
                break
            keep_warm = caller.keep_warm
            try:
                if not caller.gone.is_set() and not _serve_one(caller, driver):
                    break
            finally:
                caller.close()
    finally:
        path.unlink(missing_ok=True)
        listener.close()
        for caller in driver.close():
            caller.close()
        os.close(lock)
        _stop(driver)


def _idle(keep_warm: float, left: float) -> float:
    """How long to wait for the next job: `keep_warm` seconds, never past the driver's MAX_AGE (`left` of it).

    Defensive, as the flag's parser and `_receive` refuse such values already: a NaN would have the queue
    wait forever, a negative one raise ValueError and stop the driver mid-life, so either means no wait.
    """
    if not math.isfinite(keep_warm) or keep_warm <= 0:
        return 0.0
    return min(keep_warm, left)


def _accept(listener: socket.socket, driver: _Driver) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # closed: the driver is stopping
            return
        threading.Thread(target=_receive, args=(conn, driver), daemon=True).start()


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The caller's pid and uid, as the kernel gives them."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    return int(pid), int(uid)


def _receive(conn: socket.socket, driver: _Driver) -> None:
    """Read one caller's request and queue it; anything else (another user, a malformed line) is closed.

    Whatever the line holds, this thread ends with the connection closed: a request nested thousands
    deep (RecursionError from the JSON parser), one of the wrong shape, or an idle time that is not a
    positive number of seconds (JSON's NaN and Infinity parse, and would stall or stop the driver).
    """
    try:
        pid, uid = _peer(conn)
        if uid != os.getuid():
            raise ValueError("another user")
        conn.settimeout(10)
        with conn.makefile("rb") as reader:
            line = reader.readline(LINE_MAX)
        if not line.endswith(b"\n"):
            raise ValueError("not one line of a request")
        request = json.loads(line)
        fields = request["options"]
        options = JobOptions(**{**fields, "inputs": tuple(fields["inputs"]),
                                "kafka": tuple(tuple(k) for k in fields["kafka"])})
        keep_warm = float(request["keep_warm"])
        if not math.isfinite(keep_warm) or keep_warm <= 0:
            raise ValueError("an idle time that is not a positive number of seconds")
        caller = _Caller(conn, options, bool(request["light"]), keep_warm, bool(request.get("busy")), pid)
        conn.settimeout(None)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        conn.close()
        return
    if not driver.offer(caller):
        caller.close()
        return
    _watch(caller, driver)


def _watch(caller: _Caller, driver: _Driver) -> None:
    """Until the caller's job ends: a heartbeat to it; once it is gone, its Spark jobs cancelled.

    Cancelled again and again while it runs: Spark cancels only the jobs running when it is asked,
    and the run goes on to plan its next one, until one fails and the run unwinds.
    """
    last = time.monotonic()
    while not caller.finished.is_set():
        if not caller.gone.is_set():
            try:
                readable, _, _ = select.select([caller.conn], [], [], 0)
                if readable and caller.conn.recv(1) == b"":
                    caller.gone.set()
            except (OSError, ValueError):
                caller.gone.set()
        if caller.gone.is_set():
            if caller.running.is_set() and driver.spark is not None:
                with contextlib.suppress(Exception):
                    driver.spark.sparkContext.cancelAllJobs()
        elif time.monotonic() - last >= HEARTBEAT:
            with contextlib.suppress(_ClientGone):
                caller.send({"alive": 1})
            last = time.monotonic()
        caller.finished.wait(0.1)


def _serve_one(caller: _Caller, driver: _Driver) -> bool:
    """One caller's job; returns whether the session is still good for more."""
    try:
        caller.send({"taken": os.getpid()})
    except _ClientGone:
        return True
    healthy = True
    saved = sys.stderr
    sys.stderr = _Relay(caller)
    caller.running.set()
    started, outcome = time.monotonic(), "done"
    try:
        lines, current = _job(driver, caller.options, caller.light, caller.busy)
        outcome = "nothing new" if current else "done"
        caller.send({"lines": lines, "current": current})
    except _ClientGone:
        outcome = "its caller went away: cancelled"
    except KprobeError as exc:
        outcome = f"failed: {exc}"
        with contextlib.suppress(_ClientGone):
            caller.send({"error": str(exc), "code": exc.exit_code})
    except Exception as exc:  # a bug, or a session that broke: say so, and let the next run start anew
        healthy = False
        outcome = f"failed: {type(exc).__name__}: {exc}"
        import traceback

        traceback.print_exc(file=saved)
        with contextlib.suppress(_ClientGone):
            caller.send({"error": f"the warm driver failed: {type(exc).__name__}: {exc}", "code": 3})
    finally:
        caller.running.clear()
        sys.stderr = saved
        if caller.gone.is_set() and outcome != "its caller went away: cancelled":
            outcome = f"its caller went away ({outcome})"
        # The driver's own log (warm-KEY.log): one line a job, what a later look at a schedule needs.
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} job of pid {caller.pid} on {caller.options.out}: {outcome} "
              f"in {time.monotonic() - started:.1f} s", file=saved, flush=True)
    return healthy and _alive(driver)


def _job(driver: _Driver, options: JobOptions, light: bool, busy: bool) -> tuple[list[str], bool]:
    """The run itself, on the session this driver started with its first job (its JVM as that job's size chose).

    `busy`: the caller found the state held (by the job before this one, as a rule), so it could not
    tell whether there is anything new: the look it could not take is taken here, first.
    """
    from kprobe.aggregate.plan import summary_lines, survey

    if busy:
        line, _ = survey(options)
        if line is not None:
            return [line], True
    from kprobe.aggregate.job import run, session

    if driver.spark is None:
        # Authenticated: its ports stay open on loopback for as long as the driver lives (MAX_AGE).
        driver.spark = session(options.master, kafka=bool(options.kafka), light=light, authenticate=True)
    spark = driver.spark
    try:
        return summary_lines(run(spark, options)), False
    finally:
        spark.catalog.clearCache()


def _alive(driver: _Driver) -> bool:
    if driver.spark is None:
        return True
    try:
        return not driver.spark.sparkContext._jsc.sc().isStopped()
    except Exception:
        return False


def _stop(driver: _Driver) -> None:
    """The session stopped, and its JVM gone before this process is: a stopped driver leaves nothing running."""
    spark = driver.spark
    if spark is None:
        return
    from kprobe.aggregate.jvm import keep_archive, let_driver_exit

    with contextlib.suppress(Exception):
        spark.stop()
    keep_archive()  # the JVM writes its class-data archive as it exits, if it was to write one
    let_driver_exit(30)  # and exits before this process does, whether it wrote one or not


def main(argv: list[str]) -> int:
    """`python -m kprobe.aggregate.warm SOCKET KEEP_WARM`, as `run` starts it."""
    serve(Path(argv[0]), float(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
