"""report.html: the aggregation as one self-contained page people want to read, with no network.

Why a script-drawn page and not pictures: a fixed image of the endpoint x vantage matrix was wider
than the page past sixteen vantages and cut them off, and a picture cannot say, on hover, how many
probes a cell stands for or why the last one failed. So the driver collects the small aggregated
tables into compact JSON (`page_data`), and the page draws from it: per cluster, a matrix in its own
scrolling box with sticky headers (the page itself never overflows), a cell's details on hover and
click, a sortable and filterable table of the worst gaps, and per-cluster timelines in SVG whose
legend sits beside the plot (the page itself: report_page.html beside this module). Everything is
inline; every name from a report (brokers and vantages
choose them) reaches the page as JSON text and is escaped by the page before it is shown.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kprobe.aggregate.transforms import BOOTSTRAP_NODE, FAILURE_CLASSES

# Per cluster, the timeline draws the vantages with the lowest success rate (and the cluster's
# average): 200 lines on one plot read as none.
TIMELINE_VANTAGES = 12


def page_data(endpoint_vantage: DataFrame, hourly: DataFrame | None) -> dict[str, Any]:
    """What the page draws, collected on the driver from the aggregated tables (small by then).

    Compact on purpose: 200 vantages x 300 endpoints are 60,000 cells, so a cell is a short array
    (endpoint and vantage indexes, probes, successes, last status, last seen as Unix seconds,
    failures by class) rather than an object of named fields.
    """
    fails = [f"fail_{name}" for name in FAILURE_CLASSES]
    rows = endpoint_vantage.select(
        "cluster_id", "node_id", "host", "port", "vantage", "probes", "successes", "last_status",
        F.unix_timestamp("last_seen").alias("last_seen"), F.unix_timestamp("first_seen").alias("first_seen"),
        *fails).collect()
    statuses: list[str] = []
    clusters: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = clusters.setdefault(r.cluster_id or "", {"id": r.cluster_id or "", "endpoints": {}, "vantages": {},
                                                     "cells": []})
        ep = c["endpoints"].setdefault((r.node_id, f"{r.host}:{r.port}"), len(c["endpoints"]))
        va = c["vantages"].setdefault(r.vantage, len(c["vantages"]))
        status = r.last_status or "ok"
        if status not in statuses:
            statuses.append(status)
        failures = {name: r[f"fail_{name}"] for name in FAILURE_CLASSES if r[f"fail_{name}"]}
        c["cells"].append([ep, va, r.probes, r.successes, statuses.index(status), r.last_seen, r.first_seen,
                           failures])
    out = []
    for c in clusters.values():
        out.append({"id": c["id"], "endpoints": [[n, hp] for (n, hp) in c["endpoints"]],
                    "vantages": list(c["vantages"]), "cells": c["cells"], "timeline": None})
    timelines = _timelines(hourly) if hourly is not None else {}
    for c in out:
        c["timeline"] = timelines.get(c["id"])
    return {"clusters": out, "statuses": statuses, "bootstrap_node": BOOTSTRAP_NODE}


def _timelines(hourly: DataFrame) -> dict[str, dict[str, Any]]:
    """Per cluster: success rate per hour for its average and its worst vantages.

    From the `hourly` output (probes and successes per cluster, vantage and hour), already
    written and small: never from the observations, which a rerun would otherwise read in full.
    """
    rows = hourly.select("cluster_id", "vantage", F.unix_timestamp("hour").alias("hour"),
                         F.col("successes").alias("ok"), F.col("probes").alias("n")).collect()
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = per.setdefault(r.cluster_id or "", {"hours": set(), "by_vantage": {}, "total": {}})
        c["hours"].add(r.hour)
        c["by_vantage"].setdefault(r.vantage, {})[r.hour] = (r.ok, r.n)
        ok, n = c["total"].get(r.hour, (0, 0))
        c["total"][r.hour] = (ok + r.ok, n + r.n)
    out = {}
    for cluster, c in per.items():
        hours = sorted(c["hours"])

        def rates(points: dict[int, tuple[int, int]], hours: list[int] = hours) -> list[float | None]:
            return [round(points[h][0] / points[h][1], 4) if h in points else None for h in hours]

        def overall(points: dict[int, tuple[int, int]]) -> float:
            ok = sum(p[0] for p in points.values())
            return ok / max(1, sum(p[1] for p in points.values()))

        worst = sorted(c["by_vantage"], key=lambda v: (overall(c["by_vantage"][v]), v))[:TIMELINE_VANTAGES]
        out[cluster] = {"hours": hours, "average": rates(c["total"]),
                        "series": [{"vantage": v, "rates": rates(c["by_vantage"][v])} for v in worst],
                        "vantages": len(c["by_vantage"])}
    return out


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


def render_html(outputs: dict[str, DataFrame], counts: dict[str, Any], worst: list[dict[str, Any]]) -> str:
    """The page of one aggregation. `worst` (the terminal's gap list) is recomputed by the page from every cell."""
    del worst
    return render_page(page_data(outputs["endpoint_vantage"], outputs.get("hourly")), counts)
