"""`kprobe lab down` signals only the processes a detached lab recorded, and only while they are still them.

A state file names pids; by the time `lab down` reads it, its supervisor may be long dead and the pids
handed to anything. Unrelated `sleep` processes stand for what took them over.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kprobe.lab import supervisor

KPROBE = [sys.executable, "-m", "kprobe"]


@pytest.fixture
def strangers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes that are none of the lab's business; each must outlive `lab down`."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def _stranger(started: list[subprocess.Popen[bytes]], *argv: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(list(argv or ("sleep", "60")), start_new_session=True)
    started.append(proc)
    end = time.monotonic() + 5
    while supervisor.started_at(proc.pid) is None and time.monotonic() < end:
        time.sleep(0.01)
    return proc


def _down(state_dir: Path, scenario: str, *prefix: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *KPROBE, "lab", "down", scenario], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "KPROBE_LAB_STATE": str(state_dir), **(env or {})})


def test_down_leaves_alone_processes_that_took_over_recorded_pids(tmp_path: Path, strangers: list) -> None:
    first, second, third = (_stranger(strangers) for _ in range(3))
    state_dir = tmp_path / "labs"
    state_dir.mkdir()
    (state_dir / "listeners.json").write_text(json.dumps({
        "scenario": "listeners",
        "pid": first.pid, "start": supervisor.started_at(first.pid),  # right pid and start, not a lab supervisor
        "jvm_pids": [second.pid],  # the older form: a bare pid
        "jvms": [{"pid": third.pid, "start": supervisor.started_at(third.pid)}],  # no lab JVM's marker
    }))
    done = _down(state_dir, "listeners")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "lab listeners was no longer running: removed its record\n"
    assert [p.poll() for p in (first, second, third)] == [None, None, None]
    assert not (state_dir / "listeners.json").exists()


def test_a_recorded_start_time_that_differs_is_another_process(tmp_path: Path, strangers: list) -> None:
    """A process whose command line looks like a supervisor's but started later than the one recorded."""
    lookalike = _stranger(strangers, "sh", "-c", "sleep 60", "lab", "up", "listeners")
    assert supervisor.is_process(lookalike.pid, supervisor.started_at(lookalike.pid), supervisor.SUPERVISOR_MARK)
    state_dir = tmp_path / "labs"
    state_dir.mkdir()
    (state_dir / "listeners.json").write_text(json.dumps(
        {"scenario": "listeners", "pid": lookalike.pid, "start": supervisor.started_at(lookalike.pid) - 1}))
    assert _down(state_dir, "listeners").returncode == 0
    assert lookalike.poll() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="plays another user with setpriv: needs root")
def test_down_by_another_user_is_one_line_not_a_traceback(strangers: list) -> None:
    """A user whose state file names root's supervisor-like process: one line, exit 0, nothing signalled."""
    roots = _stranger(strangers, "sh", "-c", "sleep 60", "lab", "up", "listeners")
    tmp_path = Path(tempfile.mkdtemp(prefix="kprobe-test-"))  # pytest's own tmp_path is root's alone
    state_dir = tmp_path / "labs"
    state_dir.mkdir()
    (state_dir / "listeners.json").write_text(json.dumps(
        {"scenario": "listeners", "pid": roots.pid, "start": supervisor.started_at(roots.pid)}))
    os.chown(state_dir, 65534, 65534)
    os.chown(state_dir / "listeners.json", 65534, 65534)
    tmp_path.chmod(0o755)
    done = _down(state_dir, "listeners", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"lab listeners runs as another user (pid {roots.pid}): stop it as that user\n"
    assert "Traceback" not in done.stderr and roots.poll() is None
    shutil.rmtree(tmp_path)


def test_a_state_file_another_user_owns_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("plays another user with chown: needs root")
    monkeypatch.setenv("KPROBE_LAB_STATE", str(tmp_path))
    (tmp_path / "listeners.json").write_text(json.dumps({"scenario": "listeners", "pid": 1, "start": 0}))
    os.chown(tmp_path / "listeners.json", 65534, 65534)
    assert supervisor.stop_detached("listeners") == ["no detached lab listeners is running"]
