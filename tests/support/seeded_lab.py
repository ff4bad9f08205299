"""The seeded clusters of tests/data/seeded/ on the lab: their files, and probing them as a client of a network.

Shared by the lab tests of `kprobe fix` (tests/runs/test_fix_lab.py, PLAINTEXT listeners; test_fix_lab_tls.py,
TLS ones): each seeded folder is a cluster of server.properties files, run by kprobe.lab.from_properties with
each client network a DNS view.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cli_runner import run_cli

from kprobe.check.listeners import Deployment
from kprobe.lab.from_properties import StagedCluster, Views

ROOT = Path(__file__).resolve().parents[2]
SEEDED = ROOT / "tests" / "data" / "seeded"


def kprobe(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS`, run by kprobe.cli.main in this process (tests/support/cli_runner.py)."""
    return run_cli(args, cwd=cwd)


def files_of(case: str, fixed: bool = False) -> list[Path]:
    """The case's server.properties files, as seeded or as its `fixed/` oracle has them."""
    return sorted((SEEDED / case / ("fixed" if fixed else "")).glob("*.properties"))


def probe(cluster: StagedCluster, view: str, bootstrap: str, out: Path | None = None,
          client: Sequence[str] = (), exits: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    """`kprobe probe` as a client of that view: its nameserver, the bootstrap on the lab's port (a `SSL://`
    prefix kept), the client's own settings (`-X ...`) after; its exit one of `exits`."""
    boot = ",".join(cluster.endpoint(view, one) for one in bootstrap.split(","))
    args = ["probe", "-b", boot, "--nameserver", cluster.nameserver(view),
            "--vantage", view, "--timeout", "3s", "--json", *client]
    done = kprobe(*args, *(["-o", str(out)] if out is not None else []))
    assert done.returncode in exits, (done.returncode, done.stderr)
    return json.loads(out.read_text() if out is not None else done.stdout)


def failing(report: dict[str, Any]) -> dict[int, str]:
    """The endpoints a probe could not use: node id -> status."""
    return {e["node_id"]: e["status"] for e in report["endpoints"] if e["status"] != "reachable"}


def bootstrap_after(dep: Deployment, views: Views, view: str, before: str) -> str:
    """Where a client of the view bootstraps once the files are patched: the listener it used before where that
    still advertises a name its network resolves to the broker, else one of the same protocol that does (a
    `PROTOCOL://` prefix, which says the client's protocol, kept)."""
    if "," in before:
        return ",".join(bootstrap_after(dep, views, view, one) for one in before.split(","))
    scheme, sep, hostport = before.rpartition("://")
    host, _, port = hostport.rpartition(":")
    node_id = views[view][host]
    [broker] = [b for b in dep.brokers if b.node_id == node_id]
    ok = [lst for lst in broker.listeners if not lst.controller and lst.advertised is not None
          and lst.bind is not None and views[view].get(lst.advertised.host) == node_id
          and (lst.protocol or "PLAINTEXT") == (scheme or "PLAINTEXT")]
    assert ok, f"no listener of broker {broker.name} advertises a name the {view} view resolves to it"
    same = [lst for lst in ok if lst.bind is not None and lst.bind.port == int(port)]
    if same:
        return before
    lst = ok[0]
    assert lst.advertised is not None and lst.bind is not None
    return f"{scheme}{sep}{lst.advertised.host}:{lst.bind.port}"
