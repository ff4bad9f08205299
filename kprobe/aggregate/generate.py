"""Synthetic reports: M vantages probing C clusters over T hours, with injected gaps.

For tests and benchmarks of the aggregation at sizes no lab produces. Reports follow the
shipped schema (tests/aggregate/test_job.py validates a sample against kprobe/output/schema.json),
so the job sees what real probes write; gaps are injected per (cluster, vantage) so results are predictable.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kprobe import __version__

START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def reports(vantages: int, clusters: int, hours: float, every_s: int = 60, brokers: int = 3,
            seed: int = 7, start: dt.datetime = START) -> Iterator[dict[str, Any]]:
    """Reports in time order, with two kinds of injected gap.

    Vantage v cannot resolve cluster c's brokers when (v + c) % 4 == 0, and broker 0 of every
    cluster times out for an hour in the middle of the period. `start` (and another `seed`)
    make the reports that a later period adds, as a scheduled probe would.
    """
    rng = random.Random(seed)
    steps = int(hours * 3600 / every_s)
    outage = range(steps // 2, steps // 2 + int(3600 / every_s))
    for step in range(steps):
        at = start + dt.timedelta(seconds=step * every_s)
        stamp = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for c in range(clusters):
            for v in range(vantages):
                yield _report(rng, stamp, f"cluster-{c:04d}", f"vantage-{v:03d}", c, brokers,
                              dns_gap=(v + c) % 4 == 0, outage=step in outage)


def _report(rng: random.Random, stamp: str, cluster: str, vantage: str, c: int, brokers: int, *,
            dns_gap: bool, outage: bool) -> dict[str, Any]:
    endpoints: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    for n in range(brokers):
        host = f"b{n}.c{c}.internal"
        ip = f"10.{c % 250}.{n}.1"
        if dns_gap:
            dns = {"status": "nxdomain", "addresses": [], "ms": round(rng.uniform(0.5, 3), 3), "source": "system",
                   "error": f"{host}: no such name (NXDOMAIN)"}
            tcp: list[dict[str, Any]] = []
            status = "unresolvable"
        else:
            dns = {"status": "ok", "addresses": [ip], "ms": round(rng.uniform(0.5, 3), 3), "source": "system",
                   "error": None}
            if outage and n == 0:
                tcp = [{"address": ip, "status": "timeout", "ms": 5000.0, "error": "timeout"}]
                status = "unreachable"
                findings.append({
                    "code": "ADVERTISED_TIMEOUT", "severity": "error", "node_id": n, "endpoint": f"{host}:9092",
                    "endpoints": [f"{host}:9092"], "node_ids": [n],
                    "message": f"Broker {n} advertises {host}:9092 ({ip}), but connections to it time out from "
                               "here (a firewall or security group dropping packets, or a private address).",
                    "fix": f"Open port 9092 between this network and {ip}, or make the listener advertise an "
                           "address this network can reach."})
            else:
                tcp = [{"address": ip, "status": "ok", "ms": round(rng.uniform(0.2, 20), 3), "error": None}]
                status = "reachable"
        endpoints.append({"node_id": n, "host": host, "port": 9092, "advertised_by": [f"boot.c{c}:9092"],
                          "dns": dns, "tcp": tcp, "status": status})
    if dns_gap:  # one cause, one fix: one finding for every broker it concerns, as probes write it now
        names = [f"{e['host']}:9092" for e in endpoints]
        findings.append({
            "code": "ADVERTISED_UNRESOLVABLE", "severity": "error", "node_id": None, "endpoint": None,
            "endpoints": names, "node_ids": list(range(brokers)),
            "message": f"You reached the cluster at boot.c{c}:9092, but its brokers advertise {', '.join(names)}, "
                       "which do not resolve from here (no such name, NXDOMAIN): clients bootstrap fine, then "
                       "fail on every request those brokers lead.",
            "fix": "Make the listeners advertise names this network can resolve (advertised.listeners), "
                   "or add a listener for this network with its own advertised names."})
    reachable = sum(1 for e in endpoints if e["status"] == "reachable")
    return {
        "schema": "kprobe.report/v1", "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "started_at": stamp, "finished_at": stamp, "duration_ms": 12.5,
        "tool": {"name": "kprobe", "version": __version__},
        "vantage": {"name": vantage, "hostname": vantage, "resolver": {"kind": "system", "nameservers": []}},
        "bootstraps": [{"address": f"boot.c{c}:9092", "status": "ok", "error": None,
                        "answered_by": {"node_id": -1, "name": f"boot.c{c}:9092/bootstrap"},
                        "cluster_id": cluster, "controller_id": 0,
                        "brokers": [{"node_id": e["node_id"], "host": e["host"], "port": 9092, "rack": None}
                                    for e in endpoints]}],
        "endpoints": endpoints, "findings": findings,
        "summary": {"status": "ok" if not findings else "gap", "bootstraps": 1, "endpoints": len(endpoints),
                    "reachable": reachable},
    }


def write_jsonl(directory: Path, items: Iterator[dict[str, Any]], per_file: int = 50_000) -> int:
    """JSON Lines files of `per_file` reports each; returns the number written."""
    directory.mkdir(parents=True, exist_ok=True)
    count, handle, index = 0, None, 0
    try:
        for item in items:
            if handle is None or count % per_file == 0:
                if handle is not None:
                    handle.close()
                handle = open(directory / f"reports-{index:05d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
                index += 1
            handle.write(json.dumps(item) + "\n")
            count += 1
    finally:
        if handle:
            handle.close()
    return count
