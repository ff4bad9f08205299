"""The lab DNS server, proven over real UDP and TCP sockets with dnspython's own client code."""

from __future__ import annotations

import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.resolver
import pytest

from kprobe.lab.dns_server import MAX_CHAIN, TCP_IDLE_SECONDS, DnsServer, start_views

RECORDS = {
    "Kafka0.": ("127.0.0.11",),
    "dual.lab": ("127.0.0.12", "127.0.0.13", "fd00::12"),
    "v6only.lab": ("fd00::14",),
    "alias.lab": ("mid.lab.",),
    "mid.lab": ("DUAL.lab",),
    "dangling.lab": ("nowhere.lab",),
    "loop-a.lab": ("loop-b.lab",),
    "loop-b.lab": ("loop-a.lab",),
    "to-flaky.lab": ("flaky.lab",),
    "flaky.lab": ("127.0.0.15",),
    "silent.lab": ("127.0.0.16",),
    "empty.lab": (),
    "big.lab": tuple(f"10.9.{i // 200}.{i % 200}" for i in range(60)),
}


@pytest.fixture
def server():
    with DnsServer(RECORDS, servfail=("flaky.lab",), drop=("SILENT.lab.",), name="test") as srv:
        yield srv


def resolver_for(srv: DnsServer, lifetime: float = 3.0) -> dns.resolver.Resolver:
    host, port = srv.address
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.nameserver_ports = {host: port}
    resolver.lifetime = lifetime
    resolver.timeout = lifetime
    resolver.cache = None
    return resolver


def udp(srv: DnsServer, name: str, rdtype: str = "A", **kw) -> dns.message.Message:
    host, port = srv.address
    return dns.query.udp(dns.message.make_query(name, rdtype, **kw), host, port=port, timeout=2)


def tcp(srv: DnsServer, name: str, rdtype: str = "A") -> dns.message.Message:
    host, port = srv.address
    return dns.query.tcp(dns.message.make_query(name, rdtype), host, port=port, timeout=2)


def addresses(msg: dns.message.Message, rdtype: str = "A") -> set[str]:
    wanted = dns.rdatatype.from_text(rdtype)
    return {rd.to_text() for rrset in msg.answer if rrset.rdtype == wanted for rd in rrset}


def frame(msg: dns.message.Message) -> bytes:
    wire = msg.to_wire()
    return struct.pack(">H", len(wire)) + wire


def read_frame(sock: socket.socket) -> dns.message.Message:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "server closed the connection mid-answer"
            data += chunk
        return data

    (size,) = struct.unpack(">H", exactly(2))
    return dns.message.from_wire(exactly(size))


# -- answers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ask", [udp, tcp], ids=["udp", "tcp"])
def test_a_and_aaaa_answers(server, ask):
    query_name = "dual.lab"
    a = ask(server, query_name, "A")
    assert a.rcode() == dns.rcode.NOERROR
    assert a.flags & dns.flags.QR and a.flags & dns.flags.AA
    assert a.question[0].name == dns.name.from_text(query_name)
    assert addresses(a) == {"127.0.0.12", "127.0.0.13"}
    assert a.answer[0].ttl == 60
    aaaa = ask(server, query_name, "AAAA")
    assert addresses(aaaa, "AAAA") == {"fd00::12"}
    assert addresses(ask(server, "v6only.lab", "AAAA"), "AAAA") == {"fd00::14"}


def test_response_echoes_id_and_question(server):
    host, port = server.address
    query = dns.message.make_query("kafka0", "A")
    query.id = 4242
    response = dns.query.udp(query, host, port=port, timeout=2)
    assert response.id == 4242 and response.question == query.question


@pytest.mark.parametrize("use_tcp", [False, True], ids=["udp", "tcp"])
def test_resolver_gets_a_and_aaaa(server, use_tcp):
    resolver = resolver_for(server)
    assert [r.address for r in resolver.resolve("kafka0", "A", tcp=use_tcp)] == ["127.0.0.11"]
    assert [r.address for r in resolver.resolve("v6only.lab", "AAAA", tcp=use_tcp)] == ["fd00::14"]


def test_names_are_case_insensitive_and_trailing_dot_optional(server):
    for spelling in ("kafka0", "KAFKA0.", "kAfKa0"):
        response = udp(server, spelling)
        assert addresses(response) == {"127.0.0.11"}
        assert response.answer[0].name.to_text() == dns.name.from_text(spelling).to_text()  # asker's case


