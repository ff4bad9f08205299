"""report.html: the aggregation as one self-contained page people want to read, with no network.

Why a script-drawn page and not pictures: a fixed image of the endpoint x vantage matrix was wider
than the page past sixteen vantages and cut them off, and a picture cannot say, on hover, how many
probes a cell stands for or why the last one failed. So the driver collects the small aggregated
tables into compact JSON (`page_data`), and the page draws from it: per cluster, a matrix in its own
scrolling box with sticky headers (the page itself never overflows), a cell's details on hover and
click, a sortable and filterable table of the worst gaps, and per-cluster timelines in SVG whose
legend sits beside the plot (the page itself: report_page.html beside this module). Everything is
inline; every name from a report (brokers and vantages
choose them) reaches the page as JSON text and is set as text (textContent), never as HTML.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kprobe.aggregate import local
from kprobe.aggregate.flatten import BOOTSTRAP_NODE, FAILURE_CLASSES

# Per cluster, the timeline draws the vantages with the lowest success rate (and the cluster's
# average): 200 lines on one plot read as none.
TIMELINE_VANTAGES = 12


def page_data(endpoint_vantage: DataFrame, hourly: DataFrame | None,
              findings_by_endpoint: DataFrame | None = None, minutely: DataFrame | None = None) -> dict[str, Any]:
    """What the page draws, collected on the driver from the aggregated tables (small by then).

    Compact on purpose: 200 vantages x 300 endpoints are 60,000 cells, so a cell is a short array
    (endpoint and vantage indexes, probes, successes, last status, last seen as Unix seconds,
    failures by class, and its finding) rather than an object of named fields. A cell's finding is
    the one the reports name for that endpoint from that vantage (`findings_by_endpoint`), as
    [index into the cluster's `findings`, occurrences, last seen, how many other codes], or absent:
    a gap says why, in the report's words, only if the page has them, as the terminal does. The
    cluster's `findings` list each [code, severity, message, fix] once (a message names its
    endpoint, not its vantage: one entry serves every vantage that saw it). `minutely` (per-minute
    probes, which the job computes only when the data span about an hour) makes the timelines finer.
    """
    fails = [f"fail_{name}" for name in FAILURE_CLASSES]
    rows = endpoint_vantage.select(
        "cluster_id", "node_id", "host", "port", "vantage", "probes", "successes", "last_status",
        F.unix_timestamp("last_seen").alias("last_seen"), F.unix_timestamp("first_seen").alias("first_seen"),
        *fails).collect()
    own = own_findings(findings_by_endpoint) if findings_by_endpoint is not None else {}
    statuses: list[str] = []
    clusters: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = clusters.setdefault(r.cluster_id or "", {"id": r.cluster_id or "", "endpoints": {}, "vantages": {},
                                                     "cells": [], "findings": {}})
        ep = c["endpoints"].setdefault((r.node_id, f"{r.host}:{r.port}"), len(c["endpoints"]))
        va = c["vantages"].setdefault(r.vantage, len(c["vantages"]))
        status = r.last_status or "ok"
        if status not in statuses:
            statuses.append(status)
        failures = {name: r[f"fail_{name}"] for name in FAILURE_CLASSES if r[f"fail_{name}"]}
        cell = [ep, va, r.probes, r.successes, statuses.index(status), r.last_seen, r.first_seen, failures]
        found = own.get((r.cluster_id or "", r.node_id, r.host, r.port, r.vantage))
        if found is not None:  # absent, not null, in a cell without one: 60,000 cells are most of the page
            entry, occurrences, seen, others = found
            cell.append([c["findings"].setdefault(entry, len(c["findings"])), occurrences, seen, others])
        c["cells"].append(cell)
    out = []
    for c in clusters.values():
        endpoints = [[n, hp] for (n, hp) in c["endpoints"]]
        out.append({"id": c["id"], "name": cluster_name(c["id"], [hp for _, hp in endpoints]),
                    "endpoints": endpoints, "vantages": list(c["vantages"]), "cells": c["cells"],
                    "findings": [list(entry) for entry in c["findings"]], "timeline": None})
    timelines = _timelines(hourly) if hourly is not None else {}
    if minutely is not None:
        timelines.update(_fine_timelines(minutely, timelines))
    for c in out:
        c["timeline"] = timelines.get(c["id"])
    return {"clusters": out, "statuses": statuses, "bootstrap_node": BOOTSTRAP_NODE}


SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
Finding = tuple[str, str, str, str]  # code, severity, message, fix


def own_findings(findings_by_endpoint: DataFrame) -> dict[tuple[Any, ...], tuple[Finding, int, int, int]]:
    """(cluster, node, host, port, vantage) -> the finding a cell shows: (its entry, occurrences, last seen, others).

    Of the codes the reports named for that endpoint from that vantage, the most severe, then the
    one named last (what explains the last status), then the most frequent; `others` counts the
    rest, which `findings_by_endpoint` lists.
    """
    rows = findings_by_endpoint.select(
        "cluster_id", "node_id", "host", "port", "vantage", "code", "severity", "occurrences",
        F.unix_timestamp("last_seen").alias("last_seen"), "message", "fix").collect()
    per: dict[tuple[Any, ...], list[Any]] = {}
    for r in rows:
        per.setdefault((r.cluster_id or "", r.node_id, r.host, r.port, r.vantage), []).append(r)
    out: dict[tuple[Any, ...], tuple[Finding, int, int, int]] = {}
    for key, found in per.items():
        r = min(found, key=lambda f: (SEVERITY_RANK.get(f.severity, 3), -(f.last_seen or 0), -f.occurrences, f.code))
        entry = (r.code, r.severity or "", r.message or "", r.fix or "")
        out[key] = (entry, r.occurrences, r.last_seen, len(found) - 1)
    return out


def cluster_name(cluster_id: str, endpoints: list[str]) -> str:
    """A name a person knows the cluster by, beside its id: the DNS suffix its brokers share, else an address.

    The outputs key a cluster by the id its brokers report (an opaque string) and do not keep the
    bootstrap each vantage used, so the page names it by what its advertised endpoints have in
    common (`*.prod.example.com`), or by its first endpoint when they share nothing. A cluster whose
    bootstraps all failed is already keyed by its bootstrap addresses, which is its name.
    """
    if cluster_id.startswith("bootstrap:") or not endpoints:
        return ""
    hosts = [hp.rsplit(":", 1)[0] for hp in endpoints]
    if any(not h or h[0].isdigit() or ":" in h or h.startswith("[") for h in hosts):  # IP addresses share no name
        return sorted(endpoints)[0]
    labels = [h.lower().split(".") for h in hosts]
    common: list[str] = []
    for parts in zip(*[lab[::-1] for lab in labels], strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    # At least two labels, and not a whole host name (one broker: its own address is its name).
    if len(common) >= 2 and all(len(lab) > len(common) for lab in labels):
        return "*." + ".".join(reversed(common))
    return sorted(endpoints)[0]


MINUTE = 60
HOUR = 3600
# The bucket a timeline draws, from the span of its data: hours for up to three days (an incident's
# hours stay apart), six hours up to three weeks, days beyond (a year is 365 points, not 8,760).
BUCKETS = ((3 * 24 * HOUR, HOUR), (21 * 24 * HOUR, 6 * HOUR))
DAY = 24 * HOUR


# From per-minute data (an incident of an hour or two): minutes, then five minutes; beyond, as hours.
FINE_BUCKETS = ((2 * HOUR, MINUTE), (12 * HOUR, 5 * MINUTE))


def bucket_for(span: int, finest: int = HOUR) -> int:
    """Seconds per point for data spanning `span` seconds, never finer than the data (`finest`)."""
    if finest < HOUR:
        size = next((size for limit, size in FINE_BUCKETS if span <= limit), None)
        if size is not None:
            return max(size, finest)
    return next((size for limit, size in BUCKETS if span <= limit), DAY)


def _timelines(hourly: DataFrame) -> dict[str, dict[str, Any]]:
    """Per cluster: success rate per bucket for its average and its worst vantages.

    From the `hourly` output (probes and successes per cluster, vantage and hour), already
    written and small: never from the observations, which a rerun would otherwise read in full.
    The hour is this output's finest bucket (the job adds a per-minute series only when the data
    span about an hour: `_fine_timelines`), so a lone hour is one point, drawn as a marker, never
    a line of one point.
    Every bucket from the first to the last is listed, empty ones as null, so that the x axis is
    time and a silent stretch shows as a break.
    """
    rows = hourly.select("cluster_id", "vantage", F.unix_timestamp("hour").alias("hour"),
                         F.col("successes").alias("ok"), F.col("probes").alias("n")).collect()
    per: dict[str, list[tuple[str, int, int, int]]] = {}
    for r in rows:
        per.setdefault(r.cluster_id or "", []).append((r.vantage, r.hour, r.ok, r.n))
    return {cluster: timeline(points) for cluster, points in per.items()}


def timeline(points: list[tuple[str, int, int, int]], finest: int = HOUR,
             average: list[tuple[int, int, int]] | None = None, vantages: int | None = None) -> dict[str, Any]:
    """(vantage, time as Unix seconds, successes, probes) rows of one cluster -> what its plot draws.

    `finest` is the data's own bucket (an hour, or a minute). When only the drawn vantages' points
    are given (per minute, the rest are not collected), `average` (time, successes, probes) and
    `vantages` say what all of them did.
    """
    times_seen = [p[1] for p in points] + [a[0] for a in average or []]
    first, last = min(times_seen), max(times_seen)
    size = bucket_for(last - first, finest)
    start = first - first % size
    times = list(range(start, last - last % size + 1, size))
    by_vantage: dict[str, dict[int, tuple[int, int]]] = {}
    total: dict[int, tuple[int, int]] = {}
    for vantage, hour, ok, n in points:
        at = hour - hour % size
        for into in (by_vantage.setdefault(vantage, {}), total):
            was = into.get(at, (0, 0))
            into[at] = (was[0] + ok, was[1] + n)
    if average is not None:
        total = {}
        for at, ok, n in average:
            was = total.get(at - at % size, (0, 0))
            total[at - at % size] = (was[0] + ok, was[1] + n)

    def rates(got: dict[int, tuple[int, int]]) -> list[float | None]:
        return [round(got[t][0] / got[t][1], 4) if got.get(t, (0, 0))[1] else None for t in times]

    def overall(got: dict[int, tuple[int, int]]) -> float:
        return sum(p[0] for p in got.values()) / max(1, sum(p[1] for p in got.values()))

    worst = sorted(by_vantage, key=lambda v: (overall(by_vantage[v]), v))[:TIMELINE_VANTAGES]
    return {"times": times, "bucket": size, "average": rates(total),
            "series": [{"vantage": v, "rates": rates(by_vantage[v])} for v in worst],
            "vantages": vantages if vantages is not None else len(by_vantage)}


PAIR = T.StructType([T.StructField("cluster_id", T.StringType()), T.StructField("vantage", T.StringType())])


def _fine_timelines(minutely: DataFrame, coarse: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cluster, the timeline again per minute, for the vantages the hourly one chose.

    Only those vantages' minutes and each cluster's total per minute are collected: 200 vantages x
    100 clusters x 120 minutes would be millions of rows on the driver for twelve lines a cluster.
    """
    pairs = [(cluster, s["vantage"]) for cluster, t in coarse.items() for s in t["series"]]
    if not pairs:
        return {}
    chosen = local.rows(minutely.sparkSession, pairs, PAIR)
    minute = F.unix_timestamp("minute").alias("minute")
    series = (minutely.join(F.broadcast(chosen), ["cluster_id", "vantage"])
              .select("cluster_id", "vantage", minute, "successes", "probes").collect())
    totals = (minutely.groupBy("cluster_id", "minute").agg(F.sum("successes").alias("ok"), F.sum("probes").alias("n"))
              .select("cluster_id", minute, "ok", "n").collect())
    points: dict[str, list[tuple[str, int, int, int]]] = {}
    for r in series:
        points.setdefault(r.cluster_id, []).append((r.vantage, r.minute, r.successes, r.probes))
    average: dict[str, list[tuple[int, int, int]]] = {}
    for r in totals:
        average.setdefault(r.cluster_id, []).append((r.minute, r.ok, r.n))
    return {cluster: timeline(points[cluster], MINUTE, average.get(cluster, []), coarse[cluster]["vantages"])
            for cluster in points if cluster in coarse}


# Inside <script>, `</script` ends the element early, and `<!--` followed by `<script` puts the HTML
# parser into its "double escaped" state, where the real `</script>` no longer ends it: the drawing
# script is swallowed and the page stays blank. JSON text can name these characters by their
# \u escapes, which the HTML parser does not read and JSON.parse turns back into the same text.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: Any) -> str:
    """JSON that is inert inside a <script> element, whatever strings it holds (ASCII-only too)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text.translate(_SCRIPT_SAFE)


def render_page(data: dict[str, Any], counts: dict[str, Any]) -> str:
    """The page for already-collected data: pure, so its drawing is tested at any size without Spark."""
    template = resources.files("kprobe.aggregate").joinpath("report_page.html").read_text(encoding="utf-8")
    return template.replace("/*DATA*/", script_json({**data, "counts": counts}))


def render_html(outputs: dict[str, DataFrame], counts: dict[str, Any], worst: list[dict[str, Any]],
                minutely: DataFrame | None = None) -> str:
    """The page of one aggregation. `worst` (the terminal's gap list) is recomputed by the page from every cell."""
    del worst
    return render_page(page_data(outputs["endpoint_vantage"], outputs.get("hourly"),
                                 outputs.get("findings_by_endpoint"), minutely), counts)
