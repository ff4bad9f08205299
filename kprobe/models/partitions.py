"""A topic's partitions as runs of columns: 100,000 partitions decode and render in bulk without an
object each, and a run's size stays bounded however big a topic or its replica lists are.

Apart from the report's models because it is the one part of them built for speed rather than
reading; `kprobe.models` re-exports it, so callers name one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from kprobe.records import record

# Kafka's error code for a partition whose leader has no endpoint on the listener the request came in on:
# the leader is there, but not for a client of this listener, so the partition is not offline.
LISTENER_NOT_FOUND = 72

@record(kw_only=True)
class PartitionInfo:
    """One partition as a Metadata response describes it."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isrs: tuple[int, ...]
    offline: tuple[int, ...] = ()
    error_code: int = 0


# The most partitions, and the most values, one run holds: what is unpacked or formatted at once
# stays bounded (a compiled struct format and a %-template per run length take memory in
# proportion), however big a topic or its replica lists are.
RUN_MAX = 1024
RUN_VALUES_MAX = 16_384


def run_limit(replicas: int, isrs: int, offline: int) -> int:
    """The most partitions of this shape one run holds."""
    return max(1, min(RUN_MAX, RUN_VALUES_MAX // (2 + replicas + isrs + offline)))


@record(slots=True)
class PartitionRun:
    """Partitions of one topic with one error code and the same replica-list lengths, as columns.

    One flat tuple of ints per run instead of objects per partition: a cluster of 100,000
    partitions decodes with a `struct` call per run and renders with a %-format per run, both in
    C (`kprobe list` at kcat's pace), in a few MB. `values` holds, per partition: its id, its
    leader, then `replicas` replica ids, `isrs` in-sync ids and `offline` offline ids. A run is
    either a stretch of the broker's answer (`order` None: its partitions stood at `start`,
    `start + 1`, ...) or gathers same-shaped partitions from a topic of mixed shapes (`order`
    says where each stood), so a topic whose ISRs shrank still renders a run at a time.
    """

    error_code: int
    replicas: int
    isrs: int
    offline: int
    values: tuple[int, ...]
    start: int = 0
    order: tuple[int, ...] | None = None

    @property
    def stride(self) -> int:
        """How many values each partition takes."""
        return 2 + self.replicas + self.isrs + self.offline

    def __len__(self) -> int:
        return len(self.values) // self.stride

    @property
    def ids(self) -> tuple[int, ...]:
        """The partition ids, in the run's order."""
        return self.values[0::self.stride]

    @property
    def leaders(self) -> tuple[int, ...]:
        """Each partition's leader (-1: none)."""
        return self.values[1::self.stride]

    @property
    def positions(self) -> Sequence[int]:
        """Where each partition stood in the broker's answer (ties between equal ids keep that order)."""
        return self.order if self.order is not None else range(self.start, self.start + len(self))

    def info(self, i: int) -> PartitionInfo:
        """Partition number `i` of the run as a model object (made on demand: most runs never need one)."""
        at = i * self.stride
        v = self.values
        r, s = at + 2 + self.replicas, at + 2 + self.replicas + self.isrs
        return PartitionInfo(partition=v[at], leader=v[at + 1], replicas=v[at + 2:r], isrs=v[r:s],
                             offline=v[s:s + self.offline], error_code=self.error_code)


class RunBuilder:
    """Partitions added one at a time in the answer's order, grouped into stretches of one shape."""

    def __init__(self) -> None:
        self.runs: list[PartitionRun] = []
        self.added = 0  # partitions so far, runs appended whole included
        self._key: tuple[int, int, int, int] | None = None
        self._values: list[int] = []
        self._start = 0

    def add(self, error_code: int, partition: int, leader: int, replicas: Sequence[int], isrs: Sequence[int],
            offline: Sequence[int]) -> None:
        """Append one partition."""
        key = (error_code, len(replicas), len(isrs), len(offline))
        if key != self._key or self.added - self._start == run_limit(*key[1:]):
            self._flush()
            self._key, self._start = key, self.added
        self._values += (partition, leader)
        self._values += replicas
        self._values += isrs
        self._values += offline
        self.added += 1

    def append(self, run: PartitionRun) -> None:
        """Append a whole run decoded elsewhere (in bulk), whose positions count from `added`."""
        self._flush()
        self.runs.append(run)
        self.added += len(run)

    def _flush(self) -> None:
        if self._key is not None and self._values:
            self.runs.append(PartitionRun(*self._key, values=tuple(self._values), start=self._start))
        self._key, self._values = None, []

    def table(self) -> PartitionTable:
        """The partitions added so far."""
        self._flush()
        return PartitionTable(self.runs)


class PartitionTable(Sequence[PartitionInfo]):
    """A topic's partitions as runs of columns (`PartitionRun`), readable as a sequence of `PartitionInfo`.

    As a sequence the partitions come in id order (librdkafka's, so kcat's), equal ids in the
    answer's order. The probe path reads partitions one by one as before; `kprobe list` reads the
    runs and never makes an object per partition. Equal to any sequence of the same partitions.
    """

    __slots__ = ("_listed", "in_order", "runs")

    def __init__(self, runs: Iterable[PartitionRun] = ()) -> None:
        self.runs: tuple[PartitionRun, ...] = tuple(run for run in runs if len(run))
        # Whether the runs, one after the other, already are the partitions in id order (as brokers send them).
        self.in_order = _stretches_in_order(self.runs)
        self._listed: list[tuple[PartitionRun, int]] | None = None

    @classmethod
    def of(cls, partitions: Iterable[PartitionInfo]) -> PartitionTable:
        """A table of model objects (librdkafka's answer, tests), in their order."""
        if isinstance(partitions, PartitionTable):
            return partitions
        builder = RunBuilder()
        for p in partitions:
            builder.add(p.error_code, p.partition, p.leader, p.replicas, p.isrs, p.offline)
        return builder.table()

    def _list(self) -> list[tuple[PartitionRun, int]]:
        if self._listed is None:
            if self.in_order:
                self._listed = [(run, i) for run in self.runs for i in range(len(run))]
            else:
                keyed = sorted((pid, at, n, i) for n, run in enumerate(self.runs)
                               for i, (pid, at) in enumerate(zip(run.ids, run.positions, strict=True)))
                self._listed = [(self.runs[n], i) for _, _, n, i in keyed]
        return self._listed

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @overload
    def __getitem__(self, index: int) -> PartitionInfo: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[PartitionInfo, ...]: ...

    def __getitem__(self, index: int | slice) -> PartitionInfo | tuple[PartitionInfo, ...]:
        if isinstance(index, slice):
            return tuple(run.info(i) for run, i in self._list()[index])
        run, i = self._list()[index]
        return run.info(i)

    def __iter__(self) -> Iterator[PartitionInfo]:
        for run, i in self._list():
            yield run.info(i)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"PartitionTable({list(self)!r})"


def _stretches_in_order(runs: Sequence[PartitionRun]) -> bool:
    at, last = 0, None
    for run in runs:
        ids = run.ids
        if run.order is not None or run.start != at or (last is not None and ids[0] < last) or list(ids) != sorted(ids):
            return False
        at, last = at + len(run), ids[-1]
    return True
