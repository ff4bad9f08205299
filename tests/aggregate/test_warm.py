"""kprobe aggregate --keep-warm: the runs of a schedule handed to one warm driver, and the driver's guards."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from aggregate_runs import command_line, descendants, state_json  # noqa: E402

from kprobe.aggregate.job import JobOptions  # noqa: E402

# --- A warm driver (--keep-warm): the runs of a schedule handed to one driver process. ---

def warm_drivers(runtime: Path) -> list[int]:
    """The warm drivers whose sockets are under `runtime`, by pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            args = command_line(int(entry.name))
            if "kprobe.aggregate.warm" in args and any(a.startswith(str(runtime)) for a in args):
                found.append(int(entry.name))
    return found


def listening_ports(pid: int) -> list[int]:
    """The TCP ports process `pid` listens on: its sockets (/proc/PID/fd) found listening in /proc/PID/net/tcp*."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    ports = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def spark_request(port: int, body: bytes) -> tuple[int, bytes] | None:
    """What a Spark transport server on 127.0.0.1:`port` answers one RpcRequest carrying `body`, sent as any
    local user could, with no authentication: (message type, message), or None when no Spark frame answers
    (another protocol's port: Py4J's)."""
    import socket
    import struct

    frame = struct.pack(">qbqi", 8 + 1 + 8 + 4 + len(body), 3, 42, len(body)) + body  # 3: RpcRequest, id 42
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
        conn.sendall(frame)
        with contextlib.suppress(OSError):
            while len(data) < 8 or len(data) < struct.unpack(">q", data[:8])[0]:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
    if len(data) < 9 or len(data) != struct.unpack(">q", data[:8])[0]:
        return None
    return data[8], data[9:]


def unauthenticated_spark_answers(pid: int) -> dict[int, list[tuple[int, bytes]]]:
    """What each Spark port of the JVM `pid` answers to two requests of a local user without the secret.

    To the driver's RPC: a message to its `endpoint-verifier` whose content is a Java-serialized string
    (Spark deserializes a message's content, and answers in a Java-serialized RpcResponse). To the block
    manager: OpenBlocks of a block that does not exist (Spark looks it up, and answers it is not found).
    """
    import struct

    def utf(text: str) -> bytes:
        return struct.pack(">H", len(text)) + text.encode()

    def string(text: str) -> bytes:
        return struct.pack(">i", len(text)) + text.encode()

    answers = {}
    for port in listening_ports(pid):
        rpc = (b"\x00" + b"\x01" + utf("127.0.0.1") + struct.pack(">i", port) + utf("endpoint-verifier")
               + b"\xac\xed\x00\x05\x74" + utf("kprobe-probe"))
        open_blocks = b"\x00" + string("app") + string("driver") + struct.pack(">i", 1) + string("rdd_999_0")
        replies = [spark_request(port, rpc), spark_request(port, open_blocks)]
        if any(replies):
            answers[port] = [r for r in replies if r is not None]
    return answers


def watched(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str], int]:
    """A run as its own process, the names of every process seen below it while it ran, and its pid."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    while proc.poll() is None:
        seen |= set(descendants(proc.pid).values())
        time.sleep(0.01)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), seen, proc.pid


