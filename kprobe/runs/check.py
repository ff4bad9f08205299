"""`kprobe check`: read listener settings, resolve their names from here, judge them; with --probe, compare.

The prediction needs the network only for one thing: whether this machine's resolver (or the
--nameserver given) resolves each advertised name, so a listener meant for clients here is judged by
what they will meet. Everything else is pure (kprobe.findings.check). With --probe, the predicted
bootstrap addresses for this vantage are probed by kprobe's own probe run (the CLI runs it, as it runs
`kprobe probe`), and `with_observations` sets what each listener really advertised and how it fared
beside the prediction: a file and what runs can differ, and that is worth seeing before a client does.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence

from kprobe.check.deployments import read_files
from kprobe.check.listeners import CheckReport, ClientNetwork, ListenerCheck, Observation, ObservedStatus, ReachStatus
from kprobe.errors import UsageError
from kprobe.findings.check import check_deployments, names_to_resolve
from kprobe.hostport import format_hostport
from kprobe.models import CLIENTS_CONNECT, RESOLVED, BootstrapResult, DnsResult, Report
from kprobe.option_table import DEADLINE, TIMEOUT
from kprobe.options import ProbeOptions, parse_duration, parse_nameserver, probe_options
from kprobe.probe.resolve import Resolver, resolve_all
from kprobe.records import replace
from kprobe.runs import now_rfc3339, report_id

# The vantage a probe from this machine stands for, by platform.
HERE: dict[str, ClientNetwork] = {"host": "here", "compose": "docker-host", "kubernetes": "outside"}
# A prediction and the probe's endpoint status that bear it out.
_AGREE: dict[ReachStatus, tuple[str, ...]] = {
    "works": CLIENTS_CONNECT,
    "resolves": RESOLVED,
    "unresolvable": ("unresolvable",),
    "unreachable": ("unreachable",),
}


def predict(paths: Sequence[str], *, nameservers: Sequence[tuple[str, int]] = (), timeout: float = 5.0,
            vantage: str | None = None) -> CheckReport:
    """Read the files, resolve the advertised names from here, judge every listener."""
    started = now_rfc3339()
    deployments = read_files(paths)
    resolver = Resolver(nameservers, timeout=timeout)
    names = names_to_resolve(deployments)
    resolved: dict[str, DnsResult] = resolve_all(names, resolver, time.monotonic() + timeout) if names else {}
    checks, findings = check_deployments(deployments, resolved)
    hostname = socket.gethostname()
    return CheckReport(
        id=report_id(), started_at=started, finished_at=now_rfc3339(), vantage_name=vantage or hostname,
        hostname=hostname, resolver_kind=resolver.kind,
        nameservers=tuple(format_hostport(ip, port) for ip, port in nameservers), files=tuple(paths),
        deployments=tuple(deployments), checks=tuple(checks), findings=tuple(findings))


def here_vantage(check: ListenerCheck, report: CheckReport) -> ClientNetwork:
    """The vantage this machine stands for, for the deployment the listener is in."""
    dep = next(d for d in report.deployments if d.source == check.source)
    return HERE[dep.platform]


def probe_targets(report: CheckReport) -> list[str]:
    """The bootstrap addresses a client here would use, one per listener predicted to have one.

    Placeholders (an address decided at deploy time, a random published port) cannot be dialled and
    are left out. TLS listeners get `SSL://`, SASL ones their protocol, so the probe speaks it.
    """
    targets = []
    for check in report.checks:
        reach = check.reach_of(here_vantage(check, report))
        if reach is None or reach.bootstrap is None or "<" in reach.bootstrap:
            continue
        protocol = check.listener.protocol or "PLAINTEXT"
        targets.append(reach.bootstrap if protocol == "PLAINTEXT" else f"{protocol}://{reach.bootstrap}")
    return list(dict.fromkeys(targets))


def with_observations(report: CheckReport, probe: Report) -> CheckReport:
    """The prediction with the probe's observation beside each listener it dialled (pure)."""
    by_address = {b.address: b for b in probe.bootstraps}
    observations = []
    for check in report.checks:
        vantage = here_vantage(check, report)
        reach = check.reach_of(vantage)
        if reach is None or reach.bootstrap is None or "<" in reach.bootstrap:
            continue
        boot = by_address.get(reach.bootstrap)
        if boot is None:
            continue
        observations.append(_observe(check, vantage, reach.status, reach.bootstrap, boot, probe))
    return replace(report, observations=tuple(observations), probe=probe, finished_at=now_rfc3339())


def _observe(check: ListenerCheck, vantage: ClientNetwork, predicted: ReachStatus, address: str, boot: BootstrapResult,
             probe: Report) -> Observation:
    """One listener's observation: the broker the file's node id names (or the only one) in the bootstrap's answer."""
    base = {"source": check.source, "broker": check.broker, "listener": check.listener.name, "vantage": vantage,
            "bootstrap": address, "predicted": predicted}
    if boot.status != "ok":
        return Observation(**base, observed="bootstrap_failed", advertised=None, agrees=None,  # type: ignore[arg-type]
                           detail=f"the bootstrap did not answer: {boot.status}" + (f" ({boot.error})" if boot.error
                                                                                   else ""))
    brokers = list(boot.brokers)
    node = check.node_id if check.node_id is not None else boot.node_id
    mine = next((b for b in brokers if b.node_id == node), None) or (brokers[0] if len(brokers) == 1 else None)
    if mine is None:
        return Observation(**base, observed="not_advertised", advertised=None, agrees=False,  # type: ignore[arg-type]
                           detail=f"the bootstrap's metadata lists no broker {node}")
    advertised = format_hostport(mine.host, mine.port)
    result = next((r for r in probe.endpoints if r.endpoint.node_id == mine.node_id and r.endpoint.host == mine.host
                   and r.endpoint.port == mine.port), None)
    observed: ObservedStatus = result.status if result is not None else "unchecked"
    expected = check.listener.advertised.text if check.listener.advertised else None
    drift = expected is not None and "<" not in expected and expected.lower() != advertised.lower()
    if predicted in _AGREE:
        agrees: bool | None = observed in _AGREE[predicted] and not drift
    else:
        agrees = None
    detail = f"advertises {advertised}: {observed}"
    if drift:
        detail += f"; the file says {expected}: the broker runs other settings than the file's"
    return Observation(**base, observed=observed, advertised=advertised, agrees=agrees,  # type: ignore[arg-type]
                       detail=detail)


def check_run(files: Sequence[str], *, nameservers: Sequence[str] = (), timeout: str = TIMEOUT.default,
              deadline: str = DEADLINE.default, props: Sequence[str] = (), prop_files: Sequence[str] = (),
              vantage: str | None = None, probe: Callable[[ProbeOptions], Report] | None = None) -> CheckReport:
    """`kprobe check`'s options as typed -> the prediction and, given `probe` (how this front end runs a probe:
    the CLI's in the foreground, Ctrl-C and all), the observation of the predicted bootstrap addresses.

    -F may come from KPROBE_CONFIG, set for probe runs: it only matters with a probe, and -X without one
    is a mistake worth a line.
    """
    if props and probe is None:
        raise UsageError("-X sets client settings for --probe: add --probe, or leave it out")
    servers = [parse_nameserver(n) for n in nameservers]
    per_request = parse_duration(timeout, TIMEOUT.flag)
    parse_duration(deadline, DEADLINE.flag)
    report = predict(files, nameservers=servers, timeout=per_request, vantage=vantage)
    if probe is None:
        return report
    targets = probe_targets(report)
    if not targets:
        raise UsageError("--probe: no listener has a bootstrap address from here to probe (each is unpublished, "
                         "cluster-internal or decided at deploy time)")
    options = probe_options(bootstrap=targets, props=props, prop_files=prop_files, nameservers=nameservers,
                            timeout=timeout, deadline=deadline, vantage=vantage)
    return with_observations(report, probe(options))