def test_cname_chain_is_chased_and_returned_in_order(server):
    answer = resolver_for(server).resolve("alias.lab", "A")
    assert sorted(r.address for r in answer) == ["127.0.0.12", "127.0.0.13"]
    assert answer.canonical_name == dns.name.from_text("dual.lab")
    chain = [(rrset.name, dns.rdatatype.to_text(rrset.rdtype)) for rrset in answer.response.answer]
    names = [dns.name.from_text(n) for n in ("alias.lab", "mid.lab", "dual.lab")]  # Name == ignores case
    assert chain == list(zip(names, ["CNAME", "CNAME", "A"], strict=True))
    assert addresses(tcp(server, "alias.lab", "AAAA"), "AAAA") == {"fd00::12"}


def test_cname_query_gets_only_the_first_hop(server):
    response = udp(server, "alias.lab", "CNAME")
    assert [rd.to_text() for rrset in response.answer for rd in rrset] == ["mid.lab."]


def test_chain_cap_and_loops_are_servfail():
    hops = {f"h{i}": (f"h{i + 1}",) for i in range(MAX_CHAIN)}
    with DnsServer({**hops, f"h{MAX_CHAIN}": ("127.0.0.1",), "loop": ("loop",)}) as srv:
        ok = udp(srv, "h0")
        assert ok.rcode() == dns.rcode.NOERROR and addresses(ok) == {"127.0.0.1"}
        assert len(ok.answer) == MAX_CHAIN + 1
        longer = {f"h{MAX_CHAIN}": (f"h{MAX_CHAIN + 1}",), f"h{MAX_CHAIN + 1}": ("127.0.0.1",)}
        srv.set_records({**hops, **longer, "loop": ("loop",)})
        too_long = udp(srv, "h0")
        assert too_long.rcode() == dns.rcode.SERVFAIL and not too_long.answer
        looped = udp(srv, "loop")
        assert looped.rcode() == dns.rcode.SERVFAIL and not looped.answer


def test_loop_between_two_names_is_servfail(server):
    assert udp(server, "loop-a.lab").rcode() == dns.rcode.SERVFAIL
    with pytest.raises(dns.resolver.NoNameservers):
        resolver_for(server).resolve("loop-b.lab", "A")


def test_unknown_name_is_authoritative_nxdomain(server):
    response = udp(server, "nope.lab")
    assert response.rcode() == dns.rcode.NXDOMAIN and response.flags & dns.flags.AA
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver_for(server).resolve("nope.lab", "A")
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver_for(server).resolve("nope.lab", "A", tcp=True)


def test_cname_into_nothing_is_nxdomain_with_the_chain(server):
    response = udp(server, "dangling.lab")
    assert response.rcode() == dns.rcode.NXDOMAIN
    assert [rrset.rdtype for rrset in response.answer] == [dns.rdatatype.CNAME]
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver_for(server).resolve("dangling.lab", "A")


def test_known_name_without_that_type_is_nodata(server):
    with pytest.raises(dns.resolver.NoAnswer):
        resolver_for(server).resolve("kafka0", "AAAA")
    with pytest.raises(dns.resolver.NoAnswer):
        resolver_for(server).resolve("empty.lab", "A")
    for rdtype in ("AAAA", "MX", "TXT", "ANY"):
        response = udp(server, "kafka0", rdtype)
        assert response.rcode() == dns.rcode.NOERROR and not response.answer, rdtype
        assert response.flags & dns.flags.AA


def test_servfail_names_and_chains_through_them(server):
    for name in ("flaky.lab", "to-flaky.lab"):
        assert udp(server, name).rcode() == dns.rcode.SERVFAIL
        with pytest.raises(dns.resolver.NoNameservers):
            resolver_for(server).resolve(name, "A")


def test_dropped_name_times_out_quickly(server):
    before = server.queries
    started = time.monotonic()
    with pytest.raises(dns.resolver.LifetimeTimeout):
        resolver_for(server, lifetime=0.5).resolve("silent.lab", "A")
    assert time.monotonic() - started < 2
    assert server.queries == before  # never answered, so never counted
    assert addresses(udp(server, "kafka0")) == {"127.0.0.11"}  # the server itself is fine


