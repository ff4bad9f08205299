"""Keeping a lab alive: in the foreground until Ctrl-C, or detached until `kprobe lab down`.

A lab is more than JVMs: its DNS views and blackholes live in a Python process. So a detached
lab is a background `kprobe lab up` (the supervisor) that writes a state file once every
broker serves clients; `lab down` signals it, and it tears down what it started.
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
from kprobe.paths import cache_root

STATE_ENV = "KPROBE_LAB_STATE_FILE"


def state_path() -> Path:
    """Where the detached lab records itself."""
    override = os.environ.get("KPROBE_LAB_STATE")
    return Path(override) if override else cache_root() / "lab" / "state.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
            state = {**lab.to_state(), "pid": os.getpid(), "describe": lines,
                     "jvm_pids": list(getattr(lab, "pids", {}).values())}
            tmp = Path(state_file + ".tmp")
            tmp.write_text(json.dumps(state, indent=2))
            tmp.replace(state_file)
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


def start_detached(scenario: str, backend: str, timeout: float = 180.0) -> list[str]:
    """Start the supervisor in the background and return the lab's description once ready."""
    path = state_path()
    if path.exists():
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("pid") and _alive(int(state["pid"])):
            raise UsageError(f"a lab is already running ({state.get('scenario')}): stop it with `kprobe lab down`")
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    env = {**os.environ, STATE_ENV: str(path)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kprobe", "lab", "up", scenario, "--backend", backend],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise LabError(f"the lab did not start: {tail[0]} (log: {log})")
        if time.monotonic() > end:
            proc.kill()
            raise LabError(f"the lab did not start within {timeout:.0f}s (log: {log})")
        time.sleep(0.2)
    state = json.loads(path.read_text())
    return [*state["describe"], f"lab running in the background (pid {proc.pid}); stop it with `kprobe lab down`"]


def stop_detached(timeout: float = 30.0) -> str:
    """Stop the detached lab, killing any JVM its supervisor could not."""
    path = state_path()
    if not path.exists():
        return "no detached lab is running"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return "removed an unreadable lab state file; no lab was stopped"
    pid = int(state.get("pid", 0))
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < end:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for jvm in state.get("jvm_pids", []):
        if _alive(int(jvm)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(jvm), signal.SIGKILL)
    path.unlink(missing_ok=True)
    return f"stopped lab {state.get('scenario')}"
