"""kprobe's log lines, with `logging` imported only once a line can be seen.

Why: `import logging` (and the `traceback`, `string` and `weakref` it loads) is a few milliseconds
of every probe's start, and a plain probe logs nothing a user sees: its debug lines are
for --verbose, its warnings are rare. A debug line while `logging` was never imported would be
dropped by it anyway, since no handler can exist yet and logging's last resort shows warnings and
above only; so `Log.debug` does nothing until something has imported `logging` (--verbose's
handler, a test's caplog, a library), and then is `logging`'s. A warning or an error always goes
through `logging`, after the setup the command asked for on first use (`configure_on_first_use`):
the same `kprobe: ` line on stderr as with the handler installed from the start.

Every logger under `kprobe` is one of these (tests/test_logs.py), so that no warning can reach
`logging` before that setup. Modules that hang handlers on other loggers (the MSK signer's capture of
botocore's, librdkafka's lines) still import `logging`; they load only where they are used.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

_pending: list[Callable[[], None]] = []  # at most one: the setup the command asked for, not run yet
_setting_up = threading.Lock()  # a probe's threads may warn at once: one runs the setup, the others wait for it


def configure_on_first_use(setup: Callable[[], None] | None) -> None:
    """Run `setup` (import logging, install a handler) before the first line that must be shown.

    It replaces any setup still waiting, and None withdraws it (a command that set up its logging
    at once): where commands run one after another in a process, a setup the last one never needed
    must not undo the next one's (turn its --verbose off at its first warning).
    """
    _pending[:] = [setup] if setup is not None else []


def stdlib() -> Any:
    """The `logging` module, after the setup the command asked for (a handler on stderr)."""
    if _pending:
        with _setting_up:
            if _pending:  # withdrawn only once it has run: a thread that finds it still waiting waits too
                _pending[0]()
                _pending.clear()
    import logging
    return logging


class Log:
    """A named logger of kprobe's, standing in for `logging.getLogger(name)` until one is needed."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def debug(self, msg: str, *args: object, **kwargs: Any) -> None:
        """A --verbose line: nothing unless `logging` is loaded (no handler could show it otherwise)."""
        logging = sys.modules.get("logging")
        if logging is not None:
            logging.getLogger(self.name).debug(msg, *args, **kwargs)

    def info(self, msg: str, *args: object, **kwargs: Any) -> None:
        """As `debug`: below the warning level logging's last resort shows."""
        logging = sys.modules.get("logging")
        if logging is not None:
            logging.getLogger(self.name).info(msg, *args, **kwargs)

    def warning(self, msg: str, *args: object, **kwargs: Any) -> None:
        """A line a user sees on stderr, verbose or not."""
        stdlib().getLogger(self.name).warning(msg, *args, **kwargs)

    def error(self, msg: str, *args: object, **kwargs: Any) -> None:
        """A line a user sees on stderr, verbose or not."""
        stdlib().getLogger(self.name).error(msg, *args, **kwargs)


def logger(name: str) -> Log:
    """The logger `name` (a dotted name under `kprobe`, as `logging.getLogger` takes it)."""
    return Log(name)
