"""What `kprobe serve` may probe: `--allow-target` and the config's `targets:`, matched on host and port.

A pattern was once a glob over the text `host:port`, and text is the wrong thing to match: the
glob `127.0.0.3*:*` admitted `127.0.0.3x.attacker.example:9092`, a name that resolves wherever its
owner likes, and `[::1]:9092` could not match `[::1]:9092` since the brackets read as a character
class. So a pattern is parsed once, at start, into one of four kinds, and a target is parsed
(kprobe.options.parse_address) before it is compared:

- an IP network (`10.0.0.0/8`, `[fd00::/8]`) or address (`127.0.0.1`, `[::1]`): IP literal targets
  in it;
- an IPv4 glob (`127.0.0.3*`, four parts, `*` and `?` within a part): IPv4 literal targets;
- a name glob (`kafka-*.prod.example.com`, case-insensitive, `*` and `?` within one label, as in a
  TLS wildcard): name targets;
- `*`: any host, name or address.

Names and addresses never cross: an IP-shaped pattern matches only targets written as IP literals,
and a name pattern only targets written as names, so no DNS answer can widen the allow-list (a name
that resolves into 10.0.0.0/8 is not in `10.0.0.0/8`; list the name). What a broker then advertises
is dialled as a client would (docs/serve.md says so beside the allow-list).

The port is a number, `*`, or a glob of digits. A pattern this cannot read is refused at start with
one line, never guessed at.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from typing import Literal

from kprobe.errors import UsageError
from kprobe.models import BootstrapAddress
from kprobe.records import record

PatternKind = Literal["any", "network", "ipv4", "name"]
_MAX_PATTERN = 300
_NAME_CHARS = re.compile(r"[a-z0-9_.*?-]+")
_IPV4_GLOB_CHARS = re.compile(r"[0-9.*?]+")
_PORT_CHARS = re.compile(r"[0-9*?]+")
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Bad = Callable[[str], UsageError]


@record
class TargetPattern:
    """One allowed `host:port` pattern, parsed: `matches` compares it with a parsed target."""

    text: str
    kind: PatternKind
    port: re.Pattern[str]
    host: re.Pattern[str] | None = None
    network: _Network | None = None

    def matches(self, address: BootstrapAddress) -> bool:
        """Whether a target (an address as parse_address reads it) is within this pattern."""
        if not self.port.fullmatch(str(address.port)):
            return False
        ip = _ip_literal(address.host)
        if self.kind == "any":
            return True
        if self.kind == "network":
            assert self.network is not None
            return ip is not None and ip.version == self.network.version and ip in self.network
        if self.kind == "ipv4":
            assert self.host is not None
            return isinstance(ip, ipaddress.IPv4Address) and bool(self.host.fullmatch(str(ip)))
        assert self.host is not None
        return ip is None and bool(self.host.fullmatch(address.host.lower().rstrip(".")))


def parse_pattern(text: str, where: str) -> TargetPattern:
    """One pattern as an operator wrote it; UsageError `<where> '<text>' <problem>: <fix>` otherwise.

    `where` names the source: "bad --allow-target" or "--config FILE: target pattern".
    """
    from kprobe.sanitize import safe

    shown = repr(safe(text, limit=80))

    def bad(problem: str) -> UsageError:
        return UsageError(f"{where} {shown} {problem}")

    raw = text.strip()
    if not raw:
        raise bad("is empty: give HOST:PORT, e.g. 'kafka-*.prod.example.com:9092'")
    if len(raw) > _MAX_PATTERN:
        raise bad(f"is {len(raw)} characters long: give HOST:PORT of at most {_MAX_PATTERN}")
    if not raw.isascii() or not raw.isprintable() or any(c.isspace() for c in raw):
        raise bad("has a character no host or port has: give HOST:PORT in ASCII, without spaces")
    if "://" in raw:
        raise bad("has a PROTOCOL:// prefix: a pattern names hosts and ports only (a module sets "
                  "security.protocol)")
    if raw.startswith("["):
        inside, sep, rest = raw[1:].partition("]")
        if not sep:
            raise bad("has no ']': write IPv6 in brackets, e.g. '[::1]:9092' or '[fd00::/8]:*'")
        if not rest.startswith(":") or not rest[1:]:
            raise bad("has no port: give [IPv6]:PORT (the port may be *), e.g. '[::1]:9092'")
        port = rest[1:]
        if "*" in inside or "?" in inside:
            raise bad("globs an IPv6 address: give an address or a network, e.g. '[fd00::/8]:*'")
        network = _network(inside, 6, bad)
        return TargetPattern(text=raw, kind="network", network=network, port=_port(port, bad))
    host, sep, port = raw.rpartition(":")
    if not sep or not host:
        raise bad("has no port: give HOST:PORT (the port may be *), e.g. 'kafka-*:9092'")
    if ":" in host:
        raise bad("has an IPv6 address outside brackets: write it as '[::1]:9092' or '[fd00::/8]:*'")
    port_re = _port(port, bad)
    if host == "*":
        return TargetPattern(text=raw, kind="any", port=port_re)
    if "/" in host:
        return TargetPattern(text=raw, kind="network", network=_network(host, 4, bad), port=port_re)
    if _IPV4_GLOB_CHARS.fullmatch(host):
        return _ipv4_pattern(raw, host, port_re, bad)
    lowered = host.lower()
    if lowered.endswith("."):
        lowered = lowered[:-1]
    if not _NAME_CHARS.fullmatch(lowered):
        raise bad("has a character no host name has: use letters, digits, '-', '.', and the globs '*' and '?' "
                  "(brackets only around IPv6)")
    if any(not label for label in lowered.split(".")):
        raise bad("has an empty label ('..' or a leading '.'): write e.g. '*.prod.example.com:9092'")
    return TargetPattern(text=raw, kind="name", host=_label_glob(lowered), port=port_re)


def parse_patterns(texts: Iterable[str], where: str) -> tuple[TargetPattern, ...]:
    """Every pattern of one source, parsed; the first bad one is the error."""
    return tuple(parse_pattern(text, where) for text in texts)


def allowed(address: BootstrapAddress, patterns: Iterable[TargetPattern]) -> bool:
    """Whether any pattern admits this target."""
    return any(p.matches(address) for p in patterns)


def target_problem(address: BootstrapAddress) -> str | None:
    """Why a scrape's target cannot be matched safely, or None.

    A name that the C library reads as an IPv4 address (`2130706433`, `0x7f.1`, `127.1`) is neither:
    a name pattern would judge it as a name and the resolver would dial the address it encodes.
    """
    host = address.host
    if _ip_literal(host) is not None:
        return None
    try:
        socket.inet_aton(host)
    except OSError:
        return None
    return (f"{host!r} reads as an IPv4 address in a form resolvers disagree on: write it as four decimal "
            "numbers, e.g. 127.0.0.1")


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _network(text: str, version: int, bad: _Bad) -> _Network:
    """An address (a one-address network) or a CIDR network of that IP version, strict about host bits."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            what = "an IPv6 address or network" if version == 6 else "an IPv4 network"
            raise bad(f"is not {what}: write e.g. " + ("'[fd00::/8]:*'" if version == 6 else
                                                         "'10.0.0.0/8:9092'")) from exc
        raise bad(f"has host bits set after the address: write the network as {loose.with_prefixlen}") from None
    if network.version != version:
        raise bad("puts brackets round an IPv4 address: brackets are for IPv6; write e.g. '10.0.0.0/8:9092'"
                  if version == 6 else "is not an IPv4 network: write IPv6 in brackets, e.g. '[fd00::/8]:*'")
    return network


