"""ruff and mypy are part of the suite, so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "kprobe", "tests", "bench", "docs"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean():
    done = subprocess.run([sys.executable, "-m", "mypy", "kprobe"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
