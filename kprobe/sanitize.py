"""Text from the network made safe to show: one rule for every output and every error line.

A broker may advertise a host name full of ANSI escapes, and printing it raw (as kcat does)
lets a hostile broker write to the user's terminal; the same bytes reach log lines, error
messages, Prometheus labels and the aggregation's HTML. Every output therefore passes such
values through `safe()`, which lives here rather than in any one renderer.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata

# Text that needs no escaping at all: printable ASCII without the backslash. Nearly every name,
# address and message is such text, and a regex says so in C instead of a loop per character
# (50 times faster: `show --summary` over 10,000 reports spent most of its time here).
_PLAIN = re.compile(r"[\x20-\x5b\x5d-\x7e]*")


def safe(value: object, limit: int = 256) -> str:
    """Printable text: control and undecodable characters become visible escapes.

    `limit` bounds what one network-supplied name can take of the screen.
    """
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    text = "".join(out)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"


def use_color(no_color: bool = False) -> bool:
    """Colours only for a person at a terminal, and never against --no-color or NO_COLOR (no-color.org).

    Here, beside `safe()`, because every output that prints asks it, and `show` must not import the
    delivery of live runs (logging, the Kafka spool) to learn it.
    """
    return not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()
