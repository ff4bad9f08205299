"""The runs a command starts: a probe of every bootstrap, a kcat-style listing, a check of listener files.

Each takes validated options (kprobe.options) and returns data (kprobe.models); none prints.
"""

from __future__ import annotations

import datetime as dt
import os


def now_rfc3339() -> str:
    """UTC with milliseconds, as the report contract says; here, not in a run, so that every run stamps its
    times alike without importing another (a `check` without --probe never loads the probe's modules).
    """
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def report_id() -> str:
    """A report's id: a random (version 4) UUID, spelt as `str(uuid.uuid4())` spells it, the same for every run.

    Why not `uuid`: it imports `platform`, a measurable part of a probe's start, for sixteen random bytes.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