@pytest.mark.lab  # a JVM of its own
def test_a_warm_driver_takes_the_next_runs_and_cancels_a_killed_one(tmp_path):
    """`kprobe aggregate --keep-warm`, as a schedule runs it: every run a process of its own.

    1. The first run starts a driver (a process of its own session, its socket 0600 in a 0700 directory)
       and prints what a run prints. A caller that sends garbage is closed and the driver goes on. Its
       JVM's ports on loopback refuse a peer that does not authenticate (spark.authenticate).
    2. The next run, interrupted (Ctrl-C) after its records are written, says so in one line, and the
       driver cancels its job, which leaves nothing committed, and goes on.
    3. The rerun counts every record once (that a driver's runs equal a full run is the job's own: the same
       `job.run`, test_incremental_run_equals_a_full_run). A run started while the rerun's job holds the
       state waits its turn in the driver (no process of its own below it: no JVM; PySpark not imported),
       which then finds nothing new (its log says so, by the run's pid). It asks for 1 s of idle time: the
       driver stops after it, its socket and its JVM gone.
    """
    import fcntl
    import signal
    import socket
    import tempfile

    from kprobe.aggregate.generate import reports, write_jsonl
    from kprobe.aggregate.jvm import LIGHT_JVM
    from kprobe.aggregate.warm import LINE_MAX

    runtime = Path(tempfile.mkdtemp(prefix="kw-"))  # short: a Unix socket's path has at most 107 bytes
    # The driver runs as the suite's own session does (interpreted, two shuffle partitions: a few dozen
    # reports), since what is proved here is how runs reach it, not Spark's generated code.
    submit = (f"--driver-java-options '{LIGHT_JVM}' --conf spark.sql.codegen.wholeStage=false "
              "--conf spark.sql.codegen.factoryMode=NO_CODEGEN pyspark-shell")
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "KPROBE_CACHE_DIR": str(tmp_path / "cache"),
           "PYSPARK_SUBMIT_ARGS": submit, "KPROBE_SHUFFLE_PARTITIONS": "2"}
    inputs, out = tmp_path / "in", tmp_path / "out"
    items = list(reports(vantages=2, clusters=2, hours=2, every_s=600))
    third = len(items) // 3
    argv = [sys.executable, "-m", "kprobe", "aggregate", str(inputs), "--out", str(out), "--no-html",
            "--keep-warm", "2m"]
    try:
        write_jsonl(inputs / "a", iter(items[:third]), per_file=10)
        first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
        assert first.returncode == 0, first.stderr[-3000:]
        assert first.stdout.startswith(f"{third} records: {third} reports aggregated"), first.stdout
        assert first.stdout.rstrip().endswith(f"outputs in {out}")
        [driver] = warm_drivers(runtime)
        folder = runtime / f"kprobe-{os.getuid()}"
        [sock] = folder.glob("*.sock")
        assert (folder.stat().st_mode & 0o777, sock.stat().st_mode & 0o777) == (0o700, 0o600)
        assert os.getsid(driver) == driver  # its own session: the caller's end does not end it
        jvms = [pid for pid, name in descendants(driver).items() if name == "java"]
        assert jvms, descendants(driver)
        with socket.socket(socket.AF_UNIX) as hostile:
            hostile.connect(str(sock))
            hostile.sendall(b"not json\n")
            hostile.settimeout(10)
            assert hostile.recv(100) == b""  # closed on it
        with socket.socket(socket.AF_UNIX) as endless:  # a line past warm.LINE_MAX is not read to its end:
            endless.connect(str(sock))  # closed at once, not when the driver's 10 s for a request run out
            endless.settimeout(5)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                endless.sendall(b"x" * (LINE_MAX + 1000))
            with contextlib.suppress(ConnectionResetError):
                assert endless.recv(100) == b""
        # Spark's ports on loopback (the driver's RPC, its block manager) answer a local user without the
        # session's secret with a refusal only (RpcFailure, "Expected SaslMessage"): without
        # authentication the driver deserialized the first request's content and answered it, the block
        # manager looked the block up.
        spark_ports = unauthenticated_spark_answers(jvms[0])
        assert len(spark_ports) >= 2, spark_ports
        for port, replies in spark_ports.items():
            assert len(replies) == 2, (port, replies)
            for kind, message in replies:
                assert kind == 5 and b"Expected SaslMessage" in message, (port, kind, message[:300])
        assert warm_drivers(runtime) == [driver]

        write_jsonl(inputs / "b", iter(items[third:2 * third]), per_file=10)
        victim = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        written = out / ".state" / "records" / "run=2" / "_SUCCESS"
        deadline = time.monotonic() + 120
        while not written.exists() and victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        # Seen now, before Ctrl-C: the cancelled job removes them as it unwinds, maybe before the caller's exit.
        records_written = written.exists()
        victim.send_signal(signal.SIGINT)  # Ctrl-C; a SIGKILL closes its end of the socket alike
        assert (victim.wait(timeout=60), victim.communicate()[1]) == (130, "\nkprobe: interrupted\n")
        assert records_written, "the run ended before its records were written"
        lock = os.open(out / ".state" / ".lock", os.O_RDWR)
        try:  # the driver lets go of the state once the cancelled job has unwound
            deadline = time.monotonic() + 60
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the killed run's job still holds the state"
                    time.sleep(0.05)
        finally:
            os.close(lock)
        assert state_json(out)["run"] == 1, "the killed run's job was not cancelled: it committed"
        assert not (out / ".state" / "records" / "run=2").exists()  # removed as the job failed
        assert warm_drivers(runtime) == [driver]

        write_jsonl(inputs / "c", iter(items[2 * third:]), per_file=10)
        rerun = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running = out / ".state" / "records" / "run=2"  # its job holds the state from before it writes here
        deadline = time.monotonic() + 120
        while not running.exists() and rerun.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert running.exists(), "the rerun ended before its job was seen running"
        # Started now, a run finds the state held by that job: it waits its turn in the driver, which then
        # finds nothing new (the rerun read it all). It is the one that asks for 1 s of idle time.
        last, children, pid = watched([sys.executable, "-X", "importtime", *argv[1:-1], "1s"], env)
        stdout, stderr = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, stderr[-3000:]
        assert stdout.startswith(f"{len(items)} records: {len(items)} reports aggregated"), stdout
        assert last.returncode == 0, last.stderr[-3000:]
        assert last.stdout == (f"nothing new: {len(list(inputs.rglob('*.jsonl')))} input files as run 2 left them; "
                               f"the outputs in {out} are current\n")
        [log] = (tmp_path / "cache" / "aggregate").glob("warm-*.log")
        assert f"job of pid {pid} on {out}: nothing new" in log.read_text(), log.read_text()[-2000:]
        assert not children, children  # no JVM, nothing: the driver ran it
        imported = [line.rsplit("|", 1)[-1].strip() for line in last.stderr.splitlines() if line.startswith("import time:")]
        assert not [m for m in imported if m.startswith(("pyspark", "py4j"))], "PySpark imported by the caller"
        counts = json.loads((out / "counts.json").read_text())
        assert (counts["input_records"], counts["reports"], counts["duplicates"], counts["quarantined"]) == (
            len(items), len(items), 0, 0)
        assert counts["observations"] == sum(len(r["endpoints"]) for r in items)
        assert state_json(out)["run"] == 2

        deadline = time.monotonic() + 60
        while warm_drivers(runtime) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not warm_drivers(runtime), "the driver outlived its idle time"
        assert not list(folder.glob("*.sock"))
        assert not [pid for pid in jvms if Path(f"/proc/{pid}").exists()], "its JVM outlived it"
    finally:
        for pid in warm_drivers(runtime):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)


