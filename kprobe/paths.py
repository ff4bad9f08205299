"""Where kprobe keeps its files on the user's machine.

A leaf module (the standard library only), so that the core (the report spool), the lab (broker
jars, detached lab state) and the aggregate job (Spark's Kafka source, Spark's log) can all
find the cache without one importing another.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Kprobe's cache: `KPROBE_CACHE_DIR`, else `$XDG_CACHE_HOME/kprobe`, else `~/.cache/kprobe`.

    Not created here: each user of the cache makes the directory it writes, so a run that only
    reads (or never needs the cache) leaves the home directory alone.
    """
    base = os.environ.get("KPROBE_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kprobe"
