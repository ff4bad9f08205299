"""kprobe's resolver against the lab's real DNS server: half-broken answers and the time budget."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kprobe.lab.dns_server import DnsServer
from kprobe.probe.resolve import Resolver

RECORDS = {
    "dual.lab": ("127.0.0.21", "::1"),
    "dual-servfail.lab": ("127.0.0.22", "::1"),
    "v4.lab": ("127.0.0.23",),
    "silent.lab": ("127.0.0.24",),
}


@pytest.fixture(scope="module")
def server():
    with DnsServer(RECORDS, drop=("dual.lab/AAAA", "silent.lab"), servfail=("dual-servfail.lab/AAAA",),
                   name="half-broken") as srv:
        yield srv


def resolver(srv: DnsServer, timeout: float) -> Resolver:
    return Resolver([srv.address], timeout=timeout)


def test_lost_aaaa_keeps_the_a_answer_and_says_so(server):
    started = time.monotonic()
    result = resolver(server, 1.0).resolve("dual.lab")
    elapsed = time.monotonic() - started
    assert result.status == "ok"
    assert result.addresses == ("127.0.0.21",)
    assert result.error is not None and "AAAA query failed, A answered" in result.error
    # One --timeout for the name, not one per record type.
    assert elapsed < 1.5, elapsed


def test_servfail_on_aaaa_keeps_the_a_answer(server):
    result = resolver(server, 1.0).resolve("dual-servfail.lab")
    assert result.status == "ok"
    assert result.addresses == ("127.0.0.22",)
    assert "SERVFAIL" in (result.error or "")


def test_a_name_without_aaaa_is_plain_ok(server):
    result = resolver(server, 1.0).resolve("v4.lab")
    assert (result.status, result.addresses, result.error) == ("ok", ("127.0.0.23",), None)


def test_a_silent_name_is_a_timeout_within_one_timeout(server):
    started = time.monotonic()
    result = resolver(server, 0.8).resolve("silent.lab")
    elapsed = time.monotonic() - started
    assert result.status == "timeout"
    assert result.addresses == ()
    assert elapsed < 1.3, elapsed


def test_an_unknown_name_is_nxdomain(server):
    result = resolver(server, 1.0).resolve("nowhere.lab")
    assert result.status == "nxdomain"
    assert "NXDOMAIN" in (result.error or "")


def test_without_detail_the_system_path_asks_getaddrinfo_alone_and_never_imports_dnspython():
    """`kprobe list`'s hint only needs whether a name resolves: no DNS query beside getaddrinfo, no dnspython."""
    code = ("import sys\nfrom kprobe.probe.resolve import Resolver\n"
            "r = Resolver(timeout=2, detail=False).resolve('never-gonna-give-you-up')\n"
            "print(r.status, r.detail is None, 'dns' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.split() == ["nxdomain", "True", "False"], done.stdout + done.stderr
