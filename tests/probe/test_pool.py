"""The bounded pool that runs every blocking network call: bounds, deadlines, feeding while it runs."""

from __future__ import annotations

import threading
import time

import pytest

from kprobe.probe.pool import BoundedPool, run_bounded


def test_results_by_index():
    assert run_bounded(list(range(6)), lambda n: n * n, workers=4, deadline=time.monotonic() + 5) == {
        0: 0, 1: 1, 2: 4, 3: 9, 4: 16, 5: 25}


def test_a_bug_in_one_item_is_raised_not_taken_for_a_timeout():
    """Steps return network failures as data, so an exception is a bug: it must surface in the
    caller (once it was swallowed, and the item was reported "not resolved before the deadline")."""
    def work(n: int) -> int:
        if n == 3:
            raise ValueError("a bug in one item")
        time.sleep(0.01)
        return n * n

    started = time.monotonic()
    with pytest.raises(ValueError, match="a bug in one item"):
        run_bounded(list(range(6)), work, workers=4, deadline=time.monotonic() + 30)
    assert time.monotonic() - started < 5  # raised when it happened, not at the deadline


def test_never_more_threads_than_workers():
    running, peak, lock = [0], [0], threading.Lock()

    def work(_: int) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    done = run_bounded(list(range(40)), work, workers=5, deadline=time.monotonic() + 10)
    assert len(done) == 40 and peak[0] == 5


def test_the_deadline_returns_what_finished_and_abandons_the_rest():
    release = threading.Event()

    def work(n: int) -> int:
        if n == 1:
            release.wait(10)  # stuck, like a getaddrinfo in the kernel
        return n

    started = time.monotonic()
    done = run_bounded([0, 1, 2], work, workers=3, deadline=time.monotonic() + 0.3)
    assert done == {0: 0, 2: 2}
    assert time.monotonic() - started < 1.0
    release.set()


def test_work_fed_while_earlier_work_runs_starts_at_once():
    """What lets an identity check start while other connects still wait out their timeout."""
    began: dict[int, float] = {}
    pool: BoundedPool[int, int] = BoundedPool(lambda n: began.setdefault(n, time.monotonic()) and n, workers=8)
    t0 = time.monotonic()
    pool.submit(0, 0, t0 + 5)
    time.sleep(0.2)  # the first worker finished and left: a new submit must start a new one
    fed = time.monotonic()
    pool.submit(1, 1, t0 + 5)
    results = pool.results(t0 + 5)
    assert results == {0: 0, 1: 1}
    # Started when fed, not when something else woke the pool (the deadline, 4.8 s later). Timed from the
    # submit, not from t0: the sleep above is part of t0's figure, and on two busy cores (a fresh clone's
    # suite) the start once came 0.415 s after t0, past the 0.4 s this test allowed from there.
    assert began[1] - fed < 1.5


def test_an_item_past_its_own_deadline_is_not_started():
    calls: list[int] = []
    pool: BoundedPool[int, int] = BoundedPool(lambda n: calls.append(n) or n, workers=1)
    pool.submit(0, 0, time.monotonic() - 1)  # already late
    pool.submit(1, 1, time.monotonic() + 5)
    assert pool.results(time.monotonic() + 5) == {1: 1}
    assert calls == [1]
