"""A scripted fake broker for hostile-input tests only (never a stand-in for Kafka elsewhere).

It speaks just enough of the protocol (ApiVersions v0 and v3, Metadata v4 to v12) to hand kprobe whatever a
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
    offline: Sequence[int] = ()
    error: int = 0
    tags: bytes = b"\x00"  # the tagged-fields section of flexible versions: none, as Kafka sends


@dataclass
class Topic:
    name: bytes
    partitions: Sequence[Partition]
    error: int = 0
    internal: bool = False


@dataclass
class Script:
    """What the fake broker answers, and how it misbehaves (`mode`).

    `metadata_max` is the highest Metadata version offered: 8 by default (the non-flexible encoding
    hostile tests were written for), 12 to serve kprobe what a current Kafka would (flexible).
    """

    brokers: Sequence[Broker] = ()
    topics: Sequence[Topic] = ()
    cluster_id: bytes = b"hostile-cluster"
    controller_id: int = 0
    mode: str = "normal"  # normal | truncate | slowloris | close_mid | huge_size | garbage
    requests: list[int] = field(default_factory=list)
    metadata_max: int = 8


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _str(value: bytes | None, flexible: bool = False) -> bytes:
    if flexible:
        return b"\x00" if value is None else _uvarint(len(value) + 1) + value
    if value is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(value)) + value


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else struct.pack(">i", n)


def _ints(values: Sequence[int], flexible: bool) -> bytes:
    return _count(len(values), flexible) + struct.pack(f">{len(values)}i", *values)


def metadata_body(script: Script, version: int = 8) -> bytes:
    """A Metadata response body of v4 to v12, in the version the client asked.

    kprobe asks the highest version offered; kcat's librdkafka 2.0 asks v4. Both must get the bytes
    of their own version for a side-by-side comparison to be a comparison. Flexible versions (v9+)
    carry empty tagged fields, as Kafka sends them.
    """
    flexible = version >= 9
    tags = b"\x00" if flexible else b""
    out = bytearray(struct.pack(">i", 0))
    out += _count(len(script.brokers), flexible)
    for b in script.brokers:
        out += struct.pack(">i", b.node_id) + _str(b.host, flexible) + struct.pack(">i", b.port)
        out += _str(b.rack, flexible) + tags
    out += _str(script.cluster_id, flexible) + struct.pack(">i", script.controller_id)
    out += _count(len(script.topics), flexible)
    for t in script.topics:
        out += struct.pack(">h", t.error) + _str(t.name, flexible)
        if version >= 10:
            out += bytes(16)  # topic id: none
        out += b"\x01" if t.internal else b"\x00"
        out += _count(len(t.partitions), flexible)
        for p in t.partitions:
            out += struct.pack(">hii", p.error, p.index, p.leader)
            if version >= 7:
                out += struct.pack(">i", 0)  # leader epoch
            out += _ints(p.replicas, flexible) + _ints(p.isrs, flexible)
            if version >= 5:
                out += _ints(p.offline, flexible)
            out += p.tags if flexible else b""
        if version >= 8:
            out += struct.pack(">i", 0)  # topic authorized operations
        out += tags
    if 8 <= version <= 10:
        out += struct.pack(">i", 0)  # cluster authorized operations
    out += tags
    return bytes(out)


def metadata_v8(script: Script) -> bytes:
    """The Metadata v8 body kprobe is served by default."""
    return metadata_body(script, 8)


def api_versions(version: int, metadata_max: int = 8) -> bytes:
    """ApiVersions in the version asked: v0 for kprobe, v3 for librdkafka and Java clients, which ask
    v3 first (flexible body, header v0 as always for ApiVersions); v1 and v2 add the throttle time.
    Without v3, kcat could not be compared with kprobe on the same broker.
    """
    offered = ((18, 0, 3), (3, 0, metadata_max))
    if version >= 3:
        return (struct.pack(">hb", 0, len(offered) + 1) + b"".join(struct.pack(">hhhb", *o, 0) for o in offered)
                + struct.pack(">ib", 0, 0))
    body = struct.pack(">hi", 0, len(offered)) + b"".join(struct.pack(">hhh", *o) for o in offered)
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


API_VERSIONS_V0 = api_versions(0)


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
        self.metadata = metadata_body(script, script.metadata_max)
        self._other: dict[int, bytes] = {}  # bodies of other versions (kcat's v4), built when first asked

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"  # also after the socket closed: tests quote it afterwards

    def answer_with(self, script: Script) -> None:
        """Serve another script (before `with`): brokers that advertise each other need their ports first."""
        self.script = script
        self.metadata = metadata_body(script, script.metadata_max)
        self._other = {}

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
                    api_key, version, correlation = struct.unpack(">hhi", request[:8])
                    self.script.requests.append(api_key)
                    header = struct.pack(">i", correlation)
                    if api_key == 3:
                        version = min(max(version, 4), self.script.metadata_max)
                        header += b"\x00" if version >= 9 else b""  # response header v1: tagged fields
                        body = self._metadata(version)
                    else:
                        body = api_versions(version, self.script.metadata_max) if api_key == 18 else b""
                    self._reply(conn, header + body, api_key)
            except (ConnectionError, OSError, struct.error):
                return

    def _metadata(self, version: int) -> bytes:
        if version == self.script.metadata_max:
            return self.metadata
        if version not in self._other:
            self._other[version] = metadata_body(self.script, version)
        return self._other[version]

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
