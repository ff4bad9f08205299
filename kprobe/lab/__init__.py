"""A lab of real Apache Kafka brokers for tests, `kprobe demo` and the docs.

`start_lab("listeners")` starts a scenario and returns a handle (bootstraps per listener,
nameservers per DNS view) that stops everything on `stop()` or at the end of a `with` block.
The backend is chosen automatically (`auto`, the default): the native one (local JVMs) where a
JDK and Maven are on PATH, since it starts in seconds and needs no image; otherwise
testcontainers where a Docker engine answers (a laptop with Docker and no JDK). `KPROBE_LAB_BACKEND`
(`native`, `docker`) or `--backend` forces one.
"""

from __future__ import annotations

import os
import shutil

from kprobe.errors import UsageError
from kprobe.lab.base import RunningLab
from kprobe.lab.scenarios import SCENARIOS, Scenario, get_scenario

__all__ = ["SCENARIOS", "RunningLab", "Scenario", "get_scenario", "start_lab"]

BACKENDS = ("native", "docker", "auto")


def choose_backend(backend: str | None = None) -> str:
    """Resolve `auto` and the environment into a concrete backend name."""
    choice = (backend or os.environ.get("KPROBE_LAB_BACKEND") or "auto").lower()
    if choice not in BACKENDS:
        raise UsageError(f"unknown lab backend {choice!r}: use native, docker or auto (KPROBE_LAB_BACKEND)")
    if choice == "auto":
        if shutil.which("java") and shutil.which("mvn"):
            return "native"
        from kprobe.lab.containers import docker_available

        # Without a JDK and Maven, Docker if it answers; else native, whose error says what to install.
        return "docker" if docker_available() else "native"
    return choice


def start_lab(name: str, backend: str | None = None) -> RunningLab:
    """Start scenario `name` and wait until every broker serves clients."""
    scenario = get_scenario(name)
    if choose_backend(backend) == "docker":
        from kprobe.lab.containers import ContainerLab

        return ContainerLab(scenario).start()
    from kprobe.lab.native import NativeLab

    return NativeLab(scenario).start()
