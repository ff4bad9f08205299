"""kprobe run as users run it, in a child of its own, with what that child cost: its peak memory and its CPU.

Peak memory is the child's own: VmHWM of its own address space (Linux), written by an atexit hook of a wrapper.
(`ru_maxrss` is not: Linux carries it across fork and exec, so a child of a 70 MB pytest starts at 70 MB.)
Its time is its own too, the CPU it used (user and system, every thread), written by the same hook: that is
the work a bound on reading limits. The wall clock is the machine's: xdist workers sharing two CPUs once
stretched a 0.5 s refusal of a gzip bomb to 5.8 s, and a 2.7 s listing of 100,000 partitions to 14 s. A hang
is still caught, by the run's own timeout. One helper for the tests that bound what hostile input costs
(tests/runs/test_hostile_brokers.py, tests/cli/test_hostile_files.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# kprobe's own entry point, with the child's peak RSS (KiB) and CPU seconds written last on stderr.
MEASURED = ("import atexit, os, re, sys\n"
            "atexit.register(lambda: sys.stderr.write('maxrss=' + re.search(r'VmHWM:\\s*(\\d+)', "
            "open('/proc/self/status').read()).group(1) + ' cpu=' + str(os.times().user + os.times().system) "
            "+ '\\n'))\n"
            "sys.argv = ['kprobe', *sys.argv[1:]]\nfrom kprobe.cli import main\nmain()\n")


def measured(*args: str, umask: int | None = None, stdin: int | None = None,
             timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run kprobe; (the run with the measurement taken out of stderr, its CPU seconds, its peak RSS in MiB)."""
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=ROOT, stdin=stdin, env={**os.environ, "NO_COLOR": "1"},
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
    match = re.search(r"maxrss=(\d+) cpu=([\d.]+)\n\Z", done.stderr)
    assert match, done.stderr[-2000:]
    done.stderr = done.stderr[: match.start()]
    return done, float(match.group(2)), int(match.group(1)) / 1024
