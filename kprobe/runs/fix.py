"""`kprobe fix`: the plan written into the files, then proven before anything is written or restarted.

The proof has two parts. Always: `kprobe check`'s prediction on the patched text (read from memory, the
names resolved from here or through --nameserver) must show, for the network each report came from, that
the listener the vantage then uses works there. With --verify: the what-if probe from here for the reports
whose vantage is this machine, the report's own bootstraps probed with every gap endpoint mapped
(--connect-to) onto the address that reaches that broker today; its status is the verdict after. A
vantage elsewhere gets the command to run there.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
from collections.abc import Callable, Sequence

from kprobe.check.deployments import read_files
from kprobe.check.listeners import CLIENT_NETWORK_WORDS, Deployment, ListenerCheck, Reach, ReachStatus
from kprobe.errors import UsageError
from kprobe.findings.check import check_deployments, names_to_resolve
from kprobe.fix.edits import edit_files
from kprobe.fix.model import FixReport, Plan, Proof, Use
from kprobe.fix.plan import plan as make_plan
from kprobe.fix.plan import reached_by_name
from kprobe.fix.texts import read_texts
from kprobe.models import Report
from kprobe.option_table import DEADLINE, TIMEOUT, given_client_settings
from kprobe.options import ProbeOptions, parse_duration, parse_nameserver, probe_options
from kprobe.probe.resolve import Resolver, resolve_all
from kprobe.records import record, replace
from kprobe.redaction import REDACTED

_WORKS = ("works", "resolves")


def fix_run(reports: Sequence[tuple[str, Report]], configs: Sequence[str], *, port: int | None = None,
            verify: bool = False, vantage: str | None = None, nameservers: Sequence[str] = (),
            timeout: str = TIMEOUT.default, deadline: str = DEADLINE.default, props: Sequence[str] = (),
            prop_files: Sequence[str] = (), probe: Callable[[ProbeOptions], Report] | None = None) -> FixReport:
    """The reports (source, report) against the configuration files -> the change and its proof.

    `props` and `prop_files` are the what-if's client settings (-X, -F); without them each report's recorded ones.
    """
    if not reports:
        raise UsageError("kprobe fix needs at least one probe report (kprobe probe --json > report.json)")
    if not configs:
        raise UsageError("kprobe fix needs the brokers' configuration: --config server.properties, a Compose file, "
                         "a Strimzi Kafka resource or Bitnami chart values")
    servers = [parse_nameserver(n) for n in nameservers]
    per_request = parse_duration(timeout, TIMEOUT.flag)
    parse_duration(deadline, DEADLINE.flag)
    deployments = read_files(configs)
    texts = {path: _text(path) for path in configs}
    plan = make_plan(reports, deployments, port=port)
    secrets = tuple(s for d in deployments for s in d.secrets)
    # Every file's diff made once here, so a secret its context cannot avoid is refused before any output.
    files = [replace(f, secrets=secrets) for f in edit_files(texts, deployments, plan.edits)]
    for file in files:
        _ = file.diff
    patched = {path: text for path, text in texts.items()}
    patched.update({f.path: f.new for f in files})
    after = read_texts(list(patched.items()))
    resolver = Resolver(servers, timeout=per_request)
    names = names_to_resolve(after)
    resolved = resolve_all(names, resolver, time.monotonic() + per_request) if names else {}
    checks, _ = check_deployments(after, resolved)
    here = vantage or socket.gethostname()
    proofs = []
    for use in plan.uses:
        client = _client_settings(use, props, prop_files)
        proof = _predicted(use, plan, checks, after, nameservers, client)
        if verify:
            proof = _verified(proof, use, plan, here=here, probe=probe, nameservers=nameservers, timeout=timeout,
                              deadline=deadline, vantage=vantage, client=client)
        proofs.append(proof)
    return FixReport(configs=tuple(configs), reports=tuple(s for s, _ in reports), plan=plan, files=tuple(files),
                     proofs=tuple(proofs), verified=verify, secrets=secrets)


def _text(path: str) -> str:
    """The file's text as read_files read it (it refused anything unreadable already)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def _predicted(use: Use, plan: Plan, checks: Sequence[ListenerCheck], after: Sequence[Deployment],
               nameservers: Sequence[str], client: ClientSettings) -> Proof:
    """`kprobe check` on the patched files, for the network this vantage stands on and the listener it then uses."""
    gaps = [g for g in plan.gaps if g.vantage == use.vantage]
    dep = next(d for d in after if d.source == use.deployment)
    words = CLIENT_NETWORK_WORDS[use.network]
    seen = []
    failing = []
    unknown = []
    for broker in dep.brokers:
        if broker.node_id is None or broker.listener(use.listener) is None:
            continue
        added = next((e for e in plan.edits if e.node_id == broker.node_id and e.source == use.deployment
                      and e.action == "add" and use.vantage in e.vantages), None)
        replaced = any(e.node_id == broker.node_id and e.source == use.deployment and e.action == "replace"
                       and e.listener == use.listener for e in plan.edits)
        had_gap = any(g.node_id == broker.node_id for g in gaps)
        if not (added or replaced or had_gap):
            seen.append(f"broker {broker.node_id} {use.listener} unchanged (worked in the report)")
            continue
        name = added.listener if added is not None else use.listener
        check = next((c for c in checks if c.source == dep.source and c.broker == broker.name
                      and c.listener.name == name), None)
        reach = check.reach_of(use.network) if check is not None else None
        status: ReachStatus = reach.status if reach is not None else "unknown"
        why = reach.why if reach is not None else "not predicted"
        if reach is not None and check is not None and use.network == "here":
            status, why = _in_its_network(use, check, broker.node_id, reach)
        seen.append(f"broker {broker.node_id} {name} {status}")
        if status == "unknown":  # an address the platform gives when it deploys: no file can prove it
            unknown.append(f"broker {broker.node_id} {name}: {why}")
        elif status not in _WORKS:
            failing.append(f"broker {broker.node_id} {name}: {why}")
    resolver = f" (names resolved through {', '.join(nameservers)})" if nameservers else ""
    how = f"kprobe check on the patched files, {words}{resolver}: " + ", ".join(seen)
    open_here = any(u.vantage == use.vantage for u in plan.unresolved)
    if failing:
        after_word = "gap"
        how += "; still failing: " + "; ".join(failing)
    elif open_here:
        after_word = "gap"
        how += "; a gap no configuration closes stays (see unresolved)"
    elif unknown:
        after_word = "not proven"
        how += "; not proven from the files: " + "; ".join(unknown)
    else:
        after_word = "closed" if gaps else "ok"
    how += _opens_at_restart(use, plan)
    return Proof(vantage=use.vantage, source=use.source, network=use.network, before=use.report.status,
                 after=after_word, how=how, command=what_if_command(use, plan, client))  # type: ignore[arg-type]


