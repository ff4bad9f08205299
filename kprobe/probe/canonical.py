"""client.dns.lookup=resolve_canonical_bootstrap_servers_only: the bootstrap list a Java client really uses.

With that setting (meant for Kerberos, where the service principal must name the host), the Java
client resolves each bootstrap name, maps every address back to its canonical name (a PTR lookup,
`InetAddress.getCanonicalHostName()`, which gives the address itself when nothing maps it back) and
bootstraps to those names instead (`ClientUtils.parseAndValidateAddresses`). A load balancer's name
so becomes the names of the machines behind it, and TLS checks the certificate against those; so
kprobe probes the same list, and says which name became which.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.models import BootstrapAddress
from kprobe.probe.resolve import Resolver

CANONICAL = "resolve_canonical_bootstrap_servers_only"


def canonical_bootstraps(addresses: Sequence[BootstrapAddress], resolver: Resolver
                         ) -> tuple[list[BootstrapAddress], list[str]]:
    """The bootstrap list after the Java client's canonical expansion, and one line per name it changed.

    A name that does not resolve stays as it is: the bootstrap step then reports it unresolved, as
    the Java client fails on it ("No resolvable bootstrap urls" when none resolves).
    """
    out: dict[tuple[str, int], BootstrapAddress] = {}
    lines: list[str] = []
    for address in addresses:
        dns = resolver.resolve(address.host)
        if dns.status != "ok" or not dns.addresses:
            out.setdefault((address.host.lower(), address.port), address)
            continue
        names = []
        for ip in dns.addresses:
            canonical = (resolver.reverse(ip) or ip).rstrip(".")
            names.append(canonical)
            out.setdefault((canonical.lower(), address.port), BootstrapAddress(canonical, address.port,
                                                                               address.protocol))
        if names != [address.host]:
            lines.append(f"client.dns.lookup={CANONICAL}: bootstrap {address.hostport} becomes "
                         f"{', '.join(dict.fromkeys(BootstrapAddress(n, address.port).hostport for n in names))} "
                         "(each address's canonical name, as the Java client bootstraps)")
    return list(out.values()), lines
