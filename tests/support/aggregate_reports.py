"""Reports of the fields the aggregation reads (kprobe.aggregate.schema.READ), written out for its transform tests."""

from __future__ import annotations

import json
from typing import Any

from kprobe.output.json_report import SCHEMA_ID


def endpoint(node: int, status: str = "reachable", tcp: str = "ok", tcp_ms: float = 2.0) -> dict[str, Any]:
    return {"node_id": node, "host": f"b{node}", "port": 9092, "status": status, "dns": {"status": "ok", "ms": 1.0},
            "tcp": [{"status": tcp, "ms": tcp_ms}], "tls": {"status": None}, "identity": {"status": "ok"}}


def report(rid: str, endpoints: list[dict[str, Any]], findings: list[dict[str, Any]] | None = None,
           boot_status: str = "ok") -> str:
    """One report's JSON at 2026-11-01 10:00, vantage `v`, bootstrap `boot:9092` (cluster `c` if it answered)."""
    answered = boot_status == "ok"
    return json.dumps({
        "schema": SCHEMA_ID, "id": rid, "started_at": "2026-11-01T10:00:00Z", "vantage": {"name": "v"},
        "summary": {"status": "ok" if answered else "gap"},
        "bootstraps": [{"address": "boot:9092", "status": boot_status, "cluster_id": "c" if answered else None,
                        "ms": 1.5, "brokers": [{"node_id": e["node_id"], "host": e["host"], "port": 9092}
                                               for e in endpoints]}],
        "endpoints": endpoints, "findings": findings or []})
