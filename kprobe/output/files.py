"""Writing reports so that a reader never sees half of one.

Temporary file in the same directory, fsync, then rename (replace) or link (never replace),
then fsync the directory: on a crash or a full disk the report is whole or absent, and no
temporary file is left.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from kprobe.errors import KprobeError


def _publish(path: Path, text: str, *, replace: bool) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        # backslashreplace: text holding a lone surrogate (a non-UTF-8 byte kept from the
        # network) is written as visible `\udcff` text instead of failing the whole report.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the path exists: reports are never overwritten
    except FileExistsError:
        raise KprobeError(f"cannot write {path}: it already exists (reports are never overwritten)") from None
    except OSError as exc:
        raise KprobeError(f"cannot write {path}: {exc.strerror or exc}") from None
    except (UnicodeError, ValueError) as exc:  # never expected after backslashreplace; still one clean line
        raise KprobeError(f"cannot write {path}: {exc.__class__.__name__}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically; KprobeError with the reason on failure."""
    _publish(path, text, replace=True)


def write_new(path: Path, text: str) -> None:
    """Like write_atomic, but never replaces an existing file."""
    _publish(path, text, replace=False)


def report_path(out_dir: Path, vantage: str, started_at: str, report_id: str) -> Path:
    """`DIR/<date>/<vantage>-<timestamp>-<id>.json`: sortable, unique, safe as a file name."""
    safe_vantage = "".join(c if c.isalnum() or c in "-_." else "_" for c in vantage)[:64] or "vantage"
    stamp = started_at.replace(":", "").replace("-", "")  # 20261122T180000.123Z
    return out_dir / started_at[:10] / f"{safe_vantage}-{stamp}-{report_id}.json"
