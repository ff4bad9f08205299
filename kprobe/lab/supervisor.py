"""Keeping a lab alive: in the foreground until Ctrl-C, or detached until `kprobe lab down`.

A lab is more than JVMs: its DNS views and blackholes live in a Python process. So a detached
lab is a background `kprobe lab up` (the supervisor) that writes a state file once every
broker serves clients; `lab down` signals it, and it tears down what it started.

Scenarios run side by side (each has loopback addresses of its own, and its ports and DNS
servers are chosen free at start): the collector of scheduled probes beside the cluster they
probe, say. So each detached scenario has its own state file and log, `<scenario>.json` and
`<scenario>.log` under the state directory; one scenario runs once at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kprobe.errors import LabError, UsageError
from kprobe.output.files import write_atomic
from kprobe.paths import cache_root
from kprobe.private import python_argv

STATE_ENV = "KPROBE_LAB_STATE_FILE"


def state_dir() -> Path:
    """Where detached labs record themselves (`KPROBE_LAB_STATE` names another directory)."""
    override = os.environ.get("KPROBE_LAB_STATE")
    return Path(override) if override else cache_root() / "lab"


def state_path(scenario: str) -> Path:
    """The state file of one detached scenario."""
    return state_dir() / f"{scenario}.json"


def _states() -> dict[str, tuple[Path, dict[str, object]]]:
    """Every detached lab's state, by scenario; an unreadable file is removed (a crash mid-write).

    A file this user does not own is passed over: what it names is not this user's to signal.
    """
    found: dict[str, tuple[Path, dict[str, object]]] = {}
    directory = state_dir()
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            if path.lstat().st_uid != os.geteuid() or path.is_symlink():
                continue
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if isinstance(state, dict) and isinstance(state.get("scenario"), str):
            found[state["scenario"]] = (path, state)
    return found


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts); no pid (0 or less) is not alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def started_at(pid: int) -> int | None:
    """When a process started (clock ticks since boot, /proc/PID/stat), None when there is none.

    Why: a pid alone names whatever process has it now; with its start time it names one process
    for good, so a record read later cannot make kprobe signal a stranger that took the pid over.
    """
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
        return int(data[data.rindex(b")") + 2:].split()[19])  # field 22; the name before it may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def is_process(pid: int, start: object, marker: bytes) -> bool:
    """Whether `pid` is still the process recorded: the same start time, `marker` in its command line."""
    if pid <= 0 or not isinstance(start, int) or started_at(pid) != start:
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def identity(pid: int) -> dict[str, int | None]:
    """A process as a record keeps it: its pid and start time (see `is_process`)."""
    return {"pid": pid, "start": started_at(pid)}


SUPERVISOR_MARK = b"\0lab\0up\0"  # `kprobe lab up ...` on its command line
JVM_MARK = b"-Dkprobe.lab="  # every lab broker's JVM carries it (native.py)


def run_foreground(scenario: str, backend: str) -> None:
    """Start, print how to reach it, wait for Ctrl-C or SIGTERM, stop."""
    from kprobe.lab import start_lab

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.stderr.write(f"starting lab {scenario} ({backend})...\n")
    lab = start_lab(scenario, backend)
    try:
        lines = lab.describe()
        state_file = os.environ.get(STATE_ENV)
        if state_file:
            state = {**lab.to_state(), **identity(os.getpid()), "describe": lines,
                     "jvms": [identity(pid) for pid in getattr(lab, "pids", {}).values()]}
            write_atomic(Path(state_file), json.dumps(state, indent=2), private=True)
        else:
            print("\n".join(lines), flush=True)
            print("lab running; Ctrl-C stops it", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        lab.stop()
        if os.environ.get(STATE_ENV):
            with contextlib.suppress(OSError):
                Path(os.environ[STATE_ENV]).unlink()


def wait_until_ready(proc: subprocess.Popen[bytes], ready: Path, log: Path, timeout: float, what: str) -> None:
    """Wait for a background lab's ready file; a LabError quoting its log's last line if it dies or stalls.

    Shared by the DNS-view and the namespace labs' `up --detach`: the supervisor writes the file only
    once every broker answers, so its existence is the one signal that the lab can be used.
    """
    end = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise LabError(f"{what} did not start: {tail[0]} (log: {log})")
        if time.monotonic() > end:
            proc.kill()
            raise LabError(f"{what} did not start within {timeout:.0f}s (log: {log})")
        time.sleep(0.2)


def start_detached(scenario: str, backend: str, timeout: float = 180.0) -> list[str]:
    """Start the supervisor in the background and return the lab's description once ready.

    Another scenario may be running: each has its own addresses, ports and state file. The same
    scenario twice is refused: `lab down NAME` and the tests find a scenario by its name, so two
    copies of one would be two labs under one name.
    """
    held = _states().get(scenario)
    if held is not None:
        old_path, state = held
        pid = _int(state.get("pid"))
        if is_process(pid, state.get("start"), SUPERVISOR_MARK):
            raise UsageError(f"lab {scenario} is already running (pid {pid}): stop it with `kprobe lab down "
                             f"{scenario}`, or use it as it is")
        old_path.unlink(missing_ok=True)  # its supervisor died: a stale record
    path = state_path(scenario)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    env = {**os.environ, STATE_ENV: str(path)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            python_argv("kprobe", "lab", "up", scenario, "--backend", backend),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            cwd="/",  # a daemon pins no directory of the caller's
        )
    wait_until_ready(proc, path, log, timeout, "the lab")
    state = json.loads(path.read_text())
    others = sorted(name for name in _states() if name != scenario)
    beside = f"; also running: {', '.join(others)}" if others else ""
    return [*state["describe"], f"lab {scenario} running in the background (pid {proc.pid}); stop it with "
            f"`kprobe lab down {scenario}`{beside}"]


def stop_detached(scenario: str | None = None, timeout: float = 30.0) -> list[str]:
    """Stop one detached scenario, or every one without a name; a line per scenario stopped."""
    states = _states()
    if scenario is not None:
        if scenario not in states:
            running = f" (running: {', '.join(sorted(states))})" if states else ""
            return [f"no detached lab {scenario} is running{running}"]
        states = {scenario: states[scenario]}
    if not states:
        return ["no detached lab is running"]
    return [_stop_one(name, path, state, timeout) for name, (path, state) in states.items()]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _stop_one(scenario: str, path: Path, state: dict[str, object], timeout: float) -> str:
    """Signal a supervisor, wait for it to tear its lab down, kill what it left.

    Only processes that are still the ones recorded (pid, start time, command line) are signalled:
    a supervisor that died long ago may have handed its pid to anything.
    """
    pid, start = _int(state.get("pid")), state.get("start")
    stopped = is_process(pid, start, SUPERVISOR_MARK)
    if stopped:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError:
            return f"lab {scenario} runs as another user (pid {pid}): stop it as that user"
        end = time.monotonic() + timeout
        while is_process(pid, start, SUPERVISOR_MARK) and time.monotonic() < end:
            time.sleep(0.1)
        if is_process(pid, start, SUPERVISOR_MARK):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    jvms = state.get("jvms")
    for jvm in jvms if isinstance(jvms, list) else []:
        if isinstance(jvm, dict) and is_process(_int(jvm.get("pid")), jvm.get("start"), JVM_MARK):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(_int(jvm.get("pid")), signal.SIGKILL)
    path.unlink(missing_ok=True)
    return f"stopped lab {scenario}" if stopped else f"lab {scenario} was no longer running: removed its record"
