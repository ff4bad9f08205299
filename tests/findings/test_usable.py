"""What a client can use, as every output counts it: Report.usable, the text's VERDICT column and summary
line, and the JSON summary, held to the findings on plain data.

"3/3 advertised endpoints reachable" once stood above an error about one of them. The count is now of
usable endpoints: reached, and concerned by no error finding (models.is_usable). These reports are built
from the models and judged by diagnose(), so each outcome a lab cannot stage (a NAT that leads to the
wrong broker, an IPv6 family failing beside IPv4, three brokers on one public address) is as easy as one
it can; the lab tests (tests/findings/test_findings_lab.py, tests/net/test_dualstack.py) check the same counts on
real brokers.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from observations import Case, answers_as, boot, check, endpoint, is_node, resolved

from kprobe.findings.catalogue import CATALOGUE
from kprobe.findings.diagnose import diagnose
from kprobe.models import BootstrapResult, EndpointResult, Report, Vantage, is_usable
from kprobe.output import json_report, text

HERE = Path(__file__).resolve().parent
CLIENT_SET = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "kafka2.example.com", 9092)]
BOOT = "192.0.2.10:9092"


def report(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> Report:
    """A finished run over these observations, judged by the rules as `kprobe probe` judges it."""
    findings = tuple(diagnose(bootstraps, endpoints))
    status = "gap" if any(f.severity == "error" for f in findings) else "ok"
    return Report(id="00000000-0000-4000-8000-000000000000", started_at="2025-01-01T00:00:00Z",
                  finished_at="2025-01-01T00:00:01Z", vantage=Vantage(name="here", hostname="here",
                                                                      resolver_kind="system"),
                  bootstraps=tuple(bootstraps), endpoints=tuple(endpoints), findings=findings, status=status,
                  duration_ms=12.0)


def verdicts(rendered: str) -> dict[int, str]:
    """Node id -> the VERDICT cell of its row in the text report's endpoint table."""
    lines = rendered.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Advertised endpoints"))
    assert lines[start + 1].split()[-1] == "VERDICT"
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = line.split()
        rows[int(cells[0])] = cells[-1]
    return rows


def test_another_broker_answering_is_unusable_and_a_failing_ipv6_family_is_not():
    """Broker 1's endpoint leads to node 0 (a NAT rule); broker 2's name has a refusing IPv6 address beside
    a working IPv4 one (degraded: clients with default settings connect). TCP reaches all three; a client
    uses two."""
    b = boot(BOOT, connected_to="192.0.2.10", advertises=CLIENT_SET, node_id=0)
    healthy = endpoint(0, "192.0.2.10", 9092, BOOT, identity=is_node(0, "192.0.2.10", CLIENT_SET))
    wrong = endpoint(1, "192.0.2.11", 9092, BOOT, identity=answers_as(0, "192.0.2.11", CLIENT_SET))
    dual = endpoint(2, "kafka2.example.com", 9092, BOOT, dns=resolved("kafka2.example.com", "2001:db8::12",
                                                                       "192.0.2.12"),
                    connect={"2001:db8::12": "refused", "192.0.2.12": "ok"},
                    identity=is_node(2, "192.0.2.12", CLIENT_SET))
    assert dual.status == "degraded"
    run = report([b], [healthy, wrong, dual])
    assert sorted((f.code, f.severity, f.node_id) for f in run.findings) == [
        ("ADVERTISED_ONE_FAMILY_FAILS", "warning", 2), ("ENDPOINT_WRONG_BROKER", "error", 1)]
    assert (run.reachable, run.usable) == (3, 2)
    rendered = text.render(run)
    assert verdicts(rendered) == {0: "usable", 1: "unusable", 2: "degraded"}
    summary = rendered.rstrip().splitlines()[-1]
    assert summary.startswith("GAP: 1/1 bootstraps answered, 2/3 advertised endpoints usable from here, ")
    data = json_report.to_dict(run)
    assert (data["summary"]["reachable"], data["summary"]["usable"]) == (3, 2)
    assert [e["status"] for e in data["endpoints"]] == ["reachable", "reachable", "degraded"]


def test_three_brokers_on_one_endpoint_none_checked_none_usable():
    """The regression: DUPLICATE_ENDPOINT was held against one broker only, so with identity unchecked two of
    three brokers advertising 10.0.0.5:9092 counted usable under the error naming that endpoint."""
    same = [(n, "10.0.0.5", 9092) for n in (1, 2, 3)]
    b = boot("10.0.0.5:9092", connected_to="10.0.0.5", advertises=same)
    endpoints = [endpoint(n, "10.0.0.5", 9092, "10.0.0.5:9092") for n in (1, 2, 3)]
    run = report([b], endpoints)
    [dup] = [f for f in run.findings if f.code == "DUPLICATE_ENDPOINT"]
    assert (dup.node_id, dup.endpoint, dup.node_ids, dup.endpoints) == (None, "10.0.0.5:9092", (1, 2, 3),
                                                                         ("10.0.0.5:9092",))
    assert (run.reachable, run.usable) == (3, 0)
    rendered = text.render(run)
    assert verdicts(rendered) == {1: "unusable", 2: "unusable", 3: "unusable"}
    assert "0/3 advertised endpoints usable from here" in rendered
    data = json_report.to_dict(run)
    assert data["summary"]["usable"] == 0
    assert data["findings"][0]["node_ids"] == [1, 2, 3] and data["findings"][0]["endpoints"] == ["10.0.0.5:9092"]


def test_three_brokers_on_one_endpoint_the_one_that_answers_stays_usable():
    """With identity checked, broker 1 answers there: its partitions work (real clients agree), 2 and 3's do not."""
    same = [(n, "10.0.0.5", 9092) for n in (1, 2, 3)]
    b = boot("10.0.0.5:9092", connected_to="10.0.0.5", advertises=same, node_id=1)
    endpoints = [endpoint(1, "10.0.0.5", 9092, "10.0.0.5:9092", identity=is_node(1, "10.0.0.5", same))] + [
        endpoint(n, "10.0.0.5", 9092, "10.0.0.5:9092", identity=answers_as(1, "10.0.0.5", same)) for n in (2, 3)]
    run = report([b], endpoints)
    [dup] = [f for f in run.findings if f.code == "DUPLICATE_ENDPOINT"]
    assert (dup.node_id, dup.node_ids) == (None, (2, 3))
    assert "found broker 1 answering there" in dup.message
    assert run.usable == 1
    assert verdicts(text.render(run)) == {1: "usable", 2: "unusable", 3: "unusable"}


def _rows() -> list[object]:
    rows = []
    for path in sorted(HERE.glob("test_rules_*.py")):
        # Only the rules over a probe's observations: kprobe check's rules (test_rules_check) judge files.
        rows += [pytest.param(c, id=f"{path.stem[11:]}:{c.name}") for c in importlib.import_module(path.stem).CASES
                 if isinstance(c, Case) and not c.xfail]
    return rows


ENDPOINT_STAGES = ("advertised", "identity", "tls", "dns")


@pytest.mark.parametrize("row", _rows())
def test_every_finding_lists_what_it_names(row):
    """Across every rule table: `endpoint` and `node_id`, when set, are among `endpoints` and `node_ids`
    (what is_usable reads), and an error about an advertised endpoint lists at least one, so no
    endpoint-stage error can leave every endpoint it is about counted usable."""
    found = check(row)
    for f in found:
        if f.node_id is not None:
            assert f.node_id in f.node_ids, f
        if f.endpoint is not None and f.code != "ADVERTISED_SHARED_ADDRESS":  # that one's `endpoint` is a host
            assert f.endpoint.lower() in {e.lower() for e in f.endpoints}, f
        if f.severity == "error" and CATALOGUE[f.code].stage in ENDPOINT_STAGES:
            assert f.endpoints, f
            named = [r for r in row.endpoints if f.concerns(r.endpoint)]
            assert named and not any(is_usable(r, found) for r in named), f
