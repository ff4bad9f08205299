"""Name resolution from the caller's vantage point, as data that never raises.

Default: resolve as the Kafka clients on this machine do, through getaddrinfo (so
/etc/hosts counts), and ask DNS through dnspython alongside, because getaddrinfo only says
"failed" where DNS says NXDOMAIN, no answer, SERVFAIL or timeout, and only DNS shows CNAME
chains and TTLs. With explicit nameservers, resolve through them with dnspython only: that
is how a user asks what a host on another network would see.

Each lookup runs in a daemon thread, so a resolver that hangs can neither block the run
past its deadline nor keep the process alive at exit.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from kprobe.hostport import is_ip_literal, is_loopback_name
from kprobe.models import DnsResult, DnsSource, DnsStatus, ResolverKind
from kprobe.probe.pool import run_bounded
from kprobe.records import replace

HOSTS_FILE = "/etc/hosts"
MAX_PARALLEL = 64


def hosts_file_names(path: str = HOSTS_FILE) -> frozenset[str]:
    """Names the local hosts file defines (lower-case)."""
    names: set[str] = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split("#", 1)[0].split()
                names.update(name.lower() for name in fields[1:])
    except OSError:
        pass
    return frozenset(names)


class Resolver:
    """Resolves host names as from one vantage point, bounded by a per-query timeout."""

    def __init__(
        self,
        nameservers: Iterable[tuple[str, int]] = (),
        *,
        timeout: float = 5.0,
        hosts_file: str = HOSTS_FILE,
        resolv_conf: str | None = None,
        detail: bool = True,
    ) -> None:
        """`detail` False: the system path asks getaddrinfo alone, without DNS's reasons, CNAMEs and TTLs
        beside it, for a caller that only needs whether a name resolves (and not dnspython's import).
        """
        self.detail = detail
        self.nameservers = tuple(nameservers)
        self.timeout = timeout
        self.hosts_names = hosts_file_names(hosts_file) if not self.nameservers else frozenset()
        self.resolv_conf = resolv_conf or os.environ.get("KPROBE_RESOLV_CONF")
        self._dns: Any = None
        self._lock = threading.Lock()

    @property
    def kind(self) -> ResolverKind:
        """`system` or `nameserver`, as the report's vantage records it."""
        return "nameserver" if self.nameservers else "system"

    def _dns_resolver(self) -> Any:
        with self._lock:
            if self._dns is None:
                import dns.nameserver
                import dns.resolver

                if self.nameservers:
                    resolver = dns.resolver.Resolver(configure=False)
                    resolver.nameservers = [
                        dns.nameserver.Do53Nameserver(ip, port) for ip, port in self.nameservers
                    ]
                else:
                    try:
                        resolver = dns.resolver.Resolver(filename=self.resolv_conf or "/etc/resolv.conf")
                    except Exception:  # no usable resolv.conf: the detail is then unavailable
                        resolver = dns.resolver.Resolver(configure=False)
                resolver.timeout = self.timeout
                resolver.lifetime = self.timeout
                resolver.cache = None
                self._dns = resolver
            return self._dns

    def resolve(self, host: str) -> DnsResult:
        """Resolve one name; every outcome, failures included, comes back as a DnsResult."""
        bare = host.strip("[]")
        if is_ip_literal(bare):
            return DnsResult(host=host, status="ok", addresses=(str(ipaddress.ip_address(bare)),), ms=0.0,
                             source="literal")
        if self.nameservers:
            return self._resolve_dns(host, source="nameserver")
        if not host or len(host) > 253:
            return DnsResult(host=host, status="error", ms=0.0, source="system", error="not a valid host name")
        return self._resolve_system(host)

    def reverse(self, address: str) -> str | None:
        """The name an address maps back to (PTR, or the hosts file first for the system resolver), or None.

        What Java's `InetAddress.getCanonicalHostName()` asks, for client.dns.lookup=
        resolve_canonical_bootstrap_servers_only; bounded by the per-query timeout like every lookup.
        """
        if self.nameservers:
            import dns.exception
            import dns.resolver
            import dns.reversename

            try:
                answer = self._dns_resolver().resolve(dns.reversename.from_address(address), "PTR",
                                                      lifetime=self.timeout)
            except (dns.exception.DNSException, ValueError):
                return None
            names = sorted(str(r.target).rstrip(".") for r in answer)
            return names[0] if names else None
        box: list[str] = []

        def work() -> None:
            try:
                box.append(socket.gethostbyaddr(address)[0])
            except (OSError, UnicodeError):
                pass

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(self.timeout)
        return box[0] if box else None

    def _resolve_system(self, host: str) -> DnsResult:
        in_hosts = host.lower().rstrip(".") in self.hosts_names
        detail_box: list[DnsResult] = []
        detail_thread = None
        if self.detail and not is_loopback_name(host):
            detail_thread = threading.Thread(
                target=lambda: detail_box.append(self._resolve_dns(host, source="dns")), daemon=True
            )
            detail_thread.start()
        result = _getaddrinfo(host, self.timeout)
        if detail_thread is not None:
            detail_thread.join(self.timeout + 0.5)
        detail = detail_box[0] if detail_box else None
        if result.status != "ok" and detail is not None and detail.status != "ok":
            # getaddrinfo's codes are coarse: DNS says which failure it was.
            result = replace(result, status=detail.status)
        return replace(result, in_hosts_file=in_hosts, detail=detail)

    def _resolve_dns(self, host: str, source: DnsSource) -> DnsResult:
        import dns.exception
        import dns.resolver

        resolver = self._dns_resolver()
        started = time.perf_counter()
        addresses: list[str] = []
        chain: list[str] = []
        ttl: int | None = None
        no_answer = 0
        status: DnsStatus = "ok"
        error: str | None = None
        for rdtype in ("A", "AAAA"):
            # One --timeout for the whole name: the AAAA query gets what the A query left.
            lifetime = max(0.05, self.timeout - (time.perf_counter() - started))
            failed: tuple[DnsStatus, str] | None = None
            try:
                answer = resolver.resolve(host, rdtype, search=not self.nameservers, raise_on_no_answer=True,
                                          lifetime=lifetime)
            except dns.resolver.NXDOMAIN:
                failed = "nxdomain", f"{host}: no such name (NXDOMAIN)"
            except dns.resolver.NoAnswer:
                no_answer += 1
                continue
            except dns.resolver.LifetimeTimeout:
                failed = "timeout", f"{host}: no DNS answer within {self.timeout:g}s"
            except dns.resolver.NoNameservers as exc:
                failed = "servfail", f"{host}: every nameserver failed (SERVFAIL): {_short(exc)}"
            except (dns.exception.DNSException, OSError, ValueError) as exc:
                failed = "error", f"{host}: {_short(exc)}"
            if failed is not None:
                if addresses:
                    # A answered and AAAA did not: clients connect over IPv4, so the name works;
                    # the failed AAAA query is kept as a note, not turned into a failure.
                    error = f"{rdtype} query failed, A answered: {failed[1]}"
                else:
                    status, error = failed
                break
            addresses.extend(rdata.to_text() for rdata in answer)
            ttl = answer.rrset.ttl if ttl is None and answer.rrset is not None else ttl
            for cname in getattr(answer.chaining_result, "cnames", []):
                target = cname[0].target.to_text().rstrip(".")
                if target not in chain:
                    chain.append(target)
        if status == "ok" and no_answer == 2:
            status, error = "no_answer", f"{host}: the name exists but has no A or AAAA record"
        ms = (time.perf_counter() - started) * 1000
        return DnsResult(host=host, status=status, addresses=tuple(addresses) if status == "ok" else (), ms=ms,
                         source=source,
                         error=error, cname_chain=tuple(chain), ttl=ttl)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else exc.__class__.__name__


def _getaddrinfo(host: str, timeout: float) -> DnsResult:
    """Getaddrinfo in a daemon thread: it cannot be cancelled, only abandoned."""
    box: list[object] = []
    started = time.perf_counter()

    def work() -> None:
        try:
            box.append(socket.getaddrinfo(host, None, socket.AF_UNSPEC, socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            box.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    ms = (time.perf_counter() - started) * 1000
    if not box:
        error = f"{host}: the system resolver gave no answer within {timeout:g}s"
        return DnsResult(host=host, status="timeout", addresses=(), ms=ms, source="system", error=error)
    value = box[0]
    if isinstance(value, socket.gaierror):
        codes: dict[int, DnsStatus] = {socket.EAI_NONAME: "nxdomain", socket.EAI_AGAIN: "timeout"}
        status: DnsStatus = codes.get(value.errno or 0, "error")
        if value.errno == getattr(socket, "EAI_NODATA", None):
            status = "no_answer"
        return DnsResult(host=host, status=status, ms=ms, source="system", error=f"{host}: {value.strerror}")
    if isinstance(value, BaseException):
        return DnsResult(host=host, status="error", ms=ms, source="system", error=f"{host}: {_short(value)}")
    addresses: list[str] = []
    for family, _, _, _, sockaddr in value:  # type: ignore[attr-defined]
        if family in (socket.AF_INET, socket.AF_INET6) and sockaddr[0] not in addresses:
            addresses.append(str(sockaddr[0]))
    return DnsResult(host=host, status="ok", addresses=tuple(addresses), ms=ms, source="system")


def resolve_all(hosts: Iterable[str], resolver: Resolver, deadline: float) -> dict[str, DnsResult]:
    """Resolve distinct names concurrently; names still pending at the deadline are timeouts.

    IP literals are answered inline; names go to a bounded pool of daemon workers.
    """
    unique = list(dict.fromkeys(hosts))
    final: dict[str, DnsResult] = {}
    names = []
    for name in unique:
        if is_ip_literal(name):
            final[name] = resolver.resolve(name)
        else:
            names.append(name)
    done = run_bounded(names, resolver.resolve, workers=MAX_PARALLEL, deadline=deadline)
    for index, name in enumerate(names):
        final[name] = done.get(index) or DnsResult(
            host=name, status="timeout", source=resolver.kind, error=f"{name}: not resolved before the run's deadline",
            unfinished=True,
        )
    return {name: final[name] for name in unique}