def _ipv4_pattern(raw: str, host: str, port: re.Pattern[str], bad: _Bad) -> TargetPattern:
    """`a.b.c.d` with digits, or `*` and `?` standing for digits within a part."""
    parts = host.split(".")
    if len(parts) != 4 or not all(parts):
        raise bad("is not four dot-separated parts: write e.g. '10.1.2.*:9092', or a network such as "
                  "'10.0.0.0/8:9092'")
    if not any(c in host for c in "*?"):
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            raise bad("is not an IPv4 address: each part is a number from 0 to 255 without leading zeros") from None
        return TargetPattern(text=raw, kind="network", network=ipaddress.ip_network(address), port=port)
    for part in parts:
        if part.isdigit() and (int(part) > 255 or (len(part) > 1 and part.startswith("0"))):
            raise bad("is not an IPv4 address: each part is a number from 0 to 255 without leading zeros")
    glob = r"\.".join("".join("[0-9]*" if c == "*" else "[0-9]" if c == "?" else c for c in part) for part in parts)
    return TargetPattern(text=raw, kind="ipv4", host=re.compile(glob), port=port)


def _label_glob(pattern: str) -> re.Pattern[str]:
    """A name glob whose `*` and `?` stay within one label: `kafka-*` is not `kafka-1.attacker.example`."""
    return re.compile("".join("[^.]*" if c == "*" else "[^.]" if c == "?" else re.escape(c) for c in pattern))


def _port(text: str, bad: _Bad) -> re.Pattern[str]:
    if not _PORT_CHARS.fullmatch(text):
        raise bad("has a port that is not a number or a glob of digits: give e.g. 9092 or *")
    if text.isdigit() and not 1 <= int(text) <= 65535:
        raise bad("has a port outside 1-65535: give e.g. 9092 or *")
    return re.compile("".join("[0-9]*" if c == "*" else "[0-9]" if c == "?" else c for c in text))
