"""Connections of `kprobe serve`: a request's head is read by one loop, and a thread serves it only once it is whole.

Why not the standard library's thread per connection: a thread waits for the request line and
headers with a timeout per read, so a client trickling a byte every few seconds held a thread for
as long as it liked (1,000 such clients held 1,002 threads for over a minute). Here one loop accepts
and reads every head, without blocking, under three bounds:

- a whole-head deadline (`head_timeout`, 5 s by default) from accept to the blank line after the
  headers: past it the client gets 408 and the connection is closed, however slowly it was sending;
- at most `max_connections` open at once (heads being read and requests being served). At the bound
  a new connection closes the oldest one still sending its head, so a slow client cannot keep a
  quick one out (`/-/healthy`, a scrape); when every open connection is a request being served, the
  new one is answered 503 and closed at once;
- a head of at most 64 KiB (431 past it), as http.server's own limits.

Each refusal is one line (408, 431 or 503) and a gentle close (`Server._refuse`).

Threads: one for this loop, and one per request whose head is whole, so slow clients cost a socket
each and no thread; the probes those threads run are bounded by --max-concurrent (kprobe.serve.exporter).
"""

from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from kprobe.logs import logger
from kprobe.records import field, record

_LOG = logger("kprobe.serve")
MAX_HEAD = 64 * 1024 + 8 * 1024  # a request line of 64 KiB (http.server's limit) and some headers
WRITE_TIMEOUT = 10.0  # for sending an answer: sendall gives up after this in all, not per chunk
_ACCEPTS_PER_TURN = 64  # a burst of connections does not starve the heads already being read
LINGER = 1.0  # after a refusal, what the client still sends is read and dropped this long at most


@record(frozen=False, eq=False)
class _Pending:
    """A connection whose head is still arriving."""

    sock: socket.socket
    address: Any
    deadline: float
    head: bytearray = field(default_factory=bytearray)


@record(frozen=False, eq=False)
class _Closing:
    """A connection answered and half-closed, read until the client closes too (or LINGER passes)."""

    sock: socket.socket
    deadline: float


class SocketWriter(io.BufferedIOBase):
    """`wfile` for a handler: every write is a `sendall`, bounded by the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        """Yes: it is the answer's way out."""
        return True

    def write(self, data: Any) -> int:
        """All of `data` or an OSError (the socket's timeout, a client gone)."""
        self._sock.sendall(data)
        with memoryview(data) as view:
            return view.nbytes


class HeadFirstHandler(BaseHTTPRequestHandler):
    """A BaseHTTPRequestHandler fed the head the loop read, answering on the socket."""

    def setup(self) -> None:
        """`request` is (socket, head): the head is read already, so reading it cannot block."""
        self.connection, head = self.request
        self.rfile = io.BytesIO(head)
        self.wfile = SocketWriter(self.connection)


