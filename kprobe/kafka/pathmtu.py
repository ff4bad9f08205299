"""How large an answer gets through a path that loses large packets: a ladder of sized Metadata answers.

Why: when a bootstrap's full Metadata answer stalls where small answers arrive (a path-MTU black
hole), the size of the largest answer that still arrives bounds the path MTU, and a
bound near the real MTU is what the fix needs (the MSS to clamp to, the tunnel MTU to set). The
brokers-only answer alone is a few hundred bytes, far below any real MTU.

How: on the connection whose brokers-only answer arrived, ask for Metadata of made-up topics
(never created: the request says no auto-creation), whose answers echo each name, so the answer
grows by what the names add. Sizes climb in STEP-byte rungs up to one full segment (TOP bytes);
each rung that arrives costs one round trip, and the first that does not ends the climb after one
timeout: at most one more timeout than the stall itself, and nothing at all on a run without a stall
(this runs only after one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from kprobe.kafka.wire import WireError
from kprobe.logs import logger


class KafkaConnection(Protocol):
    """What the ladder needs of `kprobe.kafka.connection.KafkaConnection` (which calls it: no import back)."""

    last_response: int

    def metadata(self, topics: Sequence[str] | None = None, auto_create: bool = False) -> Any:
        """Metadata for `topics`, read whole (its size in `last_response`) or a WireError."""

_LOG = logger(__name__)

STEP = 64  # bytes between rungs: the bound's precision
TOP = 1448  # one full TCP segment on a 1500-byte Ethernet MTU (20 IP + 32 TCP with timestamps)
_NAME_MAX = 200  # topic names stay well inside Kafka's 249 characters
_OVERHEAD_GUESS = 30  # bytes an unknown topic adds besides its name (error, id, flags); measured on rung 1


def climb(conn: KafkaConnection) -> int:
    """The largest Metadata answer that arrived, in bytes: whole responses with their 4-byte length, as
    `last_response` counts them (one TCP segment each, up to TOP).

    `conn` has just read a brokers-only Metadata answer. Below TOP - STEP, an answer about STEP bytes
    larger was lost (or the run's deadline came); from TOP - STEP up, every rung arrived.
    """
    base = arrived = conn.last_response
    overhead = _OVERHEAD_GUESS
    for rung in range(1, TOP // STEP + 2):  # bounded, whatever the answers' sizes do
        target = arrived + STEP
        if target > TOP:
            break
        names = _names(rung, target - base, overhead)
        try:
            conn.metadata(names)
        except WireError as exc:
            _LOG.debug("path MTU ladder: an answer of about %d bytes did not arrive (%s)", target, exc)
            break
        if rung == 1:  # one name: what a topic adds besides its name, for this Metadata version
            overhead = max(1, conn.last_response - base - len(names[0]))
        if conn.last_response <= arrived:
            break  # the answers stopped growing (a broker that does not echo unknown topics): nothing to learn
        arrived = conn.last_response
    return arrived


def _names(rung: int, grow: int, overhead: int) -> list[str]:
    """Topic names whose unknown-topic entries add about `grow` bytes to the answer."""
    count = max(1, math.ceil(grow / (_NAME_MAX + overhead)))
    length = max(1, grow // count - overhead)
    return [f"kprobe-mtu-{rung}-{i}-".ljust(max(length, len(f"kprobe-mtu-{rung}-{i}-")), "x") for i in range(count)]
