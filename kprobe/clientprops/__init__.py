"""The client configuration users already have: Java client properties, librdkafka and kcat files, JAAS, key stores.

The package itself holds only the lookup of kcat's own file: every probe asks whether there is one,
and the answer (a stat or two) must not load the readers (kprobe.config reads files only when there
are some; tests/test_imports.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kprobe.errors import UsageError


def kcat_config_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The kcat configuration file, where kcat looks for it when no -F is given; None if absent.

    `$KCAT_CONFIG` names it (and must exist, as kcat insists); else `~/.config/kcat.conf`, then the
    older `~/.config/kafkacat.conf`.
    """
    env = os.environ if env is None else env
    named = env.get("KCAT_CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise UsageError(f"KCAT_CONFIG names {named}, which is not a readable file: fix the variable, unset it, "
                             "or give a file with -F")
        return path
    home = env.get("HOME")
    if not home:
        return None
    for name in ("kcat.conf", "kafkacat.conf"):
        path = Path(home) / ".config" / name
        if path.is_file():
            return path
    return None
