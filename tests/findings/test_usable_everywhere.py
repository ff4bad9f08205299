"""One set of reports, every count of it: the probe, `list --reachability`, `check --probe`, `show --summary`
and the aggregation agree on how many endpoints a client connects to.

"Usable" once meant four things: `partial` counted as a reachable leader in `list` and as a success in the
aggregation while the probe called it a gap, and the aggregation's `endpoints_reachable` left `degraded`
out while its success rate took it in. The words are decided once (models.EndpointStatus: `reachable`
and `degraded` connect, `partial` is a gap, `unchecked` is no observation); this feeds the same reports,
built in memory, to each command's own counting code and demands one answer.

The endpoints of each report: reachable, degraded (IPv6 refused beside IPv4), partial (IPv4 refused beside
IPv6: the Java client fails), partial (one of two IPv4 addresses refused), unreachable, unresolvable, and
one the deadline cut (unchecked). A client connects to two of the six observed.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from observations import boot, endpoint, failed, resolved

from kprobe.findings.diagnose import diagnose
from kprobe.models import CLIENTS_CONNECT, EndpointResult, Report, Vantage
from kprobe.output import json_report, kcat, text
from kprobe.runs.check import _observe
from kprobe.runs.listing import Listing
from kprobe.saved.reading import Filters
from kprobe.saved.show import ShowOptions, show

BOOT = "192.0.2.10:9092"
ADVERTISED = [(0, "192.0.2.10", 9092), (1, "k1.example.com", 9092), (2, "k2.example.com", 9092),
              (3, "k3.example.com", 9092), (4, "192.0.2.14", 9092), (5, "k5.example.com", 9092),
              (6, "192.0.2.16", 9092)]
CONNECTS = 2  # nodes 0 (reachable) and 1 (degraded)
OBSERVED = 6  # all but node 6 (unchecked)


def endpoints() -> list[EndpointResult]:
    """The seven endpoints, each status the probe's own verdict on its addresses (kprobe.probe.reach)."""
    return [
        endpoint(0, "192.0.2.10", 9092, BOOT),
        endpoint(1, "k1.example.com", 9092, BOOT, dns=resolved("k1.example.com", "2001:db8::11", "192.0.2.11"),
                 connect={"2001:db8::11": "refused", "192.0.2.11": "ok"}),
        endpoint(2, "k2.example.com", 9092, BOOT, dns=resolved("k2.example.com", "2001:db8::12", "192.0.2.12"),
                 connect={"2001:db8::12": "ok", "192.0.2.12": "refused"}),
        endpoint(3, "k3.example.com", 9092, BOOT, dns=resolved("k3.example.com", "192.0.2.13", "192.0.2.33"),
                 connect={"192.0.2.13": "refused", "192.0.2.33": "ok"}),
        endpoint(4, "192.0.2.14", 9092, BOOT, connect="refused"),
        endpoint(5, "k5.example.com", 9092, BOOT, dns=failed("k5.example.com", "nxdomain")),
        endpoint(6, "192.0.2.16", 9092, BOOT, connect="timeout", unfinished=["192.0.2.16"]),
    ]


def reports() -> list[Report]:
    """The same observations from two vantages, an hour apart, judged by the rules as the probe judges them."""
    b = boot(BOOT, connected_to="192.0.2.10", advertises=ADVERTISED, node_id=0)
    ends = endpoints()
    findings = tuple(diagnose([b], ends))
    return [Report(id=f"00000000-0000-4000-8000-00000000000{i}", started_at=f"2026-11-01T0{i}:00:00Z",
                   finished_at=f"2026-11-01T0{i}:00:01Z",
                   vantage=Vantage(name=name, hostname=name, resolver_kind="system"), bootstraps=(b,),
                   endpoints=tuple(ends), findings=findings, status="gap", duration_ms=12.0)
            for i, name in ((1, "office"), (2, "vpn"))]


def test_the_endpoints_are_the_states_the_test_is_about():
    assert Counter(e.status for e in endpoints()) == Counter(
        {"reachable": 1, "degraded": 1, "partial": 2, "unreachable": 1, "unresolvable": 1, "unchecked": 1})


