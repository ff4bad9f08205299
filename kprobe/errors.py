"""Domain errors, turned into one-line messages and exit codes in one place: the CLI."""

from __future__ import annotations

EXIT_OK = 0
EXIT_GAP = 1
EXIT_USAGE = 2
# The run failed: no bootstrap answered, or kprobe itself failed (an internal error, a bug). A
# bug must never read as 1: a script would take it for a gap the brokers have.
EXIT_FAILED = 3
EXIT_INTERRUPTED = 130
# A known trouble after the input was accepted (a report that cannot be written once the probe
# ran, a lab that does not start, a closed stdout). It shares 1 with EXIT_GAP, as it always has:
# scripts and tests rely on it, so it is named here rather than changed.
EXIT_ERROR = 1


class KprobeError(Exception):
    """Base: a problem to tell the user in one line, with the exit code it deserves."""

    exit_code = EXIT_ERROR


class UsageError(KprobeError):
    """Bad input: the message says what is wrong and what to do instead."""

    exit_code = EXIT_USAGE


class LabError(KprobeError):
    """The lab could not start or stop; the message names the missing piece."""

    exit_code = EXIT_ERROR


class BadReport(UsageError):
    """A saved report that cannot be read: not a report, another major version, cut short, or broken."""
