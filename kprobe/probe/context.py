"""What every step of one run shares, built once at the top of the run and handed down.

As blackbox_exporter hands each prober its context and module: one deadline for the whole run
(each step turns it into per-call timeouts), one per-request timeout, one resolver (the vantage
point), and each bootstrap's security settings derived once from the user's properties, so no
step re-derives them per endpoint and no two steps can disagree about them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kprobe.kafka.security import Security, security_from
from kprobe.models import BootstrapAddress, Endpoint
from kprobe.probe.resolve import Resolver


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """One run's shared settings; `deadline` is a `time.monotonic()` value."""

    timeout: float
    deadline: float
    resolver: Resolver
    props: Mapping[str, str] = field(default_factory=dict)
    # Each bootstrap's (`host:port`) security: its `SSL://` prefix or security.protocol, and the properties.
    security: Mapping[str, Security] = field(default_factory=dict)

    @classmethod
    def start(
        cls, bootstraps: Sequence[BootstrapAddress], props: Mapping[str, str], *, timeout: float, run_for: float,
        nameservers: Sequence[tuple[str, int]] = (),
    ) -> RunContext:
        """A context whose deadline is `run_for` seconds from now."""
        return cls(timeout=timeout, deadline=time.monotonic() + run_for,
                   resolver=Resolver(nameservers, timeout=timeout), props=props,
                   security={b.hostport: security_from(props, b) for b in bootstraps})

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
