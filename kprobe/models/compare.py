"""Two reports set side by side: what `kprobe diff` says differs, as data for every format.

The questions people bring are "why does it work from the office and not over the VPN?" and
"did my listener change fix it?". Both are answered by the same comparison: the run's verdict,
the cluster and broker set each side saw, each advertised endpoint's verdict from each side
(the words of the text table: `usable`, `unresolvable`, ...), the findings only one side has, and the
application's coordinators and internal topics whose state changed.
Endpoints are paired by node and advertised `host:port`; one left over on each side for the same
node has moved (a changed `advertised.listeners`). Timings never count as a difference: the same
endpoint answering in 2 ms and in 3 ms is the same verdict.

Which of the two questions a comparison answers decides its words, not its data: one vantage at
two times (A first) is before and after, so a finding "appeared"; two vantages are side by side,
neither came first, and a finding is "only at B" (`ReportDiff.before_after`).

Pure over two `Report`s, so it sits beside them: `kprobe.saved.show` reads both sides and
`kprobe.output.diff` formats what this computes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Literal

from kprobe.models import (
    INTERNAL_TOPICS,
    Coordinator,
    CoordinatorKind,
    EndpointResult,
    Finding,
    InternalTopic,
    Report,
    coordinator_verdict,
    verdict,
)
from kprobe.records import record

Change = Literal["same", "changed", "moved", "only_a", "only_b"]
# What an application row is about: a group's or transactional id's coordinator, or an internal topic.
ApplicationPart = Literal["coordinator", "internal_topic"]


@record(kw_only=True)
class Side:
    """One report as the comparison names it."""

    source: str
    report: Report

    @property
    def clusters(self) -> tuple[str, ...]:
        """The cluster ids its bootstraps answered with, in order, each once."""
        seen: list[str] = []
        for b in self.report.bootstraps:
            cid = b.metadata.cluster_id if b.metadata else None
            if cid and cid not in seen:
                seen.append(cid)
        return tuple(seen)

    @property
    def brokers(self) -> tuple[int, ...]:
        """The node ids its bootstraps advertised."""
        return tuple(sorted({br.node_id for b in self.report.bootstraps for br in b.brokers}))


@record(kw_only=True)
class EndpointRow:
    """One advertised endpoint (or one node's endpoint that moved) as each side saw it."""

    node_id: int
    endpoint_a: str | None
    endpoint_b: str | None
    verdict_a: str | None
    verdict_b: str | None
    addresses_a: tuple[str, ...] = ()
    addresses_b: tuple[str, ...] = ()
    change: Change = "same"


@record(kw_only=True)
class ApplicationChange:
    """A coordinator or an internal topic whose state differs between the sides.

    `name` is the group, the transactional id (`kind` says which) or the internal topic: a user's or
    a broker's text, made safe by whoever prints it. `state_a` and `state_b` are short words ("broker
    2, unreachable", "missing, cannot be created"), "-" on a side that said nothing of it.
    """

    part: ApplicationPart
    name: str
    kind: CoordinatorKind | None = None
    state_a: str
    state_b: str


@record(kw_only=True)
class ReportDiff:
    """Everything that differs between A and B; `differs` is what the exit code says."""

    a: Side
    b: Side
    rows: tuple[EndpointRow, ...]
    only_a: tuple[Finding, ...]
    only_b: tuple[Finding, ...]
    application: tuple[ApplicationChange, ...] = ()

    @property
    def status_changed(self) -> bool:
        """The runs' own verdicts (ok, gap, failed, interrupted) differ."""
        return self.a.report.status != self.b.report.status

    @property
    def clusters_differ(self) -> bool:
        """The bootstraps answered for different clusters (or one side got no answer)."""
        return self.a.clusters != self.b.clusters

    @property
    def brokers_differ(self) -> bool:
        """The sides were told of different broker sets."""
        return self.a.brokers != self.b.brokers

    @property
    def changed_rows(self) -> tuple[EndpointRow, ...]:
        """Endpoints whose verdict changed, that moved, or that only one side was told of."""
        return tuple(r for r in self.rows if r.change != "same")

    @property
    def before_after(self) -> bool:
        """One vantage at two times, A no later than B: only then may the output speak of time.

        Two vantages (office and VPN) are seen at once, not one after the other: a finding the VPN
        has is "only at B", not "appeared", and a verdict differs rather than changed. The same
        holds for one vantage given newest first, where "appeared" would say the opposite of what
        happened. A time that cannot be read counts as in order: the vantage is what matters.
        """
        a, b = self.a.report, self.b.report
        if a.vantage.name != b.vantage.name:
            return False
        at_a, at_b = _instant(a.started_at), _instant(b.started_at)
        return at_a is None or at_b is None or at_a <= at_b

    @property
    def differs(self) -> bool:
        """Whether anything in the comparison differs (exit 1, as `diff` exits)."""
        return bool(self.status_changed or self.clusters_differ or self.brokers_differ or self.changed_rows
                    or self.only_a or self.only_b or self.application)


def _instant(value: str) -> dt.datetime | None:
    """A report's RFC 3339 start as an aware datetime, None when it is not one (an edited file)."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.timezone.utc)


def _finding_key(f: Finding) -> tuple[object, ...]:
    """What makes two findings the same one: their code, severity and what they name, not their words.

    A message may quote a timing or a count that differs run to run; the code and what it names
    (nodes, endpoints, bootstrap) do not, unless the verdict itself changed. A finding merged over
    three brokers on one side and two on the other is a different finding: one endpoint changed.
    """
    return (f.code, f.severity, f.node_ids, f.endpoints, f.bootstrap)


def _cell(r: EndpointResult) -> str:
    return r.endpoint.hostport


def compare(a: Side, b: Side) -> ReportDiff:
    """The comparison of two reports (A before or beside B)."""
    rows: list[EndpointRow] = []
    left = list(a.report.endpoints)
    right = list(b.report.endpoints)
    by_key = {(r.endpoint.node_id, r.endpoint.hostport): r for r in right}
    unmatched_a: list[EndpointResult] = []
    matched_b: set[int] = set()
    for ra in left:
        rb = by_key.get((ra.endpoint.node_id, ra.endpoint.hostport))
        if rb is None or id(rb) in matched_b:
            unmatched_a.append(ra)
            continue
        matched_b.add(id(rb))
        rows.append(_row(ra, rb, a.report.findings, b.report.findings))
    unmatched_b = [rb for rb in right if id(rb) not in matched_b]
    # One endpoint left on each side for the same node: the node's advertised endpoint moved.
    for ra in list(unmatched_a):
        same_node_a = [x for x in unmatched_a if x.endpoint.node_id == ra.endpoint.node_id]
        same_node_b = [x for x in unmatched_b if x.endpoint.node_id == ra.endpoint.node_id]
        if len(same_node_a) == 1 and len(same_node_b) == 1:
            rb = same_node_b[0]
            unmatched_a.remove(ra)
            unmatched_b.remove(rb)
            rows.append(_row(ra, rb, a.report.findings, b.report.findings, moved=True))
    for ra in unmatched_a:
        rows.append(EndpointRow(node_id=ra.endpoint.node_id, endpoint_a=_cell(ra), endpoint_b=None,
                                verdict_a=verdict(ra, a.report.findings), verdict_b=None,
                                addresses_a=ra.dns.addresses, change="only_a"))
    for rb in unmatched_b:
        rows.append(EndpointRow(node_id=rb.endpoint.node_id, endpoint_a=None, endpoint_b=_cell(rb), verdict_a=None,
                                verdict_b=verdict(rb, b.report.findings), addresses_b=rb.dns.addresses,
                                change="only_b"))
    rows.sort(key=lambda r: (r.node_id, r.endpoint_a or r.endpoint_b or ""))
    keys_a = {_finding_key(f) for f in a.report.findings}
    keys_b = {_finding_key(f) for f in b.report.findings}
    return ReportDiff(a=a, b=b, rows=tuple(rows),
                      only_a=tuple(f for f in a.report.findings if _finding_key(f) not in keys_b),
                      only_b=tuple(f for f in b.report.findings if _finding_key(f) not in keys_a),
                      application=_application_changes(a.report, b.report))


def _coordinator_state(c: Coordinator, report: Report) -> tuple[object, str]:
    """What counts for a coordinator (its node and its endpoint's verdict, or its error) and how it reads."""
    word = coordinator_verdict(c, report.endpoints, report.findings)
    if word is None:
        return (None, c.error), f"no coordinator ({c.error or 'none named'})"
    return (c.node_id, word), f"broker {c.node_id}, {word}"


def _topic_state(t: InternalTopic | None) -> str:
    if t is None:
        return "-"
    if t.exists is False:
        return "missing, can be created" if t.can_create else "missing, cannot be created"
    problems = [f"{len(t.offline)} of {t.partitions} partitions without a leader"] if t.offline else []
    if t.under_min_isr:
        problems.append(f"{len(t.under_min_isr)} of {t.partitions} partitions below min.isr")
    return "; ".join(problems) or ("serves" if t.serves else "does not serve")


def _application_changes(a: Report, b: Report) -> tuple[ApplicationChange, ...]:
    """Coordinators whose node or verdict changed, internal topics that began or stopped serving.

    A coordinator is compared only where both runs asked for it: a key one run did not name is not
    a change of the cluster. A report without an application section had nothing to say (nothing
    named, every internal topic serving or not judged), so an internal topic there reads "-" and
    counts as serving: the side where it stopped serving is the one that shows it.
    """
    changes: list[ApplicationChange] = []
    coordinators_b = {(c.kind, c.key): c for c in (b.application.coordinators if b.application else ())}
    for ca in a.application.coordinators if a.application else ():
        cb = coordinators_b.get((ca.kind, ca.key))
        if cb is None:
            continue
        (key_a, words_a), (key_b, words_b) = _coordinator_state(ca, a), _coordinator_state(cb, b)
        if key_a != key_b:
            changes.append(ApplicationChange(part="coordinator", kind=ca.kind, name=ca.key, state_a=words_a,
                                             state_b=words_b))
    for name in INTERNAL_TOPICS:
        ta = next((t for t in a.application.internal_topics if t.name == name), None) if a.application else None
        tb = next((t for t in b.application.internal_topics if t.name == name), None) if b.application else None
        if (ta is None or ta.serves) != (tb is None or tb.serves):
            changes.append(ApplicationChange(part="internal_topic", name=name, state_a=_topic_state(ta),
                                             state_b=_topic_state(tb)))
    return tuple(changes)


def _row(ra: EndpointResult, rb: EndpointResult, findings_a: Sequence[Finding], findings_b: Sequence[Finding], *,
         moved: bool = False) -> EndpointRow:
    va, vb = _verdict_cell(ra, findings_a), _verdict_cell(rb, findings_b)
    change: Change = "moved" if moved else ("same" if va == vb else "changed")
    return EndpointRow(node_id=ra.endpoint.node_id, endpoint_a=_cell(ra), endpoint_b=_cell(rb), verdict_a=va,
                       verdict_b=vb, addresses_a=ra.dns.addresses, addresses_b=rb.dns.addresses, change=change)


def _verdict_cell(r: EndpointResult, findings: Sequence[Finding]) -> str:
    """The verdict, marked when it holds only with a --resolve or --connect-to mapping."""
    word = verdict(r, findings)
    return f"{word} (remapped)" if r.endpoint.remap is not None else word
