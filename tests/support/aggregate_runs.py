"""kprobe aggregate's tests' shared makings: crafted reports, a run's state, the processes a run leaves.

Shared by tests/aggregate/test_job.py (the job on recorded and crafted reports), test_state.py (the
incremental state between runs) and test_warm.py (the warm driver).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

UTC = dt.timezone.utc
OUTPUTS = ("endpoint_vantage", "cluster_summary", "findings", "findings_by_endpoint", "advertised_changes", "hourly",
           "quarantine")


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` now, by pid, with their command names (from /proc)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        parents[int(entry.name)], names[int(entry.name)] = int(rest[1]), name
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = names[child]
                todo.append(child)
    return found


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:  # gone meanwhile
        return []


def state_json(out: Path) -> dict:
    return json.loads((out / ".state" / "state.json").read_text())


T0 = dt.datetime(2026, 11, 1, tzinfo=UTC)
HIDDEN = "v2\x1b[2J\x1b]0;pwned\x07"  # a vantage name that would clear the screen and retitle the terminal


def stamp(hours: float) -> str:
    return (T0 + dt.timedelta(hours=hours)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def endpoint(node: int, outcome: str, dns_ms: float, tcp_ms: float = 1.0) -> dict:
    """An advertised endpoint b<node>.c1:9092 as a probe writes it: ok, refused, timeout, nxdomain or unchecked."""
    host, ip = f"b{node}.c1", f"10.0.0.{node + 1}"
    dns = {"status": "ok", "addresses": [ip], "ms": dns_ms, "source": "system", "error": None}
    if outcome == "unchecked":  # the run's deadline came first: nothing is known of it
        dns = {**dns, "status": "timeout", "addresses": [], "ms": None, "error": f"{host}: not resolved before the run's deadline"}
        tcp, status = [], "unchecked"
    elif outcome == "nxdomain":
        dns = {**dns, "status": "nxdomain", "addresses": [], "error": f"{host}: no such name (NXDOMAIN)"}
        tcp, status = [], "unresolvable"
    elif outcome == "ok":
        tcp, status = [{"address": ip, "status": "ok", "ms": tcp_ms, "error": None}], "reachable"
    else:
        tcp, status = [{"address": ip, "status": outcome, "ms": 5.0, "error": outcome}], "unreachable"
    return {"node_id": node, "host": host, "port": 9092, "rack": None, "advertised_by": ["boot.c1:9092"],
            "dns": dns, "tcp": tcp, "status": status, "identity": None, "tls": None}


def crafted(vantage: str, hours: float, endpoints: list[dict], boot_status: str = "ok") -> dict:
    ok = boot_status == "ok"
    return {
        "schema": "kprobe.report/v1", "id": str(uuid.uuid4()), "started_at": stamp(hours),
        "finished_at": stamp(hours), "duration_ms": 10.0, "tool": {"name": "kprobe", "version": "0.1.0"},
        "vantage": {"name": vantage, "hostname": vantage, "resolver": {"kind": "system", "nameservers": []}},
        "bootstraps": [{"address": "boot.c1:9092", "status": boot_status, "error": None if ok else boot_status,
                        "answered_by": {"node_id": -1, "name": "boot.c1:9092/bootstrap"} if ok else None,
                        "cluster_id": "cluster-1" if ok else None, "controller_id": 0 if ok else None,
                        "brokers": [{"node_id": e["node_id"], "host": e["host"], "port": 9092, "rack": None}
                                    for e in endpoints], "ms": 2.0}],
        "endpoints": endpoints, "findings": [],
        "summary": {"status": "ok" if ok and all(e["status"] == "reachable" for e in endpoints) else "gap",
                    "bootstraps": 1, "endpoints": len(endpoints),
                    "reachable": sum(e["status"] == "reachable" for e in endpoints)},
    }


V1 = [
    crafted("v1", -1, [endpoint(0, "refused", 50.0), endpoint(1, "refused", 50.0)]),  # before --since
    crafted("v1", 1, [endpoint(0, "ok", 5.0), endpoint(1, "timeout", 2.0)]),
    crafted("v1", 2, [endpoint(0, "refused", 1.0), endpoint(1, "timeout", 2.0), endpoint(2, "unchecked", 0.0)]),
    crafted("v1", 3, [endpoint(0, "ok", 3.0), endpoint(1, "ok", 2.0)]),
    crafted("v1", 5, [endpoint(0, "refused", 90.0), endpoint(1, "refused", 90.0)]),  # at/after --until
]
