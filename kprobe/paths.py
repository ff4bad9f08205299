"""Where kprobe keeps its files on the user's machine.

A leaf module (the standard library only), so that the core (the report spool), the lab (broker
jars, detached lab state) and the aggregate job (Spark's Kafka source, Spark's log) can all
find the cache without one importing another.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
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


def class_archive(folder: str, name: str, java: str, *facts: str, files: Iterable[str] = ()) -> Path:
    """Where a JVM's class-data archive (AppCDS) is kept: `<cache>/<folder>/<name>-<key>[-<files' key>].jsa`.

    The key names the JDK, its `java` (path and modification time) and its own base archive
    (modification time: a dynamic archive holds only over the base it was written on, which a
    package may regenerate in place), then `facts` (a class path, jars, a version), so another JDK
    or other jars get an archive of their own. A JVM given one that does not match its own still
    starts, without it (-Xshare:auto, the default). For the lab's brokers and the aggregation's
    driver alike.

    `files` are the class path's jars. The JVM maps an archive only while each jar has the size and
    modification time it had when the archive was written, and a reinstall (a new venv, the same
    PySpark in the same place) changes every time: an archive keyed without them would be refused
    silently from then on, and never written again. Their second key names the archive apart, and
    `drop_superseded` removes the one it replaces.
    """
    real = os.path.realpath(java)
    stamps = []
    for path in (real, os.path.join(os.path.dirname(os.path.dirname(real)), "lib", "server", "classes.jsa")):
        try:
            stamps.append(str(os.stat(path).st_mtime_ns))
        except OSError:
            stamps.append("?")
    key = hashlib.sha256("\0".join((real, *stamps, *facts)).encode()).hexdigest()[:16]
    jars = []
    for path in files:
        try:
            found = os.stat(path)
        except OSError:
            jars.append(f"{path}:?")
        else:
            jars.append(f"{path}:{found.st_size}:{found.st_mtime_ns}")
    if jars:
        key += "-" + hashlib.sha256("\0".join(jars).encode()).hexdigest()[:8]
    return cache_root() / folder / f"{name}-{key}.jsa"


def put_archive(written: Path, archive: Path) -> None:
    """Put an archive a JVM wrote under a name of its own in place whole, and drop the ones it replaces.

    Renamed, never copied: a JVM never maps a half-written archive. Every writer of an archive goes
    through here, so none leaves the archive of a previous install behind (`drop_superseded`).
    """
    os.replace(written, archive)
    drop_superseded(archive)


def drop_superseded(archive: Path) -> None:
    """Remove the archives `archive` replaces: the same JDK and facts, with jars of another install in
    their name, or with none (`<name>-<key>.jsa`: which install's jars it holds cannot be told).

    Called once `archive` is in place. A JVM mapping one of them keeps its mapping (the file goes
    when the last one ends).
    """
    stem, _, files_key = archive.stem.rpartition("-")
    if not stem or len(files_key) != 8:
        return
    for older in [*archive.parent.glob(f"{stem}-????????.jsa"), archive.parent / f"{stem}.jsa"]:
        if older != archive:
            older.unlink(missing_ok=True)


def remove_stray_dumps(folder: Path, pattern: str) -> None:
    """Remove class-data archives that a JVM was writing for a process now gone (`<pattern>` ending `.<pid>[-...]`).

    Why: an archive is written under a name of its own, with the pid of the process that will rename
    it into place; a process killed first leaves it there, half-written or whole, and never renames it.
    For the lab's brokers and the aggregation's driver alike.
    """
    for stray in folder.glob(pattern):
        pid = stray.name.rsplit(".", 1)[1].split("-", 1)[0]
        if not pid.isdigit() or not os.path.exists(f"/proc/{pid}"):
            stray.unlink(missing_ok=True)
