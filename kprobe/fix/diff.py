"""The unified diff of one file, as `patch -p0` and `git apply -p0` take it."""

from __future__ import annotations

import difflib


def unified(path: str, old: str, new: str) -> str:
    """A unified diff of one file, `--- path` and `+++ path` as given (no a/ b/), a missing last newline marked."""
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path,
                                      tofile=path))
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