class Server(HTTPServer):
    """The exporter's HTTP server: the loop above, then a daemon thread per whole request.

    `on_event(reason)` is told of each connection cut short: "timeout" (head deadline), "too_many_connections"
    (refused or closed at the bound), "bad_request" (a head over 64 KiB).
    """

    request_queue_size = 128  # a burst of scrapes waits in the kernel's backlog, not refused at accept
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[HeadFirstHandler], *, family: int,
                 max_connections: int, head_timeout: float, on_event: Callable[[str], None] = lambda _: None,
                 on_count: Callable[[int], None] = lambda _: None) -> None:
        self.address_family = family
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.on_event = on_event
        self.on_count = on_count
        self._handler: Callable[..., object] = handler  # called with (socket, head), not a bare socket
        self._lock = threading.Lock()
        self._open = 0  # pending heads + requests being served
        self._pending: dict[int, _Pending] = {}  # by file descriptor, oldest first (one deadline for all)
        self._closing: dict[int, _Closing] = {}  # refused or cut, being closed gently; oldest first
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._wake_r, self._wake_w = socket.socketpair()  # shutdown() wakes the loop at once
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        super().__init__(address, handler)  # on a failed bind it calls server_close(), which closes the pair too
        self.socket.setblocking(False)

    @property
    def open_connections(self) -> int:
        """Connections open now: heads being read and requests being served."""
        return self._open

    @property
    def serving(self) -> int:
        """Requests being served by their threads: open connections whose head is whole."""
        return self._open - len(self._pending)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept, read heads, hand whole requests to threads, until shutdown()."""
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.socket, selectors.EVENT_READ, "accept")
                selector.register(self._wake_r, selectors.EVENT_READ, "wake")
                while not self._stop.is_set():
                    deadlines = [next(iter(self._pending.values())).deadline] if self._pending else []
                    deadlines += [next(iter(self._closing.values())).deadline] if self._closing else []
                    wait = max(0.0, min([poll_interval, *(d - time.monotonic() for d in deadlines)]))
                    for key, _ in selector.select(wait):
                        if key.data == "accept":
                            self._accept(selector)
                        elif key.data == "wake":
                            _drain(self._wake_r)
                        elif isinstance(key.data, _Closing):
                            self._discard(selector, key.data)
                        else:
                            self._read(selector, key.data)
                    self._expire(selector)
                for pending in list(self._pending.values()):
                    self._drop(selector, pending)
                for closing in list(self._closing.values()):
                    self._close(selector, closing)
        finally:
            self._stop.clear()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever() and wait for it; requests being served end by their own deadlines."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait()

    def server_close(self) -> None:
        """The listening socket and the loop's own pair."""
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        for _ in range(_ACCEPTS_PER_TURN):
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and the like: the backlog keeps it until a socket is free
                return
            sock.setblocking(False)
            if self._open >= self.max_connections and not self._evict(selector):
                self.on_event("too_many_connections")
                self._refuse(selector, sock, 503, f"busy: {self.max_connections} connections are open "
                             "(--max-connections)")
                continue
            pending = _Pending(sock, address, time.monotonic() + self.head_timeout)
            self._pending[sock.fileno()] = pending
            selector.register(sock, selectors.EVENT_READ, pending)
            self._count(+1)

    def _evict(self, selector: selectors.BaseSelector) -> bool:
        """Close the oldest connection still sending its head, to make room; False when none is."""
        if not self._pending:
            return False
        oldest = next(iter(self._pending.values()))
        self.on_event("too_many_connections")
        self._drop(selector, oldest, (503, f"closed: {self.max_connections} connections are open "
                                          "(--max-connections) and this one had not sent its request"))
        return True

    def _read(self, selector: selectors.BaseSelector, pending: _Pending) -> None:
        if self._pending.get(pending.sock.fileno()) is not pending:
            return  # a stale event: this turn's accept evicted it (now closing) before its own event came up
        try:
            data = pending.sock.recv(16384)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away before its request was whole
            self._drop(selector, pending)
            return
        pending.head += data
        if b"\r\n\r\n" in pending.head or b"\n\n" in pending.head:
            selector.unregister(pending.sock)
            del self._pending[pending.sock.fileno()]
            self._dispatch(selector, pending)
        elif len(pending.head) > MAX_HEAD:
            self.on_event("bad_request")
            self._drop(selector, pending, (431, f"request line and headers over {MAX_HEAD // 1024} KiB"))

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                break
            self.on_event("timeout")
            self._drop(selector, oldest, (408, f"request line and headers not sent within {self.head_timeout:g} s"))
        while self._closing:
            closing = next(iter(self._closing.values()))
            if closing.deadline > now:
                break
            self._close(selector, closing)

    def _drop(self, selector: selectors.BaseSelector, pending: _Pending,
              answer: tuple[int, str] | None = None) -> None:
        """Forget a connection whose head is not whole, answering it first when there is something to say."""
        self._pending.pop(pending.sock.fileno(), None)
        try:
            selector.unregister(pending.sock)
        except (KeyError, ValueError):
            pass
        if answer is None:
            pending.sock.close()
        else:
            self._refuse(selector, pending.sock, *answer)
        self._count(-1)

    def _refuse(self, selector: selectors.BaseSelector, sock: socket.socket, status: int, message: str) -> None:
        """Answer with one line, then close gently.

        What the client still sends is read and dropped for at most LINGER seconds: closing with its
        request unread would reset the connection, and a reset may reach the client before the answer
        does. Past max_connections such closings at once, close at once.
        """
        from http import HTTPStatus

        body = (message + "\n").encode()
        head = (f"HTTP/1.0 {status} {HTTPStatus(status).phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            sock.send(head + body)  # a few hundred bytes into an empty send buffer: never blocks
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if len(self._closing) >= self.max_connections:
            sock.close()
            return
        closing = _Closing(sock, time.monotonic() + LINGER)
        self._closing[sock.fileno()] = closing
        selector.register(sock, selectors.EVENT_READ, closing)

    def _discard(self, selector: selectors.BaseSelector, closing: _Closing) -> None:
        if self._closing.get(closing.sock.fileno()) is not closing:
            return  # closed earlier in this turn; its descriptor may be another connection's already
        try:
            data = closing.sock.recv(16384)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(selector, closing)

    def _close(self, selector: selectors.BaseSelector, closing: _Closing) -> None:
        self._closing.pop(closing.sock.fileno(), None)
        try:
            selector.unregister(closing.sock)
        except (KeyError, ValueError):
            pass
        closing.sock.close()

    def _dispatch(self, selector: selectors.BaseSelector, pending: _Pending) -> None:
        pending.sock.setblocking(True)
        pending.sock.settimeout(WRITE_TIMEOUT)
        thread = threading.Thread(target=self._serve_one, args=(pending.sock, pending.address, bytes(pending.head)),
                                  name="kprobe-serve-request", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: refuse this one rather than stop serving
            self.on_event("too_many_connections")
            pending.sock.setblocking(False)
            self._refuse(selector, pending.sock, 503, "busy: no thread for this request")
            self._count(-1)

    def _serve_one(self, sock: socket.socket, address: Any, head: bytes) -> None:
        try:
            self._handler((sock, head), address, self)
        except OSError:
            pass  # the client left while its answer was being written
        except Exception as exc:  # a bug: one line, and the server goes on
            _LOG.error("request from %s failed: internal error %s", address[0], exc.__class__.__name__)
        finally:
            try:
                sock.close()
            finally:
                self._count(-1)

    def _count(self, delta: int) -> None:
        with self._lock:
            self._open += delta
            now = self._open
        self.on_count(now)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass
