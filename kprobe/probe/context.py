"""What every step of one run shares, built once at the top of the run and handed down.

As blackbox_exporter hands each prober its context and module: one deadline for the whole run
(each step turns it into per-call timeouts), one per-request timeout, one resolver (the vantage
point), and each bootstrap's security settings derived once from the user's properties, so no
step re-derives them per endpoint and no two steps can disagree about them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kprobe.kafka.security import Security, security_from
from kprobe.models import BootstrapAddress, Endpoint, Remap
from kprobe.probe.resolve import Resolver
from kprobe.records import field, record, replace


@record(kw_only=True)
class RunContext:
    """One run's shared settings; `deadline` is a `time.monotonic()` value."""

    timeout: float
    deadline: float
    resolver: Resolver
    props: Mapping[str, str] = field(default_factory=dict)
    # Each bootstrap's (`host:port`) security: its `SSL://` prefix or security.protocol, and the properties.
    security: Mapping[str, Security] = field(default_factory=dict)
    # The user's "what if" (--resolve: name -> IP; --connect-to: (name, port) -> (host, port)), held here so
    # resolve, connect, identity and TLS all dial the mapped address while SNI keeps the advertised name.
    resolve_map: Mapping[str, str] = field(default_factory=dict)
    connect_map: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def start(
        cls, bootstraps: Sequence[BootstrapAddress], props: Mapping[str, str], *, timeout: float, run_for: float,
        nameservers: Sequence[tuple[str, int]] = (), resolve: Mapping[str, str] | None = None,
        connect_to: Mapping[tuple[str, int], tuple[str, int]] | None = None,
        controllers: Sequence[BootstrapAddress] = (),
    ) -> RunContext:
        """A context whose deadline is `run_for` seconds from now.

        `controllers` (--controllers) get their security derived like bootstraps: the endpoints they
        advertise speak the same, as an admin client applies one configuration to both.
        """
        return cls(timeout=timeout, deadline=time.monotonic() + run_for,
                   resolver=Resolver(nameservers, timeout=timeout), props=props,
                   security={b.hostport: security_from(props, b) for b in (*bootstraps, *controllers)},
                   resolve_map=dict(resolve or {}), connect_map=dict(connect_to or {}))

    def remap(self, endpoint: Endpoint) -> Endpoint:
        """`endpoint` marked with where the mappings send it; --connect-to first, as curl applies it first."""
        host = endpoint.host.lower().rstrip(".")
        target = self.connect_map.get((host, endpoint.port))
        if target is not None:
            to_host = self.resolve_map.get(target[0].lower().rstrip("."), target[0])  # curl resolves it so too
            return replace(endpoint, remap=Remap(host=to_host, port=target[1], option="--connect-to"))
        address = self.resolve_map.get(host)
        if address is not None:
            return replace(endpoint, remap=Remap(host=address, port=endpoint.port, option="--resolve"))
        return endpoint

    def security_of(self, address: BootstrapAddress) -> Security:
        """The settings of the listener behind one bootstrap address."""
        return self.security.get(address.hostport) or security_from(self.props, address)

    def listener_security(self, endpoint: Endpoint) -> Security:
        """The settings of the listener that advertised `endpoint`: it speaks the same protocol."""
        for source in endpoint.advertised_by:
            if source in self.security:
                return self.security[source]
        return security_from(self.props)

    @property
    def uses_tls(self) -> frozenset[str]:
        """The bootstraps (`host:port`) whose listeners speak TLS."""
        return frozenset(hostport for hostport, sec in self.security.items() if sec.uses_tls)

    def remaining(self, bound: float, floor: float = 0.1) -> float:
        """`bound`, cut to what is left of the run (never below `floor`, so a last call still fails cleanly)."""
        return max(floor, min(bound, self.deadline - time.monotonic()))