def test_large_answer_truncates_over_udp_and_resolver_falls_back_to_tcp(server):
    plain = udp(server, "big.lab")
    assert plain.flags & dns.flags.TC
    assert len(addresses(udp(server, "big.lab", use_edns=0, payload=4096))) == 60
    assert len(addresses(tcp(server, "big.lab"))) == 60
    assert len(resolver_for(server).resolve("big.lab", "A")) == 60


# -- views -------------------------------------------------------------------------------------
def test_views_answer_the_same_name_differently():
    views = {
        "docker": {"kafka0": ("127.0.0.11",), "localhost": ("127.0.0.1",)},
        "host": {"localhost": ("127.0.0.1",), "broker.lab": ("127.0.0.22",)},
        "vpn": {"broker.lab": ("127.0.0.23",)},
    }
    servers = start_views(views)
    try:
        assert set(servers) == set(views)
        assert len({s.address for s in servers.values()}) == 3
        assert servers["docker"].name == "docker"
        docker, host, vpn = (resolver_for(servers[v]) for v in ("docker", "host", "vpn"))
        assert [r.address for r in docker.resolve("kafka0", "A")] == ["127.0.0.11"]
        with pytest.raises(dns.resolver.NXDOMAIN):
            host.resolve("kafka0", "A")
        assert [r.address for r in host.resolve("broker.lab", "A")] == ["127.0.0.22"]
        assert [r.address for r in vpn.resolve("broker.lab", "A")] == ["127.0.0.23"]
        with pytest.raises(dns.resolver.NXDOMAIN):
            docker.resolve("broker.lab", "A")
    finally:
        for srv in servers.values():
            srv.stop()


def test_start_views_stops_what_it_started_when_one_fails():
    with DnsServer({}) as probe:
        port = probe.address[1]
    # Both views ask for the same port: the first gets it, the second cannot.
    with pytest.raises(OSError):
        start_views({"first": {"a": ("127.0.0.1",)}, "second": {}}, port=port)
    with DnsServer({}, port=port) as again:  # the first view let go of it
        assert again.address == ("127.0.0.1", port)


def test_set_records_takes_effect(server):
    resolver = resolver_for(server)
    assert [r.address for r in resolver.resolve("kafka0", "A")] == ["127.0.0.11"]
    server.set_records({"kafka0": ("127.0.0.99",), "new.lab": ("kafka0",)})
    assert [r.address for r in resolver.resolve("kafka0", "A")] == ["127.0.0.99"]
    assert [r.address for r in resolver.resolve("new.lab", "A")] == ["127.0.0.99"]
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("dual.lab", "A")
    with pytest.raises(ValueError):
        server.set_records({"bad": ("kafka0", "127.0.0.1")})  # a CNAME cannot share its name
    assert [r.address for r in resolver.resolve("kafka0", "A")] == ["127.0.0.99"]  # old table kept


def test_bad_configuration_is_refused_up_front():
    with pytest.raises(ValueError):
        DnsServer({}, host="0.0.0.0")
    with pytest.raises(ValueError):
        DnsServer({}, host="localhost")
    with pytest.raises(ValueError):
        DnsServer({"a": ("b", "c")})
    with pytest.raises(ValueError):
        DnsServer({"a": ("1.2.3.4",), "A.": ("1.2.3.5",)})
    with pytest.raises(ValueError):
        DnsServer({"a..b": ("1.2.3.4",)})


def test_bare_string_value_is_one_record():
    with DnsServer({"one": "127.0.0.7"}) as srv:
        assert addresses(udp(srv, "one")) == {"127.0.0.7"}


# -- robustness --------------------------------------------------------------------------------
def test_malformed_datagrams_are_ignored(server):
    host, port = server.address
    before = server.queries
    response_not_query = dns.message.make_response(dns.message.make_query("kafka0", "A")).to_wire()
    junk = [
        b"",
        b"\x00",
        b"\xff" * 11,
        b"\x12\x34" + b"\x00" * 4 + b"\x00\x01" + b"\x00" * 4 + b"\x07abc",
        bytes(range(256)) * 4,
        response_not_query,
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.2)
        for packet in junk:
            sock.sendto(packet, (host, port))
        with pytest.raises(socket.timeout):
            sock.recvfrom(65535)  # no reply to any of it
    assert server.queries == before
    assert addresses(udp(server, "kafka0")) == {"127.0.0.11"}
    assert server.queries == before + 1