def test_probe_list_check_and_show_count_alike(tmp_path: Path):
    for report in reports():
        # The probe: its counts, its JSON summary, its text summary line.
        assert (report.reachable, report.usable) == (CONNECTS, CONNECTS)
        summary = json_report.to_dict(report)["summary"]
        assert (summary["reachable"], summary["usable"]) == (CONNECTS, CONNECTS)
        assert f" {CONNECTS}/7 advertised endpoints usable from here, " in text.summary_line(report)

        # `list --reachability`: the leaders it calls reachable, in its text and in kcat's JSON.
        listing = Listing(bootstrap=report.bootstraps[0], attempts=report.bootstraps, topics=(), query=(),
                          reachability={e.endpoint.node_id: e for e in report.endpoints})
        assert [n for n, _, _ in ADVERTISED if listing.leader_reachable(n)] == [0, 1]
        assert [n for n, _, _ in ADVERTISED if listing.leader_reachable(n) is None] == [6]  # unknown, not a gap
        brokers = json.loads(kcat.render_json(listing))["brokers"]
        assert sum(b["reachable"] for b in brokers) == CONNECTS
        assert listing.status == "gap"

        # `check --probe`: a listener predicted to work is borne out where a client connects.
        agrees = []
        for node, _, _ in ADVERTISED:
            listener = SimpleNamespace(source="server.properties", broker=f"b{node}", node_id=node,
                                       listener=SimpleNamespace(name="CLIENT", advertised=None))
            seen = _observe(listener, "here", "works", BOOT, report.bootstraps[0], report)  # type: ignore[arg-type]
            agrees.append(seen.agrees)
        assert agrees.count(True) == CONNECTS

    # `show --summary`: from the saved summary, and from the models where the summary cannot say (older reports).
    saved = [json_report.to_dict(r) for r in reports()]
    old = json.loads(json.dumps(saved[1]))
    del old["summary"]["usable"]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in (saved[0], old)))
    out = io.StringIO()
    shown, _ = show([str(tmp_path / "a.jsonl")], Filters(), ShowOptions(summary=True), out)
    lines = out.getvalue().splitlines()
    assert shown == 2 and len(lines) == 2
    for line in lines:
        assert re.search(rf"  GAP: 1/1 bootstraps answered, {CONNECTS}/7 advertised endpoints usable from here, ",
                         line), line


def test_the_aggregation_counts_alike(spark):
    """endpoint_vantage's successes and cluster_summary's endpoints_reachable, on a three-row DataFrame."""
    pytest.importorskip("pyspark")
    from kprobe.aggregate import merge
    from kprobe.aggregate.flatten import flat_records
    from kprobe.aggregate.parse import parse, quarantine_reason
    from kprobe.aggregate.rollups import day_rollups

    lines = [(f"r{i}.jsonl", json.dumps(json_report.to_dict(r))) for i, r in enumerate(reports())]
    parsed = quarantine_reason(parse(spark.createDataFrame(lines, "file string, line string")))
    rollups = day_rollups(flat_records(parsed))
    ev = merge.endpoint_vantage(rollups).collect()
    by_vantage: dict[str, list] = {}
    for row in ev:
        by_vantage.setdefault(row.vantage, []).append(row)
    assert sorted(by_vantage) == ["office", "vpn"]
    for rows in by_vantage.values():
        assert len(rows) == OBSERVED  # unchecked is no observation
        assert sum(r.successes for r in rows) == CONNECTS
        assert {r.node_id: r.last_status for r in rows} == {0: "ok", 1: "ok", 2: "partial", 3: "partial",
                                                            4: "refused", 5: "dns"}
        assert sum(r.fail_partial for r in rows) == 2
    summary = merge.cluster_summary(rollups).collect()
    assert sorted((r.vantage, r.endpoints_advertised, r.endpoints_reachable) for r in summary) == [
        ("office", 7, CONNECTS), ("vpn", 7, CONNECTS)]


def test_the_words_are_decided_once():
    """`reachable` and `degraded` connect; `partial` is a gap; the rest fail or, `unchecked`, are unknown."""
    assert CLIENTS_CONNECT == ("reachable", "degraded")
