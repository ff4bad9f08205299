"""The client configuration users already have: Java client properties, librdkafka and kcat files, JAAS, key stores.

The package itself holds only the lookup of kcat's own file: every probe asks whether there is one,
and the answer (a stat or two) must not load the readers (kprobe.options reads files only when there
are some; tests/test_imports.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kprobe.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path


def kcat_config_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The kcat configuration file, where kcat looks for it when no -F is given; None if absent.

    `$KCAT_CONFIG` names it (and must exist, as kcat insists); else `~/.config/kcat.conf`, then the
    older `~/.config/kafkacat.conf`.
    """
    env = os.environ if env is None else env
    named = env.get("KCAT_CONFIG")
    found: str | None = None
    if named:
        found = os.path.expanduser(named)
        if not os.path.isfile(found):
            raise UsageError(f"KCAT_CONFIG names {named}, which is not a readable file: fix the variable, unset it, "
                             "or give a file with -F")
    elif home := env.get("HOME"):
        # os.path, and pathlib only for a file found: most probes have none, and pathlib (with urllib.parse) is
        # a few milliseconds of their start.
        found = next((path for name in ("kcat.conf", "kafkacat.conf")
                      if os.path.isfile(path := os.path.join(home, ".config", name))), None)
    if found is None:
        return None
    from pathlib import Path

    return Path(found)