def _in_its_network(use: Use, check: ListenerCheck, node_id: int, reach: Reach) -> tuple[ReachStatus, str]:
    """A server.properties listener's reach for the network the report came from, not for this machine: the
    file does not say where its clients are, and `kprobe check` alone judges names from here (a `localhost`
    advertised for the Docker host is a loopback mistake to it). What the vantage's own probe met by that name
    decides where it met anything: it reached the broker by it, or found it unresolvable.
    """
    adv = check.listener.advertised
    if adv is None or reach.cause not in (None, "name", "loopback"):
        return reach.status, reach.why
    host = adv.host
    evidence = reached_by_name(use.report, host, node_id)
    if evidence is not None and reach.status in ("resolves", "unresolvable", "unreachable"):
        return "works", f"{host} from {use.vantage}: {evidence}"
    unresolvable = next((r for r in use.report.endpoints if r.endpoint.host.lower() == host.lower()
                         and r.status == "unresolvable"), None)
    if unresolvable is not None and reach.status in _WORKS:
        return "unresolvable", (f"{host} does not resolve from {use.vantage} (its report: "
                                f"{unresolvable.endpoint.hostport})")
    return reach.status, reach.why


@record(kw_only=True)
class ClientSettings:
    """The what-if's client settings: -X values and -F files, given to kprobe fix or recorded in the report;
    `secrets` are keys the report was probed with but holds redacted, and `absent` its -F files not found
    here, so the what-if cannot use them.
    """

    props: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()

    @property
    def args(self) -> list[str]:
        """The settings as `kprobe probe` takes them."""
        return [arg for path in self.files for arg in ("-F", path)] + [arg for p in self.props for arg in ("-X", p)]

    @property
    def missing(self) -> str:
        """Why the what-if cannot run with the report's settings ('' when it can)."""
        if self.secrets:
            why = f"{', '.join(self.secrets)}, a secret a report never holds"
        elif self.absent:
            why = f"-F {', '.join(self.absent)}, not found here"
        else:
            return ""
        return (f"the report was probed with {why}: give kprobe fix the client settings the report was probed "
                "with (-F FILE)")