def test_only_local_runs_without_verbose_go_to_a_warm_driver(monkeypatch):
    """A warm driver takes runs on a local master and local paths, Spark's lines not wanted on the terminal;
    the others (a cluster, s3a or hdfs paths whose credentials come from the environment, -v, spark-submit)
    run in their own process."""
    from kprobe.aggregate.warm import can_serve

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    local = JobOptions(("/data/in", "file:///data/more"), "/data/out", state="/data/state")
    assert can_serve(local, verbose=False)
    assert not can_serve(local, verbose=True)
    assert not can_serve(JobOptions(("/data/in",), "/data/out", master="spark://127.0.0.1:7077"), verbose=False)
    assert not can_serve(JobOptions(("s3a://bucket/in",), "/data/out"), verbose=False)
    assert not can_serve(JobOptions(("/data/in",), "/data/out", state="hdfs://nn/state"), verbose=False)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert not can_serve(local, verbose=False)


def test_a_socket_directory_others_could_write_is_not_used(tmp_path, monkeypatch, capsys):
    """The warm driver's socket lives in a directory of the user's alone: one that others could write (or a
    link) is refused, in one line, and the run goes on in its own process. A runtime directory too long for
    a socket's path gives way to the cache's, and that, too long as well, to the temp directory."""
    import tempfile

    from kprobe.aggregate import warm

    short = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 80)))
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(short / "cache"))
    assert warm._socket_dir() == short / "cache" / f"warm-{os.getuid()}"
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / ("c" * 80)))
    assert warm._socket_dir() == short / f"kprobe-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short))
    folder = short / f"kprobe-{os.getuid()}"
    folder.rmdir()
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    options = JobOptions((str(tmp_path / "in"),), str(tmp_path / "out"))
    assert warm.run(options, light=True, keep_warm=60) is None
    assert capsys.readouterr().err == (f"kprobe: no warm driver ({folder} is open to other users (mode 777): remove "
                                       "it, or chmod 700 it, and try again); running the job in this process\n")
    folder.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    folder.symlink_to(tmp_path / "elsewhere")
    assert warm.run(options, light=True, keep_warm=60) is None
    assert capsys.readouterr().err == (f"kprobe: no warm driver ({folder} is not a directory of its own (a link or a "
                                       "file): remove it and try again); running the job in this process\n")
    shutil.rmtree(short)


