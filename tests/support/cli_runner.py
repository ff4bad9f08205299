"""Run `kprobe ARGS...` inside the test process, seeing what a user's shell would see.

Why: a `python -m kprobe` child costs a second or more of start-up on the suite's two loaded
CPUs, and the bad-input tables alone start a hundred of them. What those tests prove is what
kprobe.cli.main turns an input into: the bytes on stdout and stderr and the exit code. So this
calls main() itself, with what a fresh process would have, and hands back a
subprocess.CompletedProcess, so a test's assertions read exactly as they did for a child.

What a fresh process has, and the test process may not (each set for the run, put back after):

- sys.argv as `python -m kprobe` sets it; an empty stdin unless the test gives one (xdist's workers
  hand their children /dev/null).
- File descriptors 1 and 2 on files of their own, with sys.stdout and sys.stderr text streams on
  them (the encoding and error handlers the interpreter gives a child here), so a write from C
  (librdkafka) lands beside Python's, fileno() works, and isatty() is False, as in a pipe.
- The exit code as the interpreter makes it: SystemExit's code (None 0, a string on stderr and 1),
  and any other exception escaping main a traceback on stderr and 1, so "no traceback" is tested
  for real. (pytest's own outcomes, a timeout's failure among them, pass through.)
- Loggers: the "kprobe" tree and the root without handlers, the root at WARNING (a child has no
  pytest handlers, so a warning nobody handles goes to stderr through logging's last resort);
  kprobe's own setup_logging then adds its handler on this run's stderr (at once, or before the
  first warning: kprobe.logs), and none a run asked for outlives it.
- Warnings printed to stderr under the interpreter's default filters (pytest would record them);
  a thread's uncaught exception, or an unraisable one, printed as the interpreter prints them.
- No OAuth token cached (kprobe.kafka.oauth keeps one per process).
- Signal handlers, os.environ (replaced whole by `env=`), the working directory and the umask
  are restored after the run, whatever kprobe set (`watch` and `serve` install SIGTERM/SIGINT
  handlers). Non-daemon threads the run started are joined, as the interpreter does at exit.

The loopback fence (tests/fence) is an audit hook on the whole test process: it judges these runs'
sockets as it judged the children's, and the conftest fixture reads the same log after the test.

What cannot be had in-process stays a child: peak memory of a process, which modules a start-up
imports, a private mount namespace, a signal sent to a running process. tests/cli/test_bad_input.py
also checks a few cases both ways, byte for byte (test_in_process_runs_match_real_processes).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kprobe

MAIN = str(Path(kprobe.__file__).parent / "__main__.py")  # sys.argv[0] of `python -m kprobe`

# The interpreter's default warning filters (a child without -W or PYTHONWARNINGS).
_DEFAULT_FILTERS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, None),
                    ("ignore", PendingDeprecationWarning, None), ("ignore", ImportWarning, None),
                    ("ignore", ResourceWarning, None))


def _stream_settings() -> tuple[str, str, str]:
    """Encoding and error handlers a child's stdout and stderr get here (the same locale as ours)."""
    out, err = sys.__stdout__, sys.__stderr__
    encoding = getattr(out, "encoding", None) or "utf-8"
    return encoding, getattr(out, "errors", None) or "strict", getattr(err, "errors", None) or "backslashreplace"


@contextlib.contextmanager
def _redirected(fd: int, sink: Any) -> Iterator[None]:
    saved = os.dup(fd)
    try:
        os.dup2(sink.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _kprobe_loggers() -> list[logging.Logger]:
    return [lg for name, lg in list(logging.Logger.manager.loggerDict.items())
            if isinstance(lg, logging.Logger) and (name == "kprobe" or name.startswith("kprobe."))]


@contextlib.contextmanager
def _fresh_logging() -> Iterator[None]:
    """The kprobe loggers and the root as a new process has them; each put back as it was."""
    from kprobe.logs import configure_on_first_use

    root = logging.getLogger()
    loggers = _kprobe_loggers()
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in (root, *loggers)]
    configure_on_first_use(None)  # a handler a run asked for and never needed is not the next run's, nor ours
    try:
        for lg in loggers:
            lg.handlers, lg.level, lg.propagate, lg.disabled = [], logging.NOTSET, True, False
        root.handlers, root.level = [], logging.WARNING
        yield
    finally:
        configure_on_first_use(None)
        for lg in set(_kprobe_loggers()) - set(loggers):  # the run's own (a per-bootstrap client's): gone with it
            lg.handlers, lg.level, lg.propagate = [], logging.NOTSET, True
        for lg, handlers, level, propagate, disabled in saved:
            lg.handlers, lg.level, lg.propagate, lg.disabled = handlers, level, propagate, disabled


