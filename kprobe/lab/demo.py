"""`kprobe demo`: the whole story in one command, on real brokers.

Starts the `listeners` lab (the seeds' LISTENER_BOB / FRED / ALICE broker), probes it through
each listener as a client on the Docker host would (the lab's "host" DNS view), then BOB once
more from inside the Docker network (the "docker" view), and stops the lab. The gaps shown
are the point: the demo exits 0 when it ran.
"""

from __future__ import annotations

import sys

from kprobe.lab import start_lab
from kprobe.options import ProbeOptions, parse_address, parse_nameserver
from kprobe.output import text
from kprobe.runs.probe import run_probe


def run_demo(*, color: bool = False, timeout: float = 3.0) -> None:
    """Run the demo, writing to stdout; progress lines go to stderr."""
    sys.stderr.write("starting the `listeners` lab (one real Kafka broker, three listeners)...\n")
    with start_lab("listeners") as lab:
        out = sys.stdout
        out.write("\n".join(lab.describe()) + "\n\n")
        plan = [
            ("LISTENER_FRED", "host", lab.bootstrap("LISTENER_FRED")),
            ("LISTENER_BOB", "host", lab.real_endpoint("LISTENER_BOB")),
            ("LISTENER_ALICE", "host", lab.real_endpoint("LISTENER_ALICE")),
            ("LISTENER_BOB", "docker", lab.bootstrap("LISTENER_BOB")),
        ]
        for listener, view, bootstrap in plan:
            where = "the Docker host" if view == "host" else "inside the Docker network"
            title = f"== {listener}, probed from {where} (DNS view '{view}'): kprobe probe -b {bootstrap} " \
                    f"--nameserver {lab.nameserver(view)}"
            out.write(title + "\n\n")
            report = run_probe(ProbeOptions(
                bootstraps=[parse_address(bootstrap)],
                nameservers=[parse_nameserver(lab.nameserver(view))],
                timeout=timeout,
                deadline=4 * timeout,
                vantage=f"demo-{view}",
            ))
            out.write(text.render(report, color=color) + "\n")
            out.flush()
    sys.stderr.write("lab stopped\n")
