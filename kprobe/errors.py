"""Domain errors, turned into one-line messages and exit codes in one place: the CLI."""

from __future__ import annotations

EXIT_OK = 0
EXIT_GAP = 1
EXIT_USAGE = 2
EXIT_NO_BOOTSTRAP = 3
EXIT_INTERRUPTED = 130


class KprobeError(Exception):
    """Base: a problem to tell the user in one line, with the exit code it deserves."""

    exit_code = 1


class UsageError(KprobeError):
    """Bad input: the message says what is wrong and what to do instead."""

    exit_code = EXIT_USAGE


class LabError(KprobeError):
    """The lab could not start or stop; the message names the missing piece."""

    exit_code = 1
