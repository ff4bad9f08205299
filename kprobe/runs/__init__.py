"""The runs a command starts: a probe of every bootstrap, a kcat-style listing, a check of listener files.

Each takes validated options (kprobe.config) and returns data (kprobe.models); none prints.
"""

from __future__ import annotations

import datetime as dt


def now_rfc3339() -> str:
    """UTC with milliseconds, as the report contract says; here, not in a run, so that every run stamps its
    times alike without importing another (a `check` without --probe never loads the probe's modules).
    """
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
