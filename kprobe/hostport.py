"""What an address or host name is, before anything is sent to it: pure text rules.

Text, not network: kept in the base layer, apart from the steps that resolve and connect
(kprobe.net, kprobe.probe), because the report's data writes `host:port` with it and the findings
judge the same names (is it loopback? an IP literal?); neither may pull the network code in.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

# fullmatch: `$` would let a trailing newline through (`kafka-1\n` sent to the resolver as it is).
_HOST_CHARS = re.compile(r"[A-Za-z0-9._:\[\]-]+")


def format_hostport(host: str, port: int) -> str:
    """Bracket IPv6 literals so `host:port` stays parseable."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def is_ip_literal(host: str) -> bool:
    """IP literals skip DNS entirely, as clients do."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def is_loopback_name(host: str) -> bool:
    """`localhost` names never go to DNS (RFC 6761); treat them as the hosts file does."""
    lowered = host.lower().rstrip(".")
    return lowered == "localhost" or lowered.endswith(".localhost")


def is_loopback_ip(text: str) -> bool:
    """An IP literal in 127.0.0.0/8 or ::1; a name or anything else is not."""
    try:
        return ipaddress.ip_address(text.strip("[]")).is_loopback
    except ValueError:
        return False


def port_problem(port: int) -> str | None:
    """Why an advertised port cannot be connected to, or None."""
    if not 0 < port < 65536:
        return f"port {port} is outside 1-65535"
    return None


def host_problem(host: str) -> str | None:
    """Why an advertised host cannot be a name or address a client resolves, or None.

    Such hosts are never sent to a resolver: a broker's metadata is untrusted input.
    """
    if not host:
        return "the host is empty"
    if len(host) > 253:
        return f"the host is {len(host)} characters long (a DNS name has at most 253)"
    if not _HOST_CHARS.fullmatch(host):
        return "the host contains characters no host name or address has"
    return None


AddressClass = Literal["loopback", "private", "cgnat", "link-local", "public", "special"]

# RFC 1918's three blocks, spelt out: `ipaddress.is_private` also says True for documentation, benchmark
# and other special ranges, which a reader of "private address" would not expect.
_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598: carrier-grade NAT, also cloud and VPN overlays
_ULA = ipaddress.ip_network("fc00::/7")  # RFC 4193: IPv6's private addresses


def address_class(text: str) -> AddressClass | None:
    """Which kind of network an IP literal belongs to; None for a name (or anything not an address).

    Why: an advertised address in a private, CGNAT or link-local range is reachable only from its own
    network (a VPC, a Kubernetes node network, a carrier's NAT, one link), so when it fails from here the
    range says why, which a bare timeout cannot. `public` is a globally routable address; `special` is the
    rest (documentation, multicast, unspecified, reserved), which no working set-up advertises.
    """
    try:
        ip = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if isinstance(ip, ipaddress.IPv4Address):
        if any(ip in net for net in _RFC1918):
            return "private"
        if ip in _CGNAT:
            return "cgnat"
    elif ip in _ULA:
        return "private"
    if ip.is_global and not ip.is_multicast:
        return "public"
    return "special"
