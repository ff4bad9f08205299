"""report.html: one self-contained page (images embedded), readable with no network access.

A vantage x endpoint heatmap of success rates (who can reach what), and a timeline per cluster
(success rate per hour and vantage: when it broke). Plots are made with matplotlib on the
driver, from the already-aggregated, small DataFrames.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def heatmap(endpoint_vantage: DataFrame) -> str | None:
    """Success rate per (endpoint, vantage) as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = endpoint_vantage.select("cluster_id", "node_id", "host", "port", "vantage", "success_rate").collect()
    if not rows:
        return None
    endpoints = sorted({(r.cluster_id, r.node_id, f"{r.host}:{r.port}") for r in rows})[:60]
    vantages = sorted({r.vantage for r in rows})[:40]
    grid = [[float("nan")] * len(vantages) for _ in endpoints]
    for r in rows:
        key = (r.cluster_id, r.node_id, f"{r.host}:{r.port}")
        if key in endpoints and r.vantage in vantages:
            grid[endpoints.index(key)][vantages.index(r.vantage)] = r.success_rate
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(vantages), 1 + 0.35 * len(endpoints)))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(vantages)), vantages, rotation=45, ha="right")
    # node -1 is a bootstrap no report got past (its cluster id is unknown): name it as such.
    ax.set_yticks(range(len(endpoints)), [f"bootstrap {hp}" if n == -1 else f"{c[:8]} #{n} {hp}"
                                          for c, n, hp in endpoints])
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                ax.text(j, i, f"{value:.0%}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label="success rate")
    ax.set_title("Who can reach what: advertised endpoint x vantage")
    data = _png(fig)
    plt.close(fig)
    return data


def timelines(observations: DataFrame | None) -> list[tuple[str, str]]:
    """Per cluster, success rate per hour and vantage, as base64 PNGs."""
    if observations is None:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hourly = (observations.groupBy("cluster_id", "vantage", F.date_trunc("hour", "ts").alias("hour"))
              .agg(F.avg(F.col("success").cast("double")).alias("rate")).orderBy("hour").collect())
    out = []
    for cluster in sorted({r.cluster_id for r in hourly})[:10]:
        fig, ax = plt.subplots(figsize=(9, 2.6))
        for vantage in sorted({r.vantage for r in hourly if r.cluster_id == cluster}):
            points = [(r.hour, r.rate) for r in hourly if r.cluster_id == cluster and r.vantage == vantage]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=vantage)
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("success rate")
        ax.set_title(f"cluster {cluster}")
        ax.legend(loc="lower left", fontsize=7)
        fig.autofmt_xdate()
        out.append((cluster, _png(fig)))
        plt.close(fig)
    return out


def render_html(outputs: dict[str, DataFrame], counts: dict[str, Any], worst: list[dict[str, Any]],
                observations: DataFrame | None = None) -> str:
    """The page, with everything inline."""
    esc = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>kprobe reachability</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 8px}</style></head><body>",
             "<h1>Kafka reachability by vantage</h1>",
             f"<p id='counts'>{counts['input_records']} records: {counts['reports']} reports, "
             f"{counts['duplicates']} duplicates, {counts['quarantined']} quarantined.</p>"]
    picture = heatmap(outputs["endpoint_vantage"])
    if picture:
        parts.append(f"<h2>Heatmap</h2><img id='heatmap' alt='success rate heatmap' "
                     f"src='data:image/png;base64,{picture}'>")
    for cluster, png in timelines(observations):
        parts.append(f"<h2>Timeline: {esc(cluster)}</h2><img class='timeline' alt='timeline' "
                     f"src='data:image/png;base64,{png}'>")
    parts.append("<h2>Worst gaps</h2><table><tr><th>success</th><th>cluster</th><th>broker</th>"
                 "<th>endpoint</th><th>vantage</th><th>probes</th><th>last</th></tr>")
    for w in worst:
        parts.append(f"<tr><td>{w['success_rate']:.0%}</td><td>{esc(str(w['cluster_id']))}</td>"
                     f"<td>{w['node_id']}</td><td>{esc(str(w['host']))}:{w['port']}</td>"
                     f"<td>{esc(str(w['vantage']))}</td><td>{w['probes']}</td><td>{esc(str(w['last_status']))}</td></tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)
