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
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from kprobe.records import field, record

__all__ = ["MAX_CHAIN", "TCP_IDLE_SECONDS", "DnsServer", "ViewRecords", "start_views"]

ViewRecords = Mapping[str, Sequence[str]]
"""name -> values: an IPv4 value is an A record, IPv6 an AAAA record, anything else a CNAME target."""

MAX_CHAIN = 8
"""Longest CNAME chain answered; resolvers give up around here too, so longer is a lab bug."""

TCP_IDLE_SECONDS = 3.0
"""A TCP connection with no traffic for this long is closed (RFC 7766 asks for seconds, not minutes)."""

_UDP_PLAIN_LIMIT = 512  # RFC 1035: a client without EDNS cannot take a longer datagram
_MAX_TCP_CONNECTIONS = 512  # beyond this a new connection is closed at once: a lab never needs more
_TCP_OUT_HIGH_WATER = 256 * 1024  # stop reading a client that sends faster than it reads its answers
_UDP_BURST = 256  # datagrams answered per wake-up before the selector is consulted again
_STOP_JOIN_SECONDS = 1.0

_IN = dns.rdataclass.IN
_A = dns.rdatatype.A
_AAAA = dns.rdatatype.AAAA
_CNAME = dns.rdatatype.CNAME
_ANY = dns.rdatatype.ANY


@record
class _Entry:
    """One name's records, parsed once so a query costs a dict lookup, not a parse."""

    a: tuple[dns.rdata.Rdata, ...] = ()
    aaaa: tuple[dns.rdata.Rdata, ...] = ()
    cname: dns.name.Name | None = None
    cname_rdata: tuple[dns.rdata.Rdata, ...] = ()


_Table = Mapping[dns.name.Name, _Entry]


def _name(text: str) -> dns.name.Name:
    # dns.name.Name hashes and compares case-insensitively, and a relative name made absolute
    # against the root is the same as the one written with a trailing dot: both rules for free.
    try:
        return dns.name.from_text(text)
    except dns.exception.DNSException as exc:
        raise ValueError(f"not a DNS name: {text!r} ({exc})") from None


def _fault(text: str) -> tuple[dns.name.Name, dns.rdatatype.RdataType | None]:
    """`name` breaks every query for it; `name/AAAA` only queries of that type."""
    name, _, rdtype = text.partition("/")
    return _name(name), dns.rdatatype.from_text(rdtype) if rdtype else None


def _compile(records: ViewRecords) -> dict[dns.name.Name, _Entry]:
    """Reject a bad table when it is set, not as a puzzling answer in the middle of a test."""
    table: dict[dns.name.Name, _Entry] = {}
    for owner, raw in records.items():
        values = (raw,) if isinstance(raw, str) else tuple(raw)  # "1.2.3.4" alone is one value, not 7
        a: list[dns.rdata.Rdata] = []
        aaaa: list[dns.rdata.Rdata] = []
        targets: list[dns.name.Name] = []
        for value in values:
            try:
                version = ipaddress.ip_address(value).version
            except ValueError:
                targets.append(_name(value))
                continue
            rdtype = _A if version == 4 else _AAAA
            try:
                rdata = dns.rdata.from_text(_IN, rdtype, value)
            except dns.exception.DNSException as exc:  # e.g. an IPv6 scope id, which AAAA cannot carry
                raise ValueError(f"{owner}: {value!r} cannot be an address record ({exc})") from None
            (a if version == 4 else aaaa).append(rdata)
        if targets and (a or aaaa or len(targets) > 1):
            # RFC 1034 3.6.2: a CNAME owner has no other data; a real zone would refuse to load.
            raise ValueError(f"{owner}: a CNAME must be the name's only value, got {list(values)}")
        key = _name(owner)
        if key in table:
            raise ValueError(f"{owner}: listed twice (names are case-insensitive, trailing dot optional)")
        if targets:
            rdata = dns.rdata.from_text(_IN, _CNAME, targets[0].to_text())
            table[key] = _Entry(cname=targets[0], cname_rdata=(rdata,))
        else:
            table[key] = _Entry(tuple(a), tuple(aaaa))
    return table