@contextlib.contextmanager
def _no_cached_tokens() -> Iterator[None]:
    """A new process has fetched no OAuth token yet; the test process's cache is put back after."""
    def cache() -> dict[Any, Any]:
        return getattr(sys.modules.get("kprobe.kafka.oauth"), "_CACHE", {})

    saved = dict(cache())
    cache().clear()
    try:
        yield
    finally:
        cache().clear()  # also where the run imported the module first
        cache().update(saved)


@contextlib.contextmanager
def _interpreter_hooks() -> Iterator[None]:
    """Warnings, thread exceptions and unraisable ones printed on stderr, as a child prints them."""
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    hooks = (threading.excepthook, sys.unraisablehook)
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in reversed(_DEFAULT_FILTERS):
            warnings.filterwarnings(action, category=category, module=module or "")
        warnings.showwarning = show
        threading.excepthook, sys.unraisablehook = threading.__excepthook__, sys.__unraisablehook__
        try:
            yield
        finally:
            threading.excepthook, sys.unraisablehook = hooks


@contextlib.contextmanager
def _restored_process_state(env: Mapping[str, str] | None, umask: int | None, cwd: str | Path | None
                            ) -> Iterator[None]:
    environ = dict(os.environ)
    here = os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in signal.valid_signals()
                if sig not in (signal.SIGKILL, signal.SIGSTOP)}
    mask = os.umask(umask) if umask is not None else None
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        if mask is not None:
            os.umask(mask)
        os.chdir(here)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        for sig, handler in handlers.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


def _exit_code(exc: SystemExit) -> int:
    """The status the interpreter exits with for this SystemExit (a string is printed, then 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    sys.stderr.write(f"{exc.code}\n")
    return 1


def _decoded(data: bytes, encoding: str) -> str:
    """As subprocess.run(text=True) decodes a child's output: its encoding, universal newlines."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


def run_cli(args: list[str] | tuple[str, ...], *, env: Mapping[str, str] | None = None, umask: int | None = None,
            cwd: str | Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS...` run by kprobe.cli.main in this process: returncode, stdout and stderr as a child's.

    `env` replaces the environment for the run (as subprocess's env=); `stdin` is its input (default none).
    """
    done = run_cli_bytes(args, env=env, umask=umask, cwd=cwd, stdin=stdin)
    encoding = _stream_settings()[0]
    return subprocess.CompletedProcess(done.args, done.returncode, _decoded(done.stdout, encoding),
                                       _decoded(done.stderr, encoding))


def run_cli_bytes(args: list[str] | tuple[str, ...], *, env: Mapping[str, str] | None = None,
                  umask: int | None = None, cwd: str | Path | None = None,
                  stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """run_cli with the bytes written, as subprocess.run without text=: no decoding, no newline translation
    (a test of what reaches a terminal needs to see a stray carriage return or an invalid byte)."""
    from kprobe import cli

    argv = [MAIN, *args]
    encoding, out_errors, err_errors = _stream_settings()
    threads = set(threading.enumerate())
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file, \
            tempfile.TemporaryFile() as in_file:
        in_file.write(stdin or b"")
        in_file.seek(0)
        saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # what the test wrote before stays before, in pytest's capture
        with _redirected(1, out_file), _redirected(2, err_file), \
                _restored_process_state(env, umask, cwd), _fresh_logging(), _no_cached_tokens(), \
                _interpreter_hooks():
            sys.stdout = open(1, "w", encoding=encoding, errors=out_errors, closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", 1, encoding=encoding, errors=err_errors, closefd=False)  # noqa: SIM115
            sys.stdin = io.TextIOWrapper(open(in_file.fileno(), "rb", closefd=False), encoding=encoding)  # noqa: SIM115
            sys.argv = argv
            try:
                try:
                    cli.main()
                    code = 0
                except SystemExit as exc:
                    code = _exit_code(exc)
                except Exception:  # escaped main: the interpreter prints it and exits 1
                    traceback.print_exc()
                    code = 1
                for thread in set(threading.enumerate()) - threads:
                    if not thread.daemon:
                        thread.join(60)  # the interpreter waits for these before it exits
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(OSError, ValueError):
                        stream.flush()
            finally:
                for stream in (sys.stdout, sys.stderr, sys.stdin):
                    with contextlib.suppress(OSError, ValueError):
                        stream.close()
                sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        out_file.seek(0)
        err_file.seek(0)
        return subprocess.CompletedProcess(argv, code, out_file.read(), err_file.read())
