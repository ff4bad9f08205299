"""server.properties files: one broker each, read as Java reads a properties file.

Several files given together are one cluster (one broker per file): that is how duplicate endpoints
across brokers, or two brokers advertising one name, are seen before deployment. The network a
plain server.properties runs on is not in the file, so its listeners are judged from here (the
machine kprobe runs on, or the network --nameserver stands for).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from kprobe.deployments.common import broker_from_settings, secrets_of
from kprobe.errors import UsageError
from kprobe.listeners import Deployment

_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")


def logical_lines(text: str) -> list[str]:
    """Non-comment lines with backslash continuations joined, as java.util.Properties reads them."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line.startswith(("#", "!"))):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def parse_properties(text: str) -> dict[str, str]:
    """`key=value` (or `key: value`, `key value`) pairs; later keys win, as in Java."""
    settings: dict[str, str] = {}
    for line in logical_lines(text):
        match = _SEPARATOR.search(line)
        if match is None:
            settings[line] = ""
            continue
        settings[line[:match.start()]] = line[match.end():].strip()
    return settings


def read_properties(files: Sequence[tuple[str, str]]) -> Deployment:
    """One Deployment of one broker per file (a cluster), judged from here."""
    brokers = []
    secrets: list[str] = []
    for path, text in files:
        settings = parse_properties(text)
        secrets += secrets_of(settings)
        if not any(k in settings for k in ("listeners", "advertised.listeners", "process.roles", "node.id",
                                             "broker.id", "zookeeper.connect")):
            raise UsageError(f"{path}: no broker settings (listeners, advertised.listeners, process.roles, node.id): "
                             "is it a client's properties file? kprobe check reads a broker's server.properties")
        brokers.append(broker_from_settings(settings, name=Path(path).name, source=path, where=path))
    notes: tuple[str, ...] = ()
    if any(b.listeners and b.listeners[0].advertised_from == "listeners" for b in brokers):
        notes = ("advertised.listeners is unset in some file, so Kafka advertises the listeners themselves "
                 "(an empty host as the machine's own name)",)
    return Deployment(source=", ".join(p for p, _ in files), kind="properties", platform="host",
                      brokers=tuple(brokers), notes=notes, secrets=tuple(secrets))