@record(frozen=False)
class _Conn:
    """A TCP client's buffers; the selector thread owns it, so it needs no lock."""

    sock: socket.socket
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    last_active: float = field(default_factory=time.monotonic)
    closing: bool = False  # the client half-closed: flush what it is owed, then close


class DnsServer:
    """One view: UDP and TCP on one loopback port, answering A, AAAA and CNAME authoritatively.

    `servfail` names get SERVFAIL and `drop` names get no answer at all, wherever they appear
    (asked directly or reached through a CNAME), so fault tests can break one hop of a chain.
    An entry `name/AAAA` (any record type) breaks only that type: a resolver path that loses
    IPv6 queries while IPv4 works, a common half-broken set-up.
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
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"host must be a loopback IP address, got {host!r}") from None
        if not ip.is_loopback:
            # The lab must never answer (or be reachable) off this machine.
            raise ValueError(f"host must be a loopback address, got {host!r}")
        if not 0 <= port <= 65535:
            raise ValueError(f"port out of range: {port}")
        if not 0 <= ttl <= 2**31 - 1:
            raise ValueError(f"ttl out of range: {ttl}")
        self.host = str(ip)
        self.name = name
        self.ttl = ttl
        self._requested_port = port
        self._servfail = frozenset(_fault(n) for n in servfail)
        self._drop = frozenset(_fault(n) for n in drop)
        self._lock = threading.Lock()
        self._table: _Table = _compile(records)
        self._queries = 0
        self._family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        self._port = 0
        self._udp: socket.socket | None = None
        self._tcp: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._state = "new"  # new -> running -> stopped; a stopped server is not restarted
        self._stopping = threading.Event()

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> DnsServer:
        """Bind before returning, so the caller can hand `nameserver` to a client at once."""
        with self._lock:
            if self._state == "running":
                return self
            if self._state == "stopped":
                raise RuntimeError("a stopped DnsServer cannot be restarted; make a new one")
            udp, tcp = self._bind()
            self._udp, self._tcp, self._port = udp, tcp, tcp.getsockname()[1]
            self._wake_r, self._wake_w = socket.socketpair()
            label = self.name or str(self._port)
            self._threads = [
                threading.Thread(target=self._guard, args=(self._serve_udp,), name=f"dns-udp-{label}", daemon=True),
                threading.Thread(target=self._guard, args=(self._serve_tcp,), name=f"dns-tcp-{label}", daemon=True),
            ]
            self._state = "running"
        for thread in self._threads:
            thread.start()
        return self

    def _bind(self) -> tuple[socket.socket, socket.socket]:
        # Port 0 lets the kernel pick a UDP port that may be taken for TCP: try again until one
        # port is free for both, since a resolver falls back to TCP on the same port.
        for _ in range(1 if self._requested_port else 64):
            udp = socket.socket(self._family, socket.SOCK_DGRAM)
            tcp = socket.socket(self._family, socket.SOCK_STREAM)
            try:
                udp.bind((self.host, self._requested_port))
                port = udp.getsockname()[1]
                # Only TCP gets SO_REUSEADDR: it lets a restarted lab rebind past TIME_WAIT, while
                # on UDP Linux would let a second server share (and steal from) the port.
                tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                tcp.bind((self.host, port))
                tcp.listen(1024)  # the probe may open ~200 at once; a full backlog costs a 1 s SYN retry
            except OSError:
                udp.close()
                tcp.close()
                if self._requested_port:
                    raise
                continue
            try:
                udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # bursts of ~200 queries
            except OSError:
                pass
            udp.setblocking(False)
            tcp.setblocking(False)
            return udp, tcp
        raise OSError(f"no port on {self.host} was free for both UDP and TCP")

    def stop(self) -> None:
        """Release the port promptly so the next lab (or test) can bind it; safe to repeat."""
        with self._lock:
            if self._state == "stopped":
                return
            was_running = self._state == "running"
            self._state = "stopped"
        self._stopping.set()
        if was_running:
            assert self._wake_w is not None
            try:
                self._wake_w.send(b"x")  # never read, so both selectors stay woken
            except OSError:
                pass
            deadline = time.monotonic() + _STOP_JOIN_SECONDS
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        for sock in (self._udp, self._tcp, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def __enter__(self) -> DnsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what callers read --------------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int]:
        """The port is only known once bound: before `start()` this shows the one asked for."""
        return self.host, self._port or self._requested_port

    @property
    def nameserver(self) -> str:
        """Bracketed for IPv6, the form `--nameserver` parses without guessing where the port starts."""
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def queries(self) -> int:
        """Lets a test prove a path asked DNS (or did not), not merely that it got an answer."""
        return self._queries

    def set_records(self, records: ViewRecords) -> None:
        """Swap the whole table at once, so no query sees half an old view and half a new one."""
        table = _compile(records)
        with self._lock:
            self._table = table

    # -- answering ----------------------------------------------------------------------------
    def _respond(self, wire: bytes, udp: bool) -> bytes | None:
        """Bytes to send back, or None for silence: a server cannot answer what it cannot parse."""
        try:
            query = dns.message.from_wire(wire)
            if query.flags & dns.flags.QR:
                return None  # a response sent to us: answering it could start a loop between servers
            response = dns.message.make_response(query, recursion_available=True)
        except Exception:
            return None
        response.flags |= dns.flags.AA
        try:
            if self._fill(query, response) == "drop":
                return None
        except Exception:  # a bug here must cost one query, not the server thread
            del response.answer[:]
            response.set_rcode(dns.rcode.SERVFAIL)
        # Over UDP a client without EDNS takes 512 bytes, and past its limit it gets TC and
        # retries over TCP. Over TCP the limit is the frame's; without saying so, dnspython
        # would apply the client's EDNS (UDP) size there too.
        limit = 65535
        if udp:
            limit = max(_UDP_PLAIN_LIMIT, query.payload) if query.edns >= 0 else _UDP_PLAIN_LIMIT
        try:
            reply = response.to_wire(max_size=limit, prefer_truncation=True)
        except Exception:
            del response.answer[:]
            response.set_rcode(dns.rcode.SERVFAIL)
            reply = response.to_wire(max_size=limit, prefer_truncation=True)
        with self._lock:
            self._queries += 1
        return reply

    def _fill(self, query: dns.message.Message, response: dns.message.Message) -> str:
        """Answer the way a recursive resolver would hand it back: the CNAME chain, then the data."""
        if query.opcode() != dns.opcode.QUERY:
            response.set_rcode(dns.rcode.NOTIMP)
            return "answered"
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return "answered"
        question = query.question[0]
        if question.rdclass != _IN:
            response.set_rcode(dns.rcode.REFUSED)
            return "answered"
        rdtype = question.rdtype
        with self._lock:
            table = self._table
        owner = question.name  # echo the asker's spelling: some stubs compare case (0x20)
        seen: set[dns.name.Name] = set()
        while True:
            if (owner, None) in self._drop or (owner, rdtype) in self._drop:
                return "drop"
            if (owner, None) in self._servfail or (owner, rdtype) in self._servfail:
                del response.answer[:]
                response.set_rcode(dns.rcode.SERVFAIL)
                return "answered"
            entry = table.get(owner)
            if entry is None:
                # RFC 6604: the rcode speaks for the last name of the chain, so a CNAME into
                # nothing is NXDOMAIN with the chain still in the answer.
                response.set_rcode(dns.rcode.NXDOMAIN)
                return "answered"
            if rdtype == _ANY:
                return "answered"  # RFC 8482 lets ANY get a minimal answer: NODATA here
            if entry.cname is not None:
                if owner in seen or len(seen) >= MAX_CHAIN:
                    del response.answer[:]
                    response.set_rcode(dns.rcode.SERVFAIL)  # a loop or an over-long chain
                    return "answered"
                seen.add(owner)
                response.answer.append(dns.rrset.from_rdata_list(owner, self.ttl, entry.cname_rdata))
                if rdtype == _CNAME:
                    return "answered"
                owner = entry.cname
                continue
            records = entry.a if rdtype == _A else entry.aaaa if rdtype == _AAAA else ()
            if records:
                response.answer.append(dns.rrset.from_rdata_list(owner, self.ttl, records))
            return "answered"  # without records this is NODATA: NOERROR and no data of that type

    # -- serving ------------------------------------------------------------------------------
    def _guard(self, serve: Any) -> None:
        """A serving thread must end only on stop(): a dead thread looks like a network fault."""
        while not self._stopping.is_set():
            try:
                serve()
                return
            except Exception:
                time.sleep(0.05)  # a socket error we did not foresee: serve again rather than die

    def _serve_udp(self) -> None:
        assert self._udp is not None and self._wake_r is not None
        udp = self._udp
        with selectors.DefaultSelector() as sel:
            sel.register(udp, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fileobj is not udp:
                        return
                    for _ in range(_UDP_BURST):
                        try:
                            wire, peer = udp.recvfrom(65535)
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:
                            if self._stopping.is_set():
                                return
                            break  # e.g. an ICMP error reported late: nothing to do for it
                        reply = self._respond(wire, udp=True)
                        if reply is not None:
                            try:
                                udp.sendto(reply, peer)
                            except OSError:
                                pass  # the asker is gone; UDP owes it nothing

    def _serve_tcp(self) -> None:
        """One selector for all connections, never blocking: a stalled client delays no one."""
        assert self._tcp is not None and self._wake_r is not None
        listener = self._tcp
        conns: dict[socket.socket, _Conn] = {}
        with selectors.DefaultSelector() as sel:
            sel.register(listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            try:
                while not self._stopping.is_set():
                    now = time.monotonic()
                    oldest = min((c.last_active for c in conns.values()), default=now)
                    timeout = max(0.0, oldest + TCP_IDLE_SECONDS - now) if conns else None
                    for key, mask in sel.select(timeout):
                        if key.fileobj is listener:
                            self._accept(sel, conns)
                        elif isinstance(key.data, _Conn):
                            self._service(sel, conns, key.data, mask)
                        else:
                            return
                    now = time.monotonic()
                    for conn in [c for c in conns.values() if now - c.last_active >= TCP_IDLE_SECONDS]:
                        self._drop_conn(sel, conns, conn)
            finally:
                for conn in list(conns.values()):
                    conn.sock.close()

    def _accept(self, sel: selectors.BaseSelector, conns: dict[socket.socket, _Conn]) -> None:
        assert self._tcp is not None
        for _ in range(64):
            try:
                sock, _ = self._tcp.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. the client reset before we accepted
            if len(conns) >= _MAX_TCP_CONNECTIONS:
                sock.close()
                continue
            sock.setblocking(False)
            conn = _Conn(sock)
            conns[sock] = conn
            sel.register(sock, selectors.EVENT_READ, conn)

    def _service(self, sel: selectors.BaseSelector, conns: dict[socket.socket, _Conn], conn: _Conn, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            try:
                chunk = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                chunk = None
            except OSError:
                self._drop_conn(sel, conns, conn)
                return
            if chunk == b"":
                conn.closing = True  # half-closed: it may still be owed answers
            elif chunk:
                conn.last_active = time.monotonic()
                conn.inbuf += chunk
        self._answer_buffered(conn)
        if conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._drop_conn(sel, conns, conn)
                return
            if sent:
                del conn.outbuf[:sent]
                conn.last_active = time.monotonic()
                self._answer_buffered(conn)  # answers held back by the high-water mark
        if conn.closing and not conn.outbuf:
            self._drop_conn(sel, conns, conn)
            return
        events = selectors.EVENT_WRITE if conn.outbuf else 0
        if not conn.closing and len(conn.outbuf) < _TCP_OUT_HIGH_WATER:
            events |= selectors.EVENT_READ
        sel.modify(conn.sock, events, conn)

    def _answer_buffered(self, conn: _Conn) -> None:
        """RFC 7766: messages are length-prefixed and a client may pipeline several per connection."""
        buf = conn.inbuf
        while len(buf) >= 2 and len(conn.outbuf) < _TCP_OUT_HIGH_WATER:
            (size,) = struct.unpack_from(">H", buf)
            if len(buf) < 2 + size:
                return
            wire = bytes(buf[2 : 2 + size])
            del buf[: 2 + size]
            reply = self._respond(wire, udp=False)
            if reply is not None:
                conn.outbuf += struct.pack(">H", len(reply)) + reply

    @staticmethod
    def _drop_conn(sel: selectors.BaseSelector, conns: dict[socket.socket, _Conn], conn: _Conn) -> None:
        conns.pop(conn.sock, None)
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()


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
