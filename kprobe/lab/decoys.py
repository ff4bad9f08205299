"""Endpoints that are deliberately not a working broker, for scenarios that advertise them: one that
drops every SYN (a firewalled host) and one that answers as a web server would (not Kafka at all).

Apart from the scenario rendering in base because they are plain sockets the tests and the
benchmarks also start on their own.
"""

from __future__ import annotations

import socket
import threading

from kprobe.lab.helpers import bind_unclaimed


class Blackhole:
    """A TCP endpoint that never completes a connection, like a firewalled host.

    A listening socket with backlog 0 whose accept queue is already full drops further SYNs,
    so a connect to it times out (design notes, section 7). No packet leaves loopback.
    """

    def __init__(self, host: str, port: int = 0) -> None:
        # IPv6 too: a dual-stack name whose AAAA address drops SYNs is staged on [::1] (scenario dual-stack).
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if port:
            self.listener = socket.socket(family, socket.SOCK_STREAM)
            self.listener.bind((host, port))
        else:
            self.listener = bind_unclaimed(lambda: socket.socket(family, socket.SOCK_STREAM), host)
        self.listener.listen(0)
        self.host, self.port = self.listener.getsockname()[:2]
        self.fillers: list[socket.socket] = []
        for _ in range(8):
            probe = socket.socket(family, socket.SOCK_STREAM)
            probe.settimeout(0.3)
            try:
                probe.connect((self.host, self.port))
            except OSError:
                probe.close()
                break  # the queue is full: the next SYN is dropped
            self.fillers.append(probe)

    @property
    def endpoint(self) -> str:
        """`host:port` to advertise (`[v6]:port` for an IPv6 one)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def close(self) -> None:
        """Release the port and the queued connections."""
        for sock in self.fillers:
            sock.close()
        self.listener.close()


class Impostor:
    """Something that is not Kafka on an advertised endpoint: a tiny HTTP server.

    It accepts, reads what the client sends and answers `400 Bad Request`, as a web server or
    a misrouted load-balancer would when a Kafka client speaks to it.
    """

    def __init__(self, host: str) -> None:
        def reusable() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            return sock

        self.listener = bind_unclaimed(reusable, host)
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.host, self.port = self.listener.getsockname()[:2]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"impostor-{self.port}", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """`host:port` to advertise."""
        return f"{self.host}:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        """Stop answering and release the port."""
        self._stop.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept now, not at its next 0.2 s tick
        except OSError:
            pass
        self.listener.close()
        self._thread.join(1)
