"""Every error a command meets, kprobe's own and click's, becomes one line and an exit code here: never a
traceback, never a secret from the command line, never a hostile broker's raw bytes.

Why one place, and why at the base: the fast reader (kprobe.cli.plain), typer's app (kprobe.cli.app) and
`python -m kprobe.aggregate` (spark-submit's entry, beside the job it runs) must fail alike, each importing
this mapping from below; and a plain probe must fail well without importing typer, so click's exceptions
are told by their class names rather than imported.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from kprobe.errors import EXIT_ERROR, EXIT_FAILED, EXIT_GAP, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, KprobeError

# A run's summary status (a report's or a listing's) -> the exit code scripts read.
STATUS_EXIT = {"ok": EXIT_OK, "gap": EXIT_GAP, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}


def secrets_in(args: list[str]) -> list[str]:
    """Values on the command line that belong to secret properties, to scrub from any message.

    `-X sasl.password=...` is the usual form; `-X sasl.password secret` (a typo) makes click
    quote the secret as an unexpected argument, so the word after a bare secret key counts too.
    """
    from kprobe.redaction import is_secret

    found = []
    for i, arg in enumerate(args):
        key, sep, value = arg.partition("=")
        if sep and is_secret(key) and value:
            found.append(value)
        elif not sep and is_secret(arg):
            # `-X 'sasl.password:hunter2'` or `-X 'sasl.password hunter2'`: what follows the key.
            rest = re.split(r"[:\s]", arg, maxsplit=1)[1:]
            found += [r.strip() for r in rest if r.strip()]
            if i + 1 < len(args):
                found.append(args[i + 1])
    return found


def _scrub(message: str, secrets: list[str]) -> str:
    from kprobe.redaction import REDACTED

    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, REDACTED)
    return message


def fail(message: str, code: int, secrets: list[str]) -> NoReturn:
    """One line on stderr, scrubbed of the command line's secrets and of a hostile broker's bytes."""
    from kprobe.sanitize import safe  # a message may quote a hostile broker's words

    sys.stderr.write(safe(_scrub(message, secrets), limit=2000) + "\n")
    sys.exit(code)


def _click_names(exc: BaseException) -> set[str]:
    """The class names of a click (or typer) exception, empty for any other: typer either vendors click
    or uses the installed one, and importing either for this test would cost every plain run.
    """
    mro = type(exc).__mro__
    if not any(c.__module__.split(".")[0] in ("click", "typer") for c in mro):
        return set()
    return {c.__name__ for c in mro}


def _click_exit(exc: Exception, names: set[str], secrets: list[str]) -> int:
    """What click raised, as kprobe says it: an Exit's code, an Abort as an interruption, a usage error with
    where to read the command's help, any other refusal in one line.
    """
    if "Exit" in names:
        return int(exc.exit_code)  # type: ignore[attr-defined]
    if "Abort" in names:
        fail("kprobe: interrupted", EXIT_INTERRUPTED, secrets)
    if "NoArgsIsHelpError" in names:
        sys.stdout.write(exc.ctx.get_help() + "\n")  # type: ignore[attr-defined]
        return EXIT_USAGE
    if "UsageError" in names:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "kprobe"
        fail(f"kprobe: error: {exc.format_message()} (see `{command} --help`)", EXIT_USAGE,  # type: ignore[attr-defined]
             secrets)
    fail(f"kprobe: error: {exc.format_message()}", exc.exit_code, secrets)  # type: ignore[attr-defined]


def guard(run: Callable[[], int], secrets: list[str]) -> NoReturn:
    """Run a command: one line per error, never a traceback, never a secret; exit with its code."""
    # SIGPIPE stays ignored (Python's default): a broker closing a socket mid-write must raise
    # EPIPE, not kill the run. A closed stdout (`kprobe ... | head`) is handled below.
    try:
        code = run()
    except KprobeError as exc:
        fail(f"kprobe: error: {exc}", exc.exit_code, secrets)
    except KeyboardInterrupt:
        sys.stderr.write("\n")  # as click does before its Abort: the line starts below the terminal's ^C
        fail("kprobe: interrupted", EXIT_INTERRUPTED, secrets)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the reader left: stop quietly
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        fail(f"kprobe: error: {exc.strerror or exc} ({exc.filename or 'I/O'})", EXIT_ERROR, secrets)
    except Exception as exc:
        names = _click_names(exc)
        if names:
            code = _click_exit(exc, names, secrets)
        else:
            # A bug. Exit 3, "the run failed": 1 would tell a script the brokers have a gap.
            if os.environ.get("KPROBE_DEBUG"):
                raise
            fail(f"kprobe: internal error: {exc.__class__.__name__}: {str(exc)[:200]} "
                 "(please report it; KPROBE_DEBUG=1 shows the traceback)", EXIT_FAILED, secrets)
    sys.exit(code)
