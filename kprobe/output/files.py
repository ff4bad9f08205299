"""Writing reports so that a reader never sees half of one, to paths checked before the run.

Temporary file in the same directory, fsync, then rename (replace) or link (never replace),
then fsync the directory: on a crash or a full disk the report is whole or absent, and no
temporary file is left.

Modes, as `>` in a shell would leave them: a new file gets what the umask allows (0666 & ~umask,
0644 under the usual 022), and a file replaced keeps its mode (and its group, where the OS lets
us), so a `.prom` file that node_exporter, another user, reads stays readable after every run.
Only files no one else should read (`private=True`: the publishing spool) are created 0600.
`mkstemp` would make every file 0600 and the rename would carry that over.

The output paths are tried before anything is probed (`check_file`, `prepare_dir`), so a path
that cannot be written is bad input (exit 2) at once, not an error after a run of up to
--deadline. Trying means creating a file: `os.access` says yes to root everywhere (a read-only
file system included) and to anyone under /proc, where nothing can be created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from pathlib import Path

from kprobe.errors import KprobeError, UsageError


def _temporary(directory: Path, name: str, mode: int) -> tuple[int, str]:
    """A new hidden file beside the target, created with `mode` (the kernel applies the umask).

    As mkstemp does (O_EXCL, a random name, retried on a clash), but with the mode asked for.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(directory))


def _keep_mode_of(path: Path, fd: int) -> None:
    """Give the new file the mode (and, where allowed, the group) of the regular file it replaces."""
    try:
        old = os.lstat(path)
    except OSError:
        return  # nothing there (or nothing we may look at): the umask's mode stands
    if not stat.S_ISREG(old.st_mode):
        return  # a symbolic link is replaced, not followed: its target's mode is not ours to copy
    os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)
    if old.st_gid != os.fstat(fd).st_gid:
        with contextlib.suppress(OSError):  # only root, or a member of that group, may keep it
            os.fchown(fd, -1, old.st_gid)


def _write_whole(path: Path, text: str, *, replace: bool, private: bool = False) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = _temporary(directory, path.name, 0o600 if private else 0o666)
    except OSError as exc:
        raise KprobeError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        # backslashreplace: text holding a lone surrogate (a non-UTF-8 byte kept from the
        # network) is written as visible `\udcff` text instead of failing the whole report.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            if replace and not private:
                _keep_mode_of(path, handle.fileno())
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


def write_atomic(path: Path, text: str, *, private: bool = False) -> None:
    """Replace `path` with `text` atomically; KprobeError with the reason on failure.

    The file keeps the mode of the one it replaces, or gets the umask's; `private`: always 0600.
    """
    _write_whole(path, text, replace=True, private=private)


def write_new(path: Path, text: str, *, private: bool = False) -> None:
    """Like write_atomic, but never replaces an existing file (a new file: the umask's mode, or 0600)."""
    _write_whole(path, text, replace=False, private=private)


def report_path(out_dir: Path, vantage: str, started_at: str, report_id: str) -> Path:
    """`DIR/<date>/<vantage>-<timestamp>-<id>.json`: sortable, unique, safe as a file name."""
    safe_vantage = "".join(c if c.isalnum() or c in "-_." else "_" for c in vantage)[:64] or "vantage"
    stamp = started_at.replace(":", "").replace("-", "")  # 20261122T180000.123Z
    return out_dir / started_at[:10] / f"{safe_vantage}-{stamp}-{report_id}.json"


def check_file(path: Path, flag: str) -> None:
    """An `-o`/`--prom-file` FILE: its directory must exist (kprobe makes only output *directories*,
    so a typo in a file's path is not silently made) and take a new file; UsageError otherwise.
    """
    if _kind(path, flag, path) == "dir":
        raise UsageError(f"cannot write {flag} {path}: it is a directory, give a file name")
    parent = path.parent
    kind = _kind(parent, flag, path)
    if kind is None:
        raise UsageError(f"cannot write {flag} {path}: directory {parent} does not exist: make it first, "
                         "or give a path in an existing directory")
    if kind != "dir":
        raise UsageError(f"cannot write {flag} {path}: {parent} is a file, not a directory: "
                         "give a path in a directory")
    _try_new_file(parent, flag, path)


def prepare_dir(directory: Path, flag: str) -> None:
    """An output DIR (`--out`, `--spool`): made with its parents if missing, as `mkdir -p` would
    and as users expect of an option naming where files go, then tried; UsageError otherwise.
    """
    if _kind(directory, flag, directory) not in (None, "dir"):
        raise UsageError(f"cannot write {flag} {directory}: it is a file, give a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        failed = exc.filename if exc.filename is not None else directory
        reason = _reason(exc)
        if exc.errno == errno.ENOTDIR:  # "not a directory" does not say which: name the file in the way
            blocker = next((p for p in Path(failed).parents if _kind(p, flag, directory) == "file"), None)
            reason = f"{blocker} is a file, not a directory" if blocker is not None else reason
        raise UsageError(f"cannot write {flag} {directory}: cannot create directory {failed}: {reason}: "
                         f"{_fix(exc)}") from None
    _try_new_file(directory, flag, directory)


def _kind(path: Path, flag: str, shown: Path) -> str | None:
    """"dir", "file" (anything else that exists) or None (absent), following symbolic links."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # e.g. a directory on the way that may not be searched
        raise UsageError(f"cannot write {flag} {shown}: cannot look at {path}: {_reason(exc)}: {_fix(exc)}") from None
    return "dir" if stat.S_ISDIR(mode) else "file"


def _try_new_file(directory: Path, flag: str, shown: Path) -> None:
    """Create and remove a hidden temporary file: the one test the kernel answers truthfully."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kprobe-check.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"cannot write {flag} {shown}: cannot create a file in {directory}: {_reason(exc)}: "
                         f"{_fix(exc)}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _reason(exc: OSError) -> str:
    """The OS's own words (`Read-only file system` -> `read-only file system`), mid-sentence."""
    text = exc.strerror or exc.__class__.__name__
    return text[:1].lower() + text[1:]


def _fix(exc: OSError) -> str:
    """What to do about it: the reason decides (another file system, other rights, more space)."""
    if exc.errno == errno.EROFS:
        return "give a directory on a writable file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "give a directory you may write to, or make this one writable"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, or give a directory on another file system"
    if exc.errno == errno.ENOENT:  # in a directory that exists: a file system without files of its own
        return "give a directory on a file system that stores files (not /proc or /sys)"
    return "give another directory"
