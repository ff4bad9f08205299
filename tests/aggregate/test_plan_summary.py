"""The terminal's summary of a run (kprobe.aggregate.plan.summary_lines) from a given result, without Spark:
each gap's figure says what it counts, in report.html's words."""

from __future__ import annotations

from kprobe.aggregate.plan import succeeded, summary_lines

COUNTS = {"input_records": 5, "reports": 5, "reports_in_window": 5, "observations": 10, "duplicates": 0,
          "quarantined": 0}


def gap(rate: float, probes: int, **more: object) -> dict:
    return {"success_rate": rate, "probes": probes, "cluster_id": "c1", "node_id": 2, "host": "198.19.0.12",
            "port": 9092, "vantage": "laptop", "last_status": "dns", **more}


def test_each_gap_says_its_figure_is_the_share_of_probes_that_succeeded():
    lines = summary_lines({"counts": COUNTS, "worst": [gap(0.0, 5), gap(0.5, 2, node_id=-1, vantage="ci"),
                                                        gap(1.0, 3)]})
    assert lines[1:] == [
        "worst gaps:",
        "    0.0% of 5 probes succeeded  cluster c1 broker 2 198.19.0.12:9092 from laptop (last dns)",
        "   50.0% of 2 probes succeeded  cluster c1 bootstrap 198.19.0.12:9092 from ci (last dns)"]


def test_a_gap_never_reads_as_none_or_all_succeeded():
    assert succeeded(0.9996, 10_000) == " 99.9% of 10000 probes succeeded"
    assert succeeded(0.0004, 10_000) == "  0.1% of 10000 probes succeeded"
    assert succeeded(0.0, 1) == "  0.0% of 1 probe succeeded"
    assert succeeded(2 / 3, 3) == " 66.7% of 3 probes succeeded"


def test_no_gaps_is_said_in_one_line():
    assert summary_lines({"counts": COUNTS, "worst": [gap(1.0, 3)]})[1:] == [
        "no gaps: every endpoint reachable from every vantage"]