def test_without_a_runtime_directory_the_sockets_go_under_the_cache(tmp_path, monkeypatch):
    """Without XDG_RUNTIME_DIR (cron sets none) the driver's sockets are under kprobe's cache, not the temp
    directory, where another user (uid 65534 here) can make `kprobe-UID` first and send every warm run to a
    cold one. The cache's directory is checked as the others are: made 0700, refused when it is another
    user's, open to others, or a link."""
    import tempfile

    from kprobe.aggregate import warm
    from kprobe.private import UnsafePath

    short = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short))
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        monkeypatch.setenv("KPROBE_CACHE_DIR", str(short / "cache"))
        taken = short / f"kprobe-{os.getuid()}"
        taken.mkdir(mode=0o755)
        os.chown(taken, 65534, 65534)  # another user's, made before any run of ours
        folder = warm._socket_dir()
        info = folder.lstat()
        assert (folder, info.st_mode & 0o777, info.st_uid) == (short / "cache" / f"warm-{os.getuid()}", 0o700,
                                                               os.getuid())
        assert warm._socket_dir() == folder  # every run the same: the next run finds the driver
        assert not list(taken.iterdir())
        os.chown(folder, 65534, 65534)
        with pytest.raises(UnsafePath, match=f"^{re.escape(str(folder))} belongs to uid 65534, not to this user"):
            warm._socket_dir()
        os.chown(folder, os.getuid(), os.getgid())
        folder.chmod(0o770)
        with pytest.raises(UnsafePath, match=r"is open to other users \(mode 770\): remove it, or chmod 700 it"):
            warm._socket_dir()
        folder.rmdir()
        folder.symlink_to(tmp_path)
        with pytest.raises(UnsafePath, match=r"is not a directory of its own \(a link or a file\)"):
            warm._socket_dir()
    finally:
        shutil.rmtree(short)


def test_a_request_nested_thousands_deep_or_with_no_real_idle_time_is_closed(monkeypatch):
    """A line nested 100,000 deep (RecursionError in the JSON parser), or with an idle time of NaN, Infinity
    or a negative number (JSON parses them all), is closed at once, not queued, and the driver goes on: the
    next good request is queued."""
    import socket

    from kprobe.aggregate import warm

    driver = warm._Driver()
    good = {"options": warm._portable(JobOptions(("/data/in",), "/data/out")), "light": True, "keep_warm": 60}
    bad = [b"[" * 100_000 + b"\n", b'{"options": ' + b"[" * 100_000 + b"\n",
           *(json.dumps({**good, "keep_warm": value}).encode() + b"\n"
             for value in (float("nan"), float("inf"), -1, 0))]
    for line in bad:
        ours, theirs = socket.socketpair()
        with ours:
            ours.sendall(line)
            warm._receive(theirs, driver)  # returns: nothing queued, nothing to watch
            ours.settimeout(5)
            assert ours.recv(100) == b"", line[:40]
            assert driver.jobs.empty(), line[:40]
    ours, theirs = socket.socketpair()
    with ours:
        ours.sendall(json.dumps(good).encode() + b"\n")
        watching = threading.Thread(target=warm._receive, args=(theirs, driver), daemon=True)
        watching.start()
        caller = driver.jobs.get(timeout=5)
        assert (caller.options.out, caller.keep_warm) == ("/data/out", 60.0)
        caller.close()
        watching.join(5)
        assert not watching.is_alive()


@pytest.mark.parametrize(("keep_warm", "max_age"), [("nan", None), ("-5", None), ("inf", None), ("3600", "1")])
def test_the_driver_stops_on_an_idle_time_that_is_no_time_and_at_its_age(keep_warm, max_age):
    """The driver's own guard, past the flag's parser: an idle time of NaN (which had it wait forever) or a
    negative one (which stopped it with a ValueError) means no wait, and no idle wait reaches past MAX_AGE
    (one second here, instead of 12 hours)."""
    import tempfile

    runtime = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    sock = runtime / "k.sock"
    setup = f"w.MAX_AGE = {max_age}; " if max_age else ""
    code = f"import sys; import kprobe.aggregate.warm as w; {setup}sys.exit(w.main(sys.argv[1:]))"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code, str(sock), keep_warm], capture_output=True, text=True,
                              timeout=30, cwd=runtime, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    finally:
        shutil.rmtree(runtime)
    took = time.monotonic() - started
    assert (done.returncode, done.stderr) == (0, "")
    assert took < (10 if max_age else 5), took
