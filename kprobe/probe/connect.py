"""Concurrent TCP connects, one selector loop for every address.

Why not a thread per connect or a sequential loop: the cost of a probe must be about one
connect timeout however many endpoints are blackholed (a manual `nc -z -w T` loop pays one
timeout per endpoint). Non-blocking connects multiplexed in one selector do that with no
threads, and each attempt's timing and error class come back as data.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import time
from collections.abc import Callable, Iterable

from kprobe.models import TcpResult
from kprobe.net.sockets import classify_errno, family_of

BATCH = 512  # file descriptors open at once; far below common ulimits

Target = tuple[str, int]
Record = Callable[[Target, TcpResult], None]


def connect_all(
    targets: Iterable[Target], timeout: float, deadline: float,
    on_result: Record | None = None,
) -> dict[Target, TcpResult]:
    """Try every (address, port) once; each attempt is bounded by `timeout` and `deadline`.

    `on_result` hears of each attempt as it ends, so later steps can start on an address that
    connected while other attempts still wait out their timeout.
    """
    pending = list(dict.fromkeys(targets))
    results: dict[Target, TcpResult] = {}

    def record(target: Target, result: TcpResult) -> None:
        results[target] = result
        if on_result is not None:
            on_result(target, result)

    for start in range(0, len(pending), BATCH):
        _connect_batch(pending[start : start + BATCH], timeout, deadline, record)
    return results


def _connect_batch(batch: list[Target], timeout: float, deadline: float, record: Record) -> None:
    sel = selectors.DefaultSelector()
    started: dict[Target, float] = {}
    try:
        for target in batch:
            address, port = target
            t0 = time.perf_counter()
            try:
                sock = socket.socket(family_of(address), socket.SOCK_STREAM)
            except OSError as exc:
                record(target, TcpResult(address=address, port=port, status="error",
                                         error=f"socket: {exc.strerror}"))
                continue
            sock.setblocking(False)
            code = sock.connect_ex((address, port))
            if code in (0, errno.ECONNREFUSED) or code not in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
                ms = (time.perf_counter() - t0) * 1000
                source = _local_address(sock) if code == 0 else None
                sock.close()
                record(target, _result(address, port, code, ms, source))
                continue
            started[target] = t0
            sel.register(sock, selectors.EVENT_WRITE, target)
        while sel.get_map():
            now = time.perf_counter()
            mono = time.monotonic()
            oldest = min(started[key.data] for key in sel.get_map().values())
            wait = min(oldest + timeout - now, deadline - mono)
            if wait <= 0:
                _expire(sel, started, record, timeout, deadline)
                continue
            for key, _ in sel.select(wait):
                ready = key.fileobj
                assert isinstance(ready, socket.socket)
                target = key.data
                code = ready.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                ms = (time.perf_counter() - started[target]) * 1000
                source = _local_address(ready) if code == 0 else None
                sel.unregister(ready)
                ready.close()
                record(target, _result(target[0], target[1], code, ms, source))
    finally:
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        sel.close()


def _expire(
    sel: selectors.BaseSelector,
    started: dict[Target, float],
    record: Record,
    timeout: float,
    deadline: float,
) -> None:
    """Close every attempt past its own timeout, or all of them at the run's deadline."""
    now = time.perf_counter()
    at_deadline = time.monotonic() >= deadline
    for key in list(sel.get_map().values()):
        target = key.data
        elapsed = now - started[target]
        if at_deadline or elapsed >= timeout:
            sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            timed_out = elapsed >= timeout
            reason = f"no answer within the connect timeout ({timeout:g}s)" if timed_out else (
                "stopped at the run's deadline")
            record(target, TcpResult(address=target[0], port=target[1], status="timeout", ms=elapsed * 1000,
                                     error=reason, unfinished=not timed_out))


def _result(address: str, port: int, code: int, ms: float, source: str | None = None) -> TcpResult:
    status = classify_errno(code)
    error = None if status == "ok" else (errno.errorcode.get(code, str(code)) + ": " + os.strerror(code))
    return TcpResult(address=address, port=port, status=status, ms=ms, error=error, source=source)


def _local_address(sock: socket.socket) -> str | None:
    """The source address the kernel chose: which interface this vantage really uses."""
    try:
        return str(sock.getsockname()[0])
    except OSError:
        return None
