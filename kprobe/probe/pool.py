"""A bounded pool of daemon threads with deadlines, for blocking network calls.

Why not concurrent.futures: its worker threads are joined at interpreter exit, so one
getaddrinfo or TLS handshake stuck in the kernel would hold the process past its deadline.
Daemon workers are abandoned instead, and a broker that advertises 10,000 endpoints costs
`workers` threads, not 10,000. Work can be fed while earlier work runs (an identity check
starts the moment its endpoint connects, while other connects still wait on blackholes).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class BoundedPool(Generic[T, R]):
    """At most `workers` threads run `work`; each item has its own deadline.

    An exception in `work` is a bug in a step, never a network outcome (steps return failures
    as data): `results()` raises it in the caller's thread, so it surfaces as an internal error
    instead of passing for an item the deadline cut off ("not resolved before the deadline").
    """

    def __init__(self, work: Callable[[T], R], *, workers: int) -> None:
        self._work = work
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._todo: deque[tuple[int, T, float]] = deque()
        self._running = 0
        self._unsettled = 0
        self._results: dict[int, R] = {}
        self._failure: BaseException | None = None

    def submit(self, key: int, item: T, deadline: float) -> None:
        """Queue one item; it is started only before `deadline` (a monotonic time)."""
        with self._lock:
            self._todo.append((key, item, deadline))
            self._unsettled += 1
            if self._running < self._workers:
                self._running += 1
                threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._todo:
                    self._running -= 1  # under the lock: a submit then starts a new worker
                    return
                key, item, deadline = self._todo.popleft()
            try:
                if time.monotonic() < deadline:
                    value = self._work(item)
                    with self._lock:
                        self._results[key] = value
            except Exception as exc:  # a bug: kept for results() to raise, first one wins
                with self._lock:
                    if self._failure is None:
                        self._failure = exc
            finally:
                with self._lock:
                    self._unsettled -= 1
                    if self._unsettled == 0 or self._failure is not None:
                        self._settled.notify_all()

    def results(self, deadline: float) -> dict[int, R]:
        """Results by key of what finished: waits until everything is done or `deadline` passes.

        Raises the first exception a work item raised (see the class docstring).
        """
        with self._lock:
            while self._unsettled and self._failure is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._settled.wait(remaining)
            if self._failure is not None:
                raise self._failure
            return dict(self._results)


def run_bounded(
    items: Sequence[T], work: Callable[[T], R], *, workers: int, deadline: float
) -> dict[int, R]:
    """Results by item index for the items finished before `deadline` (a monotonic time)."""
    pool: BoundedPool[T, R] = BoundedPool(work, workers=min(workers, len(items)))
    for index, item in enumerate(items):
        pool.submit(index, item, deadline)
    return pool.results(deadline)
