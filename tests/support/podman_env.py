"""The project's podman (.ci/podman.sh) as the container tests use it: its environment and its network namespace.

.ci/podman.sh leaves its settings in `<kprobe cache>/podman/env` (DOCKER_HOST on its own socket, its
CONTAINERS_CONF, the images it built, the network namespace every podman command runs in). A test that
needs containers takes them from there, or skips saying what is missing: podman is absent, or present but
never set up by the script on this machine.

Why a network namespace: podman's netavark keeps its bridges, its iptables rules and the ports it publishes
in the namespace podman runs in, and the root namespace's firewall is not the tests' to change. A test
thread enters the namespace (`inside`), so what it connects to on 127.0.0.x is what podman published there,
and every helper it starts (the lab's blackholes and DNS views, the clients' subprocesses) lives there too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kprobe.paths import cache_root

ROOT = Path(__file__).resolve().parents[2]
SETUP = ".ci/podman.sh"
IMAGE_KEYS = ("KPROBE_KAFKA_IMAGE", "KPROBE_PROBE_IMAGE")
CLONE_NEWNET = 0x40000000


def env_file() -> Path:
    return cache_root() / "podman" / "env"


def load() -> dict[str, str] | None:
    """The variables .ci/podman.sh wrote, or None where it never ran."""
    try:
        text = env_file().read_text()
    except OSError:
        return None
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _answers(docker_host: str) -> bool:
    path = docker_host.removeprefix("unix://")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
            return b"OK" in sock.recv(4096)
    except OSError:
        return False


def unavailable() -> str | None:
    """Why the container tests cannot run here, or None when podman is set up and answering."""
    if shutil.which("podman") is None:
        return f"podman is not installed ({SETUP} installs and sets it up)"
    env = load()
    if env is None:
        return f"podman is installed but not set up for these tests: run {SETUP}"
    if not Path(env.get("KPROBE_PODMAN_NETNS", "")).exists():
        return f"podman's network namespace is gone (a reboot?): run {SETUP}"
    if not _answers(env.get("DOCKER_HOST", "")):
        return f"podman's Docker-API service does not answer on {env.get('DOCKER_HOST')}: run {SETUP}"
    missing = [env[key] for key in IMAGE_KEYS if key in env and not image_exists(env, env[key])]
    if missing:
        return f"image {missing[0]} is not in the image store: run {SETUP}"
    return None


def image_exists(env: dict[str, str], image: str) -> bool:
    return podman(env, "image", "exists", image, check=False).returncode == 0


def podman_argv(env: dict[str, str], *args: str) -> list[str]:
    """A podman command line run in podman's network namespace (nsenter keeps /sys, where the cgroups are)."""
    return ["nsenter", f"--net={env['KPROBE_PODMAN_NETNS']}", "podman", *args]


def podman(env: dict[str, str], *args: str, check: bool = True, timeout: float = 300,
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podman_argv(env, *args), capture_output=True, text=True, timeout=timeout, check=check,
                          env={**os.environ, "CONTAINERS_CONF": env["CONTAINERS_CONF"]})


@contextlib.contextmanager
def inside(env: dict[str, str]) -> Iterator[None]:
    """Run the calling thread in podman's network namespace, and put it back after.

    setns(2) moves only the calling thread: threads and processes it starts inside inherit the
    namespace, the rest of the session stays where it was.
    """
    libc = ctypes.CDLL(None, use_errno=True)  # os.setns is Python 3.12's

    def setns(fd: int) -> None:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns: {os.strerror(ctypes.get_errno())}")

    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(env["KPROBE_PODMAN_NETNS"], os.O_RDONLY)
    try:
        setns(target)
        try:
            yield
        finally:
            setns(back)
    finally:
        os.close(target)
        os.close(back)


@pytest.fixture
def podman_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Podman as the Docker engine of this test: its variables set, testcontainers told, its namespace entered.

    Ryuk is off: its image comes from Docker Hub, which no registry here serves; the lab's own label sweep
    removes what a test leaves. testcontainers reads that setting when first imported, so it is set on
    its configuration object too.
    """
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    env = load()
    assert env is not None
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    from testcontainers.core.config import testcontainers_config

    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", True)
    with inside(env):
        yield env
