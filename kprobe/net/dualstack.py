"""What real Kafka clients do with a name whose IPv4 addresses work and IPv6 ones fail, or the reverse.

Measured, not assumed (docs/dual-stack.md has the commands): Apache Kafka's Java client 4.1 and
librdkafka 2.16 (confluent-kafka) against an IPv4-only Kafka 4.1 broker advertised under a name
with an A and an AAAA record.

- The Java client resolves with `InetAddress.getAllByName` and then keeps only the addresses of
  the *first* address's family (`ClientUtils.filterPreferredAddresses`, under the default
  `client.dns.lookup=use_all_dns_ips`). Java lists IPv4 first unless `java.net.preferIPv6Addresses`
  is `true` (IPv6 first) or `system` (the resolver's order, which puts IPv6 first by RFC 6724's
  default policy). So with default settings it uses IPv4 only: a failing IPv6 family costs it
  nothing, and a failing IPv4 family makes it fail outright, however well IPv6 works.
- librdkafka resolves with getaddrinfo and shuffles the addresses, and nearly every connection
  attempt draws afresh (the list lives `broker.address.ttl`, 1 s; a re-bootstrap, when no broker is
  left up, makes the broker's handle anew): a drawn address that refuses costs a second or so, one
  that drops packets `socket.connection.setup.timeout.ms` (30 s by default), each time it is drawn.
  Pinned with `broker.address.family=v4|v6` it never tries the other family.

Hence the verdict: a name whose IPv4 addresses all connect and IPv6 ones all fail works for
clients with default settings (slowed, for librdkafka, when IPv6 times out), and fails for clients
pinned to IPv6; the reverse fails for the Java client with its defaults, a gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kprobe.models import TcpResult
from kprobe.records import record

Family = Literal["IPv4", "IPv6"]

# Client settings as the findings name them; defaults as measured and documented by each client.
LIBRDKAFKA_SETUP_TIMEOUT = "socket.connection.setup.timeout.ms (librdkafka, default 30000)"
JAVA_SETUP_TIMEOUT = ("socket.connection.setup.timeout.ms (Java client, default 10000, growing to "
                      "socket.connection.setup.timeout.max.ms, default 30000)")


def family_of_address(address: str) -> Family:
    """IPv6 for an IPv6 literal, IPv4 otherwise (resolved addresses only)."""
    return "IPv6" if ":" in address else "IPv4"


@record
class FamilySplit:
    """Every address of one family connects, every address of the other fails."""

    working: Family
    failing: Family
    failed: tuple[TcpResult, ...]

    @property
    def slow(self) -> bool:
        """Whether a failing address waits out a timeout (not a fast refusal or no route)."""
        return any(t.status == "timeout" for t in self.failed)

    @property
    def default_clients_work(self) -> bool:
        """Whether both clients with default settings get through (the Java client uses IPv4 only)."""
        return self.working == "IPv4"


def family_split(tcp: Sequence[TcpResult]) -> FamilySplit | None:
    """The split, when the attempts divide exactly by address family; None otherwise.

    Attempts the run's deadline cut short say nothing, so any of them means no verdict here.
    """
    if not tcp or any(t.unfinished for t in tcp):
        return None
    by_family: dict[Family, list[TcpResult]] = {}
    for t in tcp:
        by_family.setdefault(family_of_address(t.address), []).append(t)
    if len(by_family) != 2:
        return None
    ok = {family for family, attempts in by_family.items() if all(t.status == "ok" for t in attempts)}
    bad = {family for family, attempts in by_family.items() if all(t.status != "ok" for t in attempts)}
    if len(ok) != 1 or len(bad) != 1:
        return None
    working, failing = ok.pop(), bad.pop()
    return FamilySplit(working=working, failing=failing, failed=tuple(by_family[failing]))
