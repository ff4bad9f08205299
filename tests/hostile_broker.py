"""A scripted fake broker for hostile-input tests only (never a stand-in for Kafka elsewhere).

It speaks just enough of the protocol (ApiVersions v0, Metadata v8) to hand kprobe whatever a
broken or malicious broker could send: escape sequences and raw bytes in host names, absurd
ports, 10,000 brokers, 100,000 partitions, truncated or never-ending responses.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Broker:
    node_id: int
    host: bytes
    port: int
    rack: bytes | None = None


@dataclass
class Partition:
    index: int
    leader: int
    replicas: Sequence[int]
    isrs: Sequence[int]


@dataclass
class Topic:
    name: bytes
    partitions: Sequence[Partition]


@dataclass
class Script:
    """What the fake broker answers, and how it misbehaves (`mode`)."""

    brokers: Sequence[Broker] = ()
    topics: Sequence[Topic] = ()
    cluster_id: bytes = b"hostile-cluster"
    controller_id: int = 0
    mode: str = "normal"  # normal | truncate | slowloris | close_mid | huge_size | garbage
    requests: list[int] = field(default_factory=list)


def _str(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(value)) + value


def metadata_v8(script: Script) -> bytes:
    out = bytearray(struct.pack(">i", 0))
    out += struct.pack(">i", len(script.brokers))
    for b in script.brokers:
        out += struct.pack(">i", b.node_id) + _str(b.host) + struct.pack(">i", b.port) + _str(b.rack)
    out += _str(script.cluster_id) + struct.pack(">i", script.controller_id)
    out += struct.pack(">i", len(script.topics))
    for t in script.topics:
        out += struct.pack(">h", 0) + _str(t.name) + b"\x00"
        out += struct.pack(">i", len(t.partitions))
        for p in t.partitions:
            out += struct.pack(">hiii", 0, p.index, p.leader, 0)
            out += struct.pack(">i", len(p.replicas)) + b"".join(struct.pack(">i", r) for r in p.replicas)
            out += struct.pack(">i", len(p.isrs)) + b"".join(struct.pack(">i", r) for r in p.isrs)
            out += struct.pack(">i", 0)  # offline replicas
        out += struct.pack(">i", 0)  # topic authorized operations
    out += struct.pack(">i", 0)  # cluster authorized operations
    return bytes(out)


API_VERSIONS_V0 = struct.pack(">hi", 0, 2) + struct.pack(">hhh", 18, 0, 3) + struct.pack(">hhh", 3, 0, 8)


class HostileBroker:
    """A TCP server on 127.0.0.1 answering per its script, one thread per connection."""

    def __init__(self, script: Script, host: str = "127.0.0.1") -> None:
        self.script = script
        self.host = host
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.metadata = metadata_v8(script)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"  # also after the socket closed: tests quote it afterwards

    def answer_with(self, script: Script) -> None:
        """Serve another script (before `with`): brokers that advertise each other need their ports first."""
        self.script = script
        self.metadata = metadata_v8(script)

    def __enter__(self) -> HostileBroker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.sock.close()
        self.thread.join(2)

    def _accept(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _recv(self, conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                while not self.stop_event.is_set():
                    size = struct.unpack(">i", self._recv(conn, 4))[0]
                    request = self._recv(conn, size)
                    api_key, _version, correlation = struct.unpack(">hhi", request[:8])
                    self.script.requests.append(api_key)
                    body = API_VERSIONS_V0 if api_key == 18 else self.metadata if api_key == 3 else b""
                    self._reply(conn, struct.pack(">i", correlation) + body, api_key)
            except (ConnectionError, OSError, struct.error):
                return

    def _reply(self, conn: socket.socket, payload: bytes, api_key: int) -> None:
        frame = struct.pack(">i", len(payload)) + payload
        mode = self.script.mode if api_key == 3 else "normal"
        if mode == "normal":
            conn.sendall(frame)
        elif mode == "truncate":
            # A whole, well-framed response whose Metadata body stops half-way: the frame
            # length is honest and the connection stays open, so only the body's own
            # structure can tell the client it is short (unlike close_mid, a transport fault).
            body = payload[: max(8, len(payload) // 2)]
            conn.sendall(struct.pack(">i", len(body)) + body)
        elif mode == "close_mid":  # half the frame, then the connection ends
            conn.sendall(frame[: len(frame) // 2])
            conn.shutdown(socket.SHUT_RDWR)
            raise ConnectionError
        elif mode == "slowloris":  # a byte now and then, never the whole response
            for byte in frame[:200]:
                if self.stop_event.wait(0.5):
                    break
                conn.sendall(bytes([byte]))
            raise ConnectionError
        elif mode == "huge_size":
            conn.sendall(struct.pack(">i", 2**31 - 1) + payload[:64])
            time.sleep(1)
            raise ConnectionError
        elif mode == "garbage":
            conn.sendall(struct.pack(">i", len(payload)) + payload[:4] + b"\xff" * (len(payload) - 4))
