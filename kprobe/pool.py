"""A bounded pool of daemon threads with a deadline, for blocking network calls.

Why not concurrent.futures: its worker threads are joined at interpreter exit, so one
getaddrinfo or TLS handshake stuck in the kernel would hold the process past its deadline.
Daemon workers are abandoned instead, and a broker that advertises 10,000 endpoints costs
`workers` threads, not 10,000.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_bounded(
    items: Sequence[T], work: Callable[[T], R], *, workers: int, deadline: float
) -> dict[int, R]:
    """Results by item index for the items finished before `deadline` (a monotonic time).

    An exception in `work` is the caller's bug to prevent: the item is simply left out, like
    an item the deadline cut off, and the caller reports it as not done.
    """
    results: dict[int, R] = {}
    if not items:
        return results
    pending: queue.Queue[int] = queue.Queue()
    for index in range(len(items)):
        pending.put(index)
    lock = threading.Lock()
    done = threading.Event()
    remaining = [len(items)]

    def worker() -> None:
        while time.monotonic() < deadline:
            try:
                index = pending.get_nowait()
            except queue.Empty:
                return
            try:
                value = work(items[index])
                with lock:
                    results[index] = value
            except Exception:  # left out: the caller reports it as not done
                pass
            finally:
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        done.set()

    for _ in range(max(1, min(workers, len(items)))):
        threading.Thread(target=worker, daemon=True).start()
    done.wait(max(0.0, deadline - time.monotonic()))
    with lock:
        return dict(results)
