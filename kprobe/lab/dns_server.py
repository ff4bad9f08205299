"""A small authoritative DNS server on loopback, one per *view* (network).

Why a real server rather than patching resolution in tests: kprobe's `--nameserver` path must
be exercised end to end, over real UDP and TCP, exactly as it runs against a corporate or VPC
resolver. Each view is its own server (own port), answering from its own table, so one lab
cluster can be probed "as from the Docker host" and "as from inside the Docker network".
Nothing here sends a packet anywhere but the loopback address it binds.
"""

from __future__ import annotations

import ipaddress
import selectors
import socket
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

ViewRecords = Mapping[str, Sequence[str]]
MAX_CHAIN = 8
TCP_IDLE = 5.0


def _key(name: str) -> str:
    return name.lower().rstrip(".")


class DnsServer:
    """One view: UDP and TCP on one loopback port, answering A, AAAA and CNAME.

    `servfail` names get SERVFAIL and `drop` names get no answer at all, for fault tests.
    """

    def __init__(
        self,
        records: ViewRecords,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ttl: int = 60,
        servfail: Iterable[str] = (),
        drop: Iterable[str] = (),
        name: str = "",
    ) -> None:
        self.host = host
        self.requested_port = port
        self.ttl = ttl
        self.name = name
        self._lock = threading.Lock()
        self._records: dict[str, tuple[str, ...]] = {}
        self.set_records(records)
        self.servfail = {_key(n) for n in servfail}
        self.drop = {_key(n) for n in drop}
        self._udp: socket.socket | None = None
        self._tcp: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._queries = 0
        self._port = 0

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> DnsServer:
        """Bind UDP and TCP on the same port and serve in a daemon thread."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        for _ in range(20):
            udp = socket.socket(family, socket.SOCK_DGRAM)
            udp.bind((self.host, self.requested_port))
            port = udp.getsockname()[1]
            tcp = socket.socket(family, socket.SOCK_STREAM)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                tcp.bind((self.host, port))
            except OSError:
                udp.close()
                tcp.close()
                if self.requested_port:
                    raise
                continue
            tcp.listen(64)
            break
        else:
            raise OSError(f"no port free for both UDP and TCP on {self.host}")
        udp.setblocking(False)
        tcp.setblocking(False)
        self._udp, self._tcp, self._port = udp, tcp, port
        self._thread = threading.Thread(target=self._serve, name=f"dns-{self.name or port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(2)
        for sock in (self._udp, self._tcp, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def __enter__(self) -> DnsServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) actually bound."""
        return self.host, self._port

    @property
    def nameserver(self) -> str:
        """`host:port` as a user passes it to `--nameserver`."""
        return f"[{self.host}]:{self._port}" if ":" in self.host else f"{self.host}:{self._port}"

    @property
    def queries(self) -> int:
        """Queries answered so far (tests use it to prove a path asked DNS, or did not)."""
        return self._queries

    def set_records(self, records: ViewRecords) -> None:
        """Replace the view's table at once (tests change a view mid-run)."""
        table = {_key(name): tuple(values) for name, values in records.items()}
        with self._lock:
            self._records = table

    # -- answering ----------------------------------------------------------------------------
    def answer(self, wire: bytes) -> bytes | None:
        """The response to one query, or None to stay silent (malformed, or a `drop` name)."""
        try:
            query = dns.message.from_wire(wire)
        except Exception:  # malformed input: a server ignores it
            return None
        if not query.question:
            return None
        question = query.question[0]
        qname = _key(question.name.to_text())
        if qname in self.drop:
            return None
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA | dns.flags.RA
        if qname in self.servfail:
            response.set_rcode(dns.rcode.SERVFAIL)
            return self._count(response)
        with self._lock:
            table = self._records
        current = qname
        for _ in range(MAX_CHAIN + 1):
            values = table.get(current)
            if values is None:
                if current == qname:
                    response.set_rcode(dns.rcode.NXDOMAIN)
                return self._count(response)
            ips = [v for v in values if _ip_version(v)]
            targets = [v for v in values if not _ip_version(v)]
            if targets and question.rdtype != dns.rdatatype.CNAME:
                target = _key(targets[0])
                response.answer.append(dns.rrset.from_text(current + ".", self.ttl, "IN", "CNAME", target + "."))
                current = target
                continue
            if question.rdtype == dns.rdatatype.CNAME and targets:
                target = _key(targets[0]) + "."
                response.answer.append(dns.rrset.from_text(current + ".", self.ttl, "IN", "CNAME", target))
            for rdtype, version in ((dns.rdatatype.A, 4), (dns.rdatatype.AAAA, 6)):
                if question.rdtype == rdtype:
                    wanted = [ip for ip in ips if _ip_version(ip) == version]
                    if wanted:
                        type_text = dns.rdatatype.to_text(rdtype)
                        response.answer.append(dns.rrset.from_text(current + ".", self.ttl, "IN", type_text, *wanted))
            return self._count(response)
        response.answer.clear()
        response.set_rcode(dns.rcode.SERVFAIL)  # CNAME loop or chain too long
        return self._count(response)

    def _count(self, response: dns.message.Message) -> bytes:
        self._queries += 1
        return response.to_wire()

    # -- serving ------------------------------------------------------------------------------
    def _serve(self) -> None:
        assert self._udp is not None and self._tcp is not None
        sel = selectors.DefaultSelector()
        sel.register(self._udp, selectors.EVENT_READ, "udp")
        sel.register(self._tcp, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        conns: dict[socket.socket, bytearray] = {}
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(1.0):
                    kind: Any = key.data
                    if kind == "wake":
                        return
                    if kind == "udp":
                        self._serve_udp()
                    elif kind == "accept":
                        self._accept(sel, conns)
                    else:
                        conn = key.fileobj
                        assert isinstance(conn, socket.socket)
                        self._serve_tcp(sel, conns, conn)
        finally:
            for conn in list(conns):
                conn.close()
            sel.close()

    def _serve_udp(self) -> None:
        assert self._udp is not None
        for _ in range(64):
            try:
                wire, peer = self._udp.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            reply = self.answer(wire)
            if reply is not None:
                if len(reply) > 512:
                    reply = _truncated(wire) or reply
                try:
                    self._udp.sendto(reply, peer)
                except OSError:
                    pass

    def _accept(self, sel: selectors.BaseSelector, conns: dict[socket.socket, bytearray]) -> None:
        assert self._tcp is not None
        try:
            conn, _ = self._tcp.accept()
        except OSError:
            return
        conn.setblocking(False)
        conns[conn] = bytearray()
        sel.register(conn, selectors.EVENT_READ, "tcp")

    def _serve_tcp(
        self, sel: selectors.BaseSelector, conns: dict[socket.socket, bytearray], conn: socket.socket
    ) -> None:
        try:
            chunk = conn.recv(65535)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            sel.unregister(conn)
            conns.pop(conn, None)
            conn.close()
            return
        buf = conns[conn]
        buf += chunk
        while len(buf) >= 2:
            size = struct.unpack(">H", buf[:2])[0]
            if len(buf) < 2 + size:
                break
            wire = bytes(buf[2 : 2 + size])
            del buf[: 2 + size]
            reply = self.answer(wire)
            if reply is not None:
                try:
                    conn.setblocking(True)
                    conn.settimeout(TCP_IDLE)
                    conn.sendall(struct.pack(">H", len(reply)) + reply)
                    conn.setblocking(False)
                except OSError:
                    sel.unregister(conn)
                    conns.pop(conn, None)
                    conn.close()
                    return


def _ip_version(value: str) -> int:
    try:
        return ipaddress.ip_address(value).version
    except ValueError:
        return 0


def _truncated(wire: bytes) -> bytes | None:
    """An empty TC response, telling the client to retry over TCP."""
    try:
        query = dns.message.from_wire(wire)
    except Exception:
        return None
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA | dns.flags.TC
    return response.to_wire()


def start_views(views: Mapping[str, ViewRecords], host: str = "127.0.0.1", **kw: Any) -> dict[str, DnsServer]:
    """Start one server per view; on failure stop the ones already started."""
    servers: dict[str, DnsServer] = {}
    try:
        for view, records in views.items():
            servers[view] = DnsServer(records, host, name=view, **kw).start()
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers
