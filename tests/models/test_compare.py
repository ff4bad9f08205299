"""`kprobe diff`'s comparison on real saved reports (tests/data/reports), edited the way networks change.

Pure: no broker, no subprocess. Each case takes a report recorded from the lab and changes one
thing a real change would (an endpoint moved, a broker gone, a name that stopped resolving), then
checks that the comparison names exactly that.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kprobe.models.compare import Side, compare
from kprobe.output import diff as diff_output
from kprobe.output.json_load import from_dict

BASE = json.loads((Path(__file__).resolve().parents[1] / "data" / "reports" /
                   "2026-11-23-7c779c2-blackholed.json").read_text())


def side(data: dict, name: str) -> Side:
    return Side(source=name, report=from_dict(data))


def test_a_report_against_itself_differs_in_nothing():
    diff = compare(side(BASE, "a"), side(copy.deepcopy(BASE), "b"))
    assert not diff.differs and all(r.change == "same" for r in diff.rows) and not diff.only_a and not diff.only_b
    assert diff_output.verdict_line(diff) == "SAME: the verdicts agree"


def test_timings_and_words_are_not_differences():
    later = copy.deepcopy(BASE)
    later["id"], later["started_at"], later["duration_ms"] = "other", "2026-11-24T00:00:00.000Z", 12345.0
    for e in later["endpoints"]:
        e["dns"]["ms"] = 99.0
        for t in e["tcp"]:
            t["ms"] = (t["ms"] or 0) + 50
    later["findings"][0]["message"] += " (reworded)"
    assert not compare(side(BASE, "a"), side(later, "b")).differs


def _edit(change):
    after = copy.deepcopy(BASE)
    change(after)
    return compare(side(BASE, "before"), side(after, "after"))


def _move_broker_2(d: dict) -> None:
    d["endpoints"][2]["host"] = "127.0.0.39"


def _drop_broker_1(d: dict) -> None:
    del d["endpoints"][1]
    d["bootstraps"][0]["brokers"] = [b for b in d["bootstraps"][0]["brokers"] if b["node_id"] != 1]


def _fix_broker_2(d: dict) -> None:
    e = d["endpoints"][2]
    e["tcp"][0]["status"], e["status"] = "ok", "reachable"
    d["findings"] = []
    d["summary"]["status"] = "ok"


def _other_cluster(d: dict) -> None:
    d["bootstraps"][0]["cluster_id"] = "another-cluster"


@pytest.mark.parametrize(("change", "rows", "status", "line"), [
    (_move_broker_2, [(2, "moved")], False, "DIFFERENT: 1 endpoint moved"),
    (_drop_broker_1, [(1, "only_a")], False, "DIFFERENT: 1 endpoint only in A, another broker set"),
    (_fix_broker_2, [(2, "changed")], True, "DIFFERENT: run gap -> ok, 1 verdict changed, 1 finding went away"),
    (_other_cluster, [], False, "DIFFERENT: another cluster"),
])
def test_each_change_is_named_exactly(change, rows, status, line):
    diff = _edit(change)
    assert diff.differs
    assert [(r.node_id, r.change) for r in diff.changed_rows] == rows
    assert diff.status_changed is status
    assert diff_output.verdict_line(diff) == line
    data = diff_output.to_dict(diff)
    assert data["differs"] is True and [(e["node_id"], e["change"]) for e in data["endpoints"]
                                        if e["change"] != "same"] == rows


def test_the_fixed_broker_reads_across_one_row():
    diff = _edit(_fix_broker_2)
    [row] = diff.changed_rows
    assert (row.verdict_a, row.verdict_b) == ("unreachable", "usable")
    text = diff_output.render_text([diff])
    assert "unreachable  usable  changed" in text and "Findings only in A (gone in B):\n  ERROR ADVERTISED_TIMEOUT" in text