def _client_settings(use: Use, props: Sequence[str], prop_files: Sequence[str]) -> ClientSettings:
    """The -F/-X given to kprobe fix, else the report's client settings as they were given (a SASL or TLS
    bootstrap needs them: the what-if is a client like the report's), its -F files read again where they are.
    """
    if props or prop_files:
        return ClientSettings(props=tuple(props), files=tuple(prop_files))
    files, pairs = given_client_settings(use.report.settings)
    # -b gives the bootstraps: a recorded bootstrap.servers would only repeat them
    kept = {str(k): str(v) for k, v in pairs.items() if k != "bootstrap.servers"}
    found = [(f, os.path.isfile(f)) for f in files]
    return ClientSettings(props=tuple(f"{k}={v}" for k, v in kept.items() if v != REDACTED),
                          files=tuple(f for f, here in found if here),
                          secrets=tuple(sorted(k for k, v in kept.items() if v == REDACTED)),
                          absent=tuple(f for f, here in found if not here))


def _mappings(use: Use, plan: Plan) -> list[str]:
    """--connect-to values: each gap endpoint of this vantage onto the address that works today."""
    return list(dict.fromkeys(f"{g.endpoint}={g.working}" for g in plan.gaps
                              if g.vantage == use.vantage and g.working is not None))


def _bootstraps(use: Use) -> list[str]:
    """The report's bootstraps that answered, as it typed them, the protocol kept: one that failed there today is
    not the change's to prove, and would make the what-if's verdict a gap whatever the change.
    """
    out = []
    answered = [b for b in use.report.bootstraps if b.status == "ok"] or list(use.report.bootstraps)
    for boot in answered:
        protocol = boot.protocol
        out.append(boot.address if protocol in (None, "PLAINTEXT") else f"{protocol}://{boot.address}")
    return out


def _opens_at_restart(use: Use, plan: Plan) -> str:
    """What the what-if cannot exercise for a listener added for this vantage: its port, open only once the
    brokers restart (and in Compose, once the port is published), so the what-if dials the address that works
    today instead; the probe to run there after the restart says the rest.
    """
    added = [e for e in plan.edits if e.action == "add" and use.vantage in e.vantages and e.source == use.deployment]
    if not added:
        return ""
    ports = ", ".join(dict.fromkeys(e.new.rpartition(":")[2] for e in added))
    via = ", ".join(dict.fromkeys(e.via for e in added))
    after = shlex.join(["kprobe", "probe", "-b", ",".join(dict.fromkeys(e.new for e in added))])
    return (f"; the new port {ports} is not open before the restart, so the what-if dials {via}, which reaches the "
            f"same broker today; after the restart run there: {after}")


def _plain_command(use: Use, client: ClientSettings) -> str:
    """The probe a vantage runs as it does today: for one whose listener the change leaves as it is."""
    return shlex.join(["kprobe", "probe", "-b", ",".join(_bootstraps(use)), *client.args])


def what_if_command(use: Use, plan: Plan, client: ClientSettings | None = None) -> str | None:
    """The `kprobe probe` a vantage runs to see the change's effect before it is made (None: nothing to map)."""
    mappings = _mappings(use, plan)
    if not mappings:
        return None
    args = ["kprobe", "probe", "-b", ",".join(_bootstraps(use)), *(client.args if client else [])]
    for mapping in mappings:
        args += ["--connect-to", mapping]
    return shlex.join(args)


def _verified(proof: Proof, use: Use, plan: Plan, *, here: str, probe: Callable[[ProbeOptions], Report] | None,
              nameservers: Sequence[str], timeout: str, deadline: str, vantage: str | None,
              client: ClientSettings) -> Proof:
    """The what-if probe from here, for a report of this machine's vantage; elsewhere, not proven from here."""
    mappings = _mappings(use, plan)
    if not mappings:
        if use.vantage == here:
            return proof
        return replace(proof, command=_plain_command(use, client),
                       how=proof.how + f"; not probed from here ({here}): its listener is unchanged, so it needs no "
                                       "what-if")
    if use.vantage != here or probe is None:
        return replace(proof, after="not proven", how=proof.how + f"; not proven from here ({here}): run the "
                                                                   f"command on {use.vantage}")
    if client.missing:
        return replace(proof, after="not proven", how=proof.how + f"; not probed from here: {client.missing}")
    options = probe_options(bootstrap=_bootstraps(use), connect_to=mappings, nameservers=list(nameservers),
                            timeout=timeout, deadline=deadline, vantage=vantage, props=list(client.props),
                            prop_files=list(client.files))
    seen = probe(options)
    after = "closed" if seen.status == "ok" and proof.after != "gap" else "gap"
    dialled = ", ".join(f"{r.endpoint.hostport} at {r.endpoint.remap.hostport} {r.status}" if r.endpoint.remap
                        else f"{r.endpoint.hostport} {r.status}" for r in seen.endpoints)
    return replace(proof, after=after, how=proof.how + f"; the what-if probed from here ({here}): "
                                                       f"{dialled or 'no endpoint'}, {seen.status}")
