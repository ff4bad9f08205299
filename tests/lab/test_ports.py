"""Lab ports are unique across every lab of a process, not only inside one lab.

Two labs each hold their own `taken` set; on different loopback addresses the kernel may hand both
the same ephemeral number. A page normalised over several labs (docs/generate.py) names ports by
their listener, so a shared number named one lab's port after another lab's listener (a stale-page
failure seen in CI about once in a dozen runs).
"""

from __future__ import annotations

from kprobe.lab.base import free_port
from kprobe.lab.decoys import Blackhole, Impostor
from kprobe.lab.helpers import listening_socket


def test_ports_are_unique_across_labs_and_helpers() -> None:
    seen: list[int] = []
    holders = []
    try:
        for round_ in range(40):
            taken: set[tuple[str, int]] = set()  # a new lab each round, on its own addresses
            seen.append(free_port(f"127.0.0.{200 + round_ % 20}", taken))
            imp = Impostor(f"127.0.0.{230 + round_ % 10}")
            sock = listening_socket(f"127.0.0.{240 + round_ % 10}")
            holders += [imp, sock]
            seen += [imp.port, int(sock.getsockname()[1])]
            if round_ % 8 == 0:  # a black hole waits out its last filler connect (0.3 s): a few suffice
                hole = Blackhole(f"127.0.0.{220 + round_ % 10}")
                holders.append(hole)
                seen.append(hole.port)
    finally:
        for holder in holders:
            holder.close()
    assert len(seen) == len(set(seen)), sorted(p for p in seen if seen.count(p) > 1)
