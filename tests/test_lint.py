"""ruff and mypy are part of the suite, so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "kprobe", "tests", "bench", "docs"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean():
    done = subprocess.run([sys.executable, "-m", "mypy", "kprobe"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_packaging_metadata_uses_an_spdx_license():
    """setuptools stops building a `license = {text = ...}` table after 2027-02-18 (PEP 639)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    from importlib.metadata import metadata

    assert metadata("kprobe")["License-Expression"] == "Apache-2.0"
