"""Which lab backend runs when nobody says: the one this machine can start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kprobe.errors import UsageError
from kprobe.lab import choose_backend


def test_auto_is_native_where_a_jdk_and_maven_are_on_path(monkeypatch):
    if not (shutil.which("java") and shutil.which("mvn")):
        pytest.skip("needs java and mvn on PATH (the native lab's own requirements)")
    monkeypatch.delenv("KPROBE_LAB_BACKEND", raising=False)
    assert choose_backend() == "native"
    assert choose_backend("auto") == "native"


def test_auto_without_a_jdk_or_docker_falls_back_to_native(monkeypatch, tmp_path: Path):
    # A PATH with python only: no java, no mvn; and a Docker host that cannot answer.
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    monkeypatch.delenv("KPROBE_LAB_BACKEND", raising=False)
    assert choose_backend() == "native"  # whose start then says: install a JDK and Maven


def test_the_environment_and_the_argument_force_a_backend(monkeypatch):
    monkeypatch.setenv("KPROBE_LAB_BACKEND", "docker")
    assert choose_backend() == "docker"
    assert choose_backend("native") == "native"
    monkeypatch.setenv("KPROBE_LAB_BACKEND", "podman")
    with pytest.raises(UsageError, match="unknown lab backend 'podman'"):
        choose_backend()
