"""kprobe.logs: `logging` loads only when a line can be seen, and a warning reads as if logging had been set up at start.

Why: a plain probe or listing does not import `logging` (tests/test_imports.py), so its
handler on stderr is installed before the first warning instead of at start. That holds only if
every logger under `kprobe` is a `kprobe.logs.Log`: a module's own `logging.getLogger("kprobe...")`
would warn past the setup and print a bare, unescaped line (logging's last resort).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "kprobe"


def test_no_module_keeps_a_logging_logger_of_its_own() -> None:
    found = []
    for path in ROOT.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "getLogger"):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not found, f"module-level loggers must be kprobe.logs.logger(...): {found}"


# Run in a fresh interpreter: pytest itself has long imported logging.
_SCRIPT = r"""
import sys
from kprobe import logs
calls = []
logs.configure_on_first_use(lambda: calls.append("setup"))
log = logs.logger("kprobe.test")
log.debug("not shown %s", 1)
log.info("not shown either")
assert "logging" not in sys.modules and calls == [], (sorted(sys.modules), calls)
import logging
logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")
log.debug("shown once logging is configured: %s", "debug")
assert calls == []  # a debug line does not install the warning handler
log.warning("warned: %s", "yes")
log.error("an error")
assert calls == ["setup"], calls
log.warning("the setup ran once")
assert calls == ["setup"], calls
logs.configure_on_first_use(lambda: calls.append("stale"))
logs.configure_on_first_use(lambda: calls.append("current"))
log.warning("only the last setup asked for runs")
logs.configure_on_first_use(lambda: calls.append("withdrawn"))
logs.configure_on_first_use(None)
log.warning("a withdrawn setup never runs")
assert calls == ["setup", "current"], calls
"""


# Threads that warn at once (a probe's endpoint checks): the setup runs once, and no line comes before it ends.
_THREADS = r"""
import sys, threading, time
from kprobe import logs
events = []
def setup():
    events.append("setup started")
    time.sleep(0.2)
    import logging
    logging.basicConfig(stream=sys.stdout, format="%(message)s")
    events.append("setup done")
logs.configure_on_first_use(setup)
log = logs.logger("kprobe.test")
start = threading.Barrier(8)
def warn(i):
    start.wait()
    log.warning("line %d", i)
threads = [threading.Thread(target=warn, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert events == ["setup started", "setup done"], events
"""


def test_threads_that_warn_at_once_run_the_setup_once_and_after_it() -> None:
    done = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [f"line {i}" for i in range(8)]  # each through the handler
    assert done.stderr == ""  # none by logging's last resort, before the handler was there


def test_lines_below_a_warning_wait_for_logging_and_a_warning_runs_the_setup_first() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["DEBUG kprobe.test shown once logging is configured: debug",
                                        "WARNING kprobe.test warned: yes", "ERROR kprobe.test an error",
                                        "WARNING kprobe.test the setup ran once",
                                        "WARNING kprobe.test only the last setup asked for runs",
                                        "WARNING kprobe.test a withdrawn setup never runs"]
