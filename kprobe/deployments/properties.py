"""server.properties files: one broker each, read as Java reads a properties file.

Several files given together are one cluster (one broker per file): that is how duplicate endpoints
across brokers, or two brokers advertising one name, are seen before deployment. The network a
plain server.properties runs on is not in the file, so its listeners are judged from here (the
machine kprobe runs on, or the network --nameserver stands for).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kprobe.clientprops.javaprops import java_logical_lines, parse_java_properties
from kprobe.deployments.common import broker_from_settings, secrets_of
from kprobe.errors import UsageError
from kprobe.kafka.listeners import Deployment

# java.lang.String.trim(): every character up to U+0020, the control characters included.
_JAVA_TRIM = "".join(chr(code) for code in range(0x21))


def logical_lines(text: str) -> list[str]:
    """Non-comment lines with backslash continuations joined, as java.util.Properties reads them."""
    return java_logical_lines(text)


def parse_properties(text: str, *, source: str = "server.properties") -> dict[str, str]:
    r"""The broker's settings as Kafka sees them: java.util.Properties' pairs, each value trimmed.

    Kafka's ConfigDef trims every value it parses (String.trim), so `listeners=...   ` is the
    listeners without the spaces; keys are Java's, later keys win. A malformed `\u` escape is bad
    input naming the line of `source`.
    """
    return {key: value.strip(_JAVA_TRIM) for key, value in parse_java_properties(text, source=source).items()}


def read_properties(files: Sequence[tuple[str, str]]) -> Deployment:
    """One Deployment of one broker per file (a cluster), judged from here."""
    brokers = []
    secrets: list[str] = []
    for path, text in files:
        settings = parse_properties(text, source=path)
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
