"""The job's state between runs: what it has read, the flat records, the per-day rollups.

Why a manifest and not Structured Streaming's checkpoint: the job reads three kinds of file and
topics in one batch, must count every record exactly once across runs, and must merge history
by day rather than recompute it; one JSON manifest, written last and atomically, says all of
it. Layout of a state directory (default `OUT/.state`, or `--state DIR`):

    .kprobe-aggregate-state   marker: this directory is kprobe's (written first)
    state.json                the manifest: the commit point of a run (see Manifest)
    records/run=N/kind=K/d=DAY/   flat rows a run read (r reports, o observations, q quarantined)
    rollups/run=N/d=DAY/      a day's rollup as a run computed it: of the whole day, or of the run's
                              own reports on it (a segment; the manifest lists a day's segments)
    copies/run=N/             report ids that came more than once, with the copy kept

A run writes only under its own `run=N` directories, then replaces state.json (write, fsync,
rename). Killed before that rename, the run left nothing the next one reads: the next run
deletes those directories and reads the same inputs again. Killed after it, the state is
complete; the outputs, always rebuilt from the state, are rebuilt by the next run.

Nothing here imports pyspark: the state is checked before Spark starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kprobe.errors import UsageError
from kprobe.output.files import write_atomic
from kprobe.records import field, fields, record

# /2: the kept flat rows' `failure` and `n_reach` count `degraded` as connecting and `partial`
# as a gap; rows kept by /1 counted otherwise, so a /1 state is refused (run --full) rather than mixed in.
# /3: each observation keeps the findings about its endpoint (`concerns`, with message and fix)
# and the rollups a `fe` part; rows kept by /2 have neither, so a /2 state is refused the same way.
FORMAT = "kprobe.aggregate.state/3"
MARK = ".kprobe-aggregate-state"
MANIFEST = "state.json"
LOCK = ".lock"
STATE_NAME = ".state"  # the default state directory inside --out


@record(frozen=False)
class Manifest:
    """What the committed runs have done, all of it (a run's work counts once it is in here)."""

    run: int = 0  # the last committed run
    files: dict[str, list[int]] = field(default_factory=dict)  # path -> [size, modification time in ns]
    topics: dict[str, dict[str, int]] = field(default_factory=dict)  # bootstrap/topic -> partition -> next offset
    records: list[list[Any]] = field(default_factory=list)  # [run, kind, day] partitions of records/
    # day -> the runs whose rollups of it are current, in time order: one rollup of the whole day, or
    # segments that follow one another in time, each of one run's reports (see job._roll_up)
    rollups: dict[str, list[int]] = field(default_factory=dict)
    copies: int | None = None  # the run whose copies/ table is current (None: no id came twice)
    counts: dict[str, Any] = field(default_factory=lambda: {
        "input_records": 0, "quarantined": 0, "usable": 0, "ids": 0, "quarantine_reasons": {}})

    def to_json(self) -> str:
        """The manifest as written, its format named first so a foreign or future one is told apart."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps({"format": FORMAT, **values}, indent=1, sort_keys=True) + "\n"


def default_dir(out: str) -> str:
    """The state directory of an --out given no --state: inside it, hidden from Spark's readers."""
    return out.rstrip("/") + "/" + STATE_NAME


def _corrupt(root: Path, why: str) -> UsageError:
    return UsageError(f"the state in {root} is unreadable ({why}): run with --full to rebuild it from the inputs, "
                      "or give another --state")


def load(root: Path) -> Manifest:
    """The committed manifest, or an empty one for a state that never committed; one line if it is not kprobe's.

    Checked before Spark starts: a foreign directory (not empty, no marker) is never written
    into, and a damaged state is never silently replaced by a partial or full result.
    """
    if not root.exists():
        return Manifest()
    if not root.is_dir():
        raise UsageError(f"bad --state {str(root)!r}: it is a file, give a directory")
    if not (root / MARK).exists():
        if any(p.name != LOCK for p in root.iterdir()):
            raise UsageError(f"bad --state {str(root)!r}: it is a non-empty directory that is not kprobe aggregate's "
                             "state; give a new or empty directory")
        return Manifest()
    path = root / MANIFEST
    if not path.exists():
        return Manifest()  # marked, never committed: a first run that stopped early
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise _corrupt(root, f"{MANIFEST}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise _corrupt(root, f"{MANIFEST} is not {FORMAT} but {found!r}")
    data.pop("format")
    try:
        manifest = Manifest(**data)
        manifest.run = int(manifest.run)
        int(manifest.counts["input_records"])
        # A day's single run, as states written before segments have it, is a list of one.
        manifest.rollups = {str(d): _runs(r) for d, r in manifest.rollups.items()}
    except (TypeError, KeyError, ValueError) as exc:
        raise _corrupt(root, f"{MANIFEST}: {exc}") from None
    missing = [p for p in _referenced(root, manifest) if not p.is_dir()]
    if missing:
        raise _corrupt(root, f"{len(missing)} of its directories are missing, e.g. {missing[0]}")
    return manifest


def _runs(value: Any) -> list[int]:
    """A day's rollup runs as the manifest gives them (a bare run: a state from before segments)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and value and all(isinstance(r, int) and not isinstance(r, bool) for r in value):
        return list(value)
    raise TypeError(f"a day's rollups are {value!r}, not a list of runs")


def _referenced(root: Path, m: Manifest) -> list[Path]:
    paths = [root / "records" / f"run={r}" / f"kind={k}" / f"d={d}" for r, k, d in m.records]
    paths += [root / "rollups" / f"run={r}" / f"d={d}" for d, runs in m.rollups.items() for r in runs]
    if m.copies is not None:
        paths.append(root / "copies" / f"run={m.copies}")
    return paths


def check(root: Path, full: bool) -> None:
    """Refuse, in one line, a state that `prepare` would not build on (a file, a foreign or damaged directory).

    With --full a damaged state of kprobe's is fine (it is emptied); a foreign directory never is.
    """
    if not full or not (root / MARK).exists():
        load(root)


def prepare(root: Path, full: bool) -> Manifest:
    """The state to build on: checked (see `load`), created with its marker if new, emptied for --full.

    --full empties only a directory that carries the marker, never a foreign one.
    """
    check(root, full)
    manifest = None if full else load(root)
    if full:
        if root.exists() and (root / MARK).exists():
            for child in root.iterdir():
                if child.name not in (MARK, LOCK):
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        manifest = Manifest()
    root.mkdir(parents=True, exist_ok=True)
    mark = root / MARK
    if not mark.exists():
        mark.write_text("kprobe aggregate's state: what it has read and its per-day rollups; "
                        "delete it (or run with --full) to start over\n")
    assert manifest is not None
    return manifest


class StateBusy(UsageError):
    """Another run holds the state (a run with --keep-warm then waits its turn in the warm driver instead)."""


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """One run at a time on a state: a second one gets one line instead of corrupting the first's."""
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StateBusy(f"another kprobe aggregate is running on the state in {root}; wait for it") from None
        yield
    finally:
        os.close(fd)


def commit(root: Path, manifest: Manifest) -> None:
    """Make the run's work count: the manifest written aside, flushed to disk, renamed over the old one."""
    write_atomic(root / MANIFEST, manifest.to_json())


def collect_garbage(root: Path, manifest: Manifest) -> None:
    """Delete what the manifest does not reference: a killed run's directories, replaced rollups."""
    keep = {p.resolve() for p in _referenced(root, manifest)}
    for table, depth in (("records", 3), ("rollups", 2), ("copies", 1)):
        base = root / table
        if not base.is_dir():
            continue
        for run_dir in base.iterdir():
            if not any(k == run_dir.resolve() or run_dir.resolve() in k.parents for k in keep):
                shutil.rmtree(run_dir, ignore_errors=True)
                continue
            if depth > 1:
                for leaf in run_dir.glob("/".join(["*"] * (depth - 1))):
                    if leaf.is_dir() and leaf.resolve() not in keep and not any(
                            leaf.resolve() in k.parents for k in keep):
                        shutil.rmtree(leaf, ignore_errors=True)
    for stray in root.glob(f".{MANIFEST}.*"):
        stray.unlink(missing_ok=True)


def written(run_dir: Path) -> list[tuple[str, str]]:
    """The (kind, day) partitions a run wrote under records/run=N (or (day,) under rollups/run=N as ('', day))."""
    found = []
    for kind_dir in sorted(run_dir.glob("kind=*")):
        found += [(kind_dir.name[5:], d.name[2:]) for d in sorted(kind_dir.glob("d=*"))]
    found += [("", d.name[2:]) for d in sorted(run_dir.glob("d=*"))]
    return found


def recover(out: Path) -> None:
    """Put the state back in --out after a run was killed while swapping its new output in.

    The swap moves OUT/.state into the new output before renaming it to OUT; a kill in between
    leaves the state in `.OUT.staging-*`. That staging output is complete, so it becomes OUT.
    """
    if (out / STATE_NAME / MARK).exists():
        return
    stagings = sorted(out.parent.glob(f".{out.name}.staging-*"), key=lambda p: p.stat().st_mtime)
    with_state = [s for s in stagings if (s / STATE_NAME / MARK).exists()]
    if not with_state:
        return
    staging = with_state[-1]
    if out.exists():
        out.rename(out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    staging.rename(out)
    for old in out.parent.glob(f".{out.name}.old-*"):
        shutil.rmtree(old, ignore_errors=True)
