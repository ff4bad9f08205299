"""Directories and child processes that trust nothing another local user can write.

Why: the namespace lab runs as root, and the warm driver and detached labs outlive the command
that started them. A directory in a shared place (the temp directory) that another user made
first, or a `kprobe/` package planted in the directory a command runs from, would let that user
steer what root writes or runs. (Files in such a directory are written by kprobe.output.files,
never through a link.) Leaf module (the standard library only).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path


class UnsafePath(OSError):
    """A directory or file kprobe will not use: another user owns it, may write it, or it is a link."""


def private_dir(path: Path, mode: int = 0o700) -> Path:
    """`path` as a directory only this user can use: made with `mode`, or an existing one checked.

    An existing directory is accepted only when it is a real directory (not a link), owned by this
    user and open to nobody else; otherwise UnsafePath says which and what to do. Its parent must
    already exist: a chain of directories made on the way would each need the same checks.
    """
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"{path} is not a directory of its own (a link or a file): remove it and try again")
    if info.st_uid != os.geteuid():
        raise UnsafePath(f"{path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()}): "
                         f"remove it and try again")
    if info.st_mode & 0o077:
        raise UnsafePath(f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}): "
                         f"remove it, or chmod 700 it, and try again")
    return path


def python_argv(module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args` with this interpreter, never importing from
    the current directory.

    Why: `python -m` puts the working directory first on `sys.path`, so a `kprobe/` planted there is
    what runs (as root, for the lab). `-P` (Python 3.11+) leaves it out; earlier, the same through a
    `-c` that drops it before importing the module. PYTHONPATH and site-packages stay as they are.
    """
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _WITHOUT_PATH0.format(module=module), *args]


_WITHOUT_PATH0 = "import runpy, sys; del sys.path[0]; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