def test_malformed_tcp_frame_does_not_break_the_connection(server):
    with socket.create_connection(server.address, timeout=2) as sock:
        sock.sendall(struct.pack(">H", 5) + b"\x01\x02\x03\x04\x05")
        sock.sendall(frame(dns.message.make_query("kafka0", "A")))
        assert addresses(read_frame(sock)) == {"127.0.0.11"}


def test_several_pipelined_queries_on_one_tcp_connection(server):
    queries = [dns.message.make_query(n, t) for n, t in [("kafka0", "A"), ("dual.lab", "AAAA"), ("nope.lab", "A")]]
    with socket.create_connection(server.address, timeout=2) as sock:
        sock.sendall(b"".join(frame(q) for q in queries))  # one write, three messages
        replies = {r.id: r for r in (read_frame(sock) for _ in queries)}
        assert addresses(replies[queries[0].id]) == {"127.0.0.11"}
        assert addresses(replies[queries[1].id], "AAAA") == {"fd00::12"}
        assert replies[queries[2].id].rcode() == dns.rcode.NXDOMAIN
        byte_by_byte = frame(dns.message.make_query("v6only.lab", "AAAA"))
        for i in range(len(byte_by_byte)):
            sock.sendall(byte_by_byte[i : i + 1])
        assert addresses(read_frame(sock), "AAAA") == {"fd00::14"}


def test_stalled_tcp_client_blocks_nobody_and_idle_connections_close(server):
    stalled = socket.create_connection(server.address, timeout=TCP_IDLE_SECONDS + 3)
    try:
        stalled.sendall(b"\x00")  # half a length prefix, then nothing
        opened = time.monotonic()
        started = time.monotonic()
        assert addresses(udp(server, "kafka0")) == {"127.0.0.11"}
        assert addresses(tcp(server, "kafka0")) == {"127.0.0.11"}
        assert time.monotonic() - started < 1
        assert stalled.recv(1) == b""  # the server gave up on it
        waited = time.monotonic() - opened
        assert TCP_IDLE_SECONDS - 0.5 <= waited <= TCP_IDLE_SECONDS + 2
    finally:
        stalled.close()


def test_stop_frees_the_port_and_is_idempotent():
    srv = DnsServer({"kafka0": ("127.0.0.11",)}, name="stopper").start()
    assert srv.start() is srv  # already running: nothing to do
    host, port = srv.address
    assert srv.nameserver == f"{host}:{port}"
    with socket.create_connection((host, port), timeout=2) as conn:  # an open client must not pin it
        conn.sendall(frame(dns.message.make_query("kafka0", "A")))
        read_frame(conn)
        started = time.monotonic()
        srv.stop()
        srv.stop()
        assert time.monotonic() - started < 1.5
    assert not [t for t in threading.enumerate() if t.name.endswith("-stopper")]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
        u.bind((host, port))
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((host, port))
        t.listen(1)
    with DnsServer({"kafka0": ("127.0.0.12",)}, host, port) as again:
        assert addresses(udp(again, "kafka0")) == {"127.0.0.12"}
    with pytest.raises(RuntimeError):
        srv.start()
    DnsServer({}).stop()  # never started: still fine


def test_ipv6_loopback_view():
    try:
        srv = DnsServer({"kafka0": ("::1",)}, host="::1").start()
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with srv:
        assert srv.nameserver == f"[::1]:{srv.address[1]}"
        assert [r.address for r in resolver_for(srv).resolve("kafka0", "AAAA")] == ["::1"]


def test_two_hundred_concurrent_queries_all_answer():
    count = 200
    records = {f"n{i}.lab": (f"10.1.{i // 100}.{i % 100}",) for i in range(count)}
    barrier = threading.Barrier(count)
    with DnsServer(records) as srv:
        host, port = srv.address

        def ask(i: int) -> tuple[int, set[str]]:
            query = dns.message.make_query(f"n{i}.lab", "A")
            barrier.wait(timeout=5)
            if i % 4 == 0:
                return i, addresses(dns.query.tcp(query, host, port=port, timeout=3))
            return i, {r.address for r in resolver_for(srv).resolve(f"n{i}.lab", "A")}

        # Each query must answer within its own 3 s lifetime (a late one raises): the bound that matters; how
        # long all 200 take together depends on the machine's load, not on the server.
        with ThreadPoolExecutor(max_workers=count) as pool:
            results = dict(pool.map(ask, range(count)))
        assert results == {i: {f"10.1.{i // 100}.{i % 100}"} for i in range(count)}
        assert srv.queries >= count
