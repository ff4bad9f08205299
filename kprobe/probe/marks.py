"""How the round trip's records are marked, and how a client's error is read: shared by its steps.

Each record kprobe produces carries the key `kprobe-roundtrip` and a `kprobe-run` header naming the
run, so that kprobe reads back only its own records and a consumer of a shared canary topic can skip
them.
"""

from __future__ import annotations

from typing import Any

KEY = b"kprobe-roundtrip"
RUN_HEADER = "kprobe-run"


def describe_error(err: Any) -> tuple[str, bool]:
    """The client's words for an error (a KafkaError, or the KafkaException around one), and whether the
    broker itself answered with it.
    """
    if hasattr(err, "str") and hasattr(err, "code"):
        return str(err.str()), err.code() > 0
    inner = err.args[0] if getattr(err, "args", None) else err
    if hasattr(inner, "str") and hasattr(inner, "code"):
        return str(inner.str()), inner.code() > 0
    return str(err), False
