"""Read broker listener settings from configuration files: the input of `kprobe check`.

One reader per kind of file (server.properties, Docker Compose, a Strimzi `Kafka` resource, Bitnami
chart values), each turning the file into `kprobe.check.listeners.Deployment`s with the platform's defaults
filled in as the platform fills them (Kafka's own, the apache/kafka and Confluent images' start
scripts, the operators'). `read_files` detects each file's kind from its content, so the user names
files and nothing else; a file kprobe cannot read is bad input, one line naming the file and why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kprobe.check.deployments.common import excerpt, load_yaml_documents
from kprobe.check.listeners import Deployment
from kprobe.errors import UsageError

_PROPERTY_LINE = re.compile(r"^[A-Za-z0-9_.\-]+\s*=")

__all__ = ["detect", "read_files"]

# Bigger than any real configuration file; a guard against reading a log or a disk image by mistake.
MAX_BYTES = 8 * 1024 * 1024


def read_files(paths: Sequence[str]) -> list[Deployment]:
    """Every file read into deployments; several server.properties files make one cluster.

    The order is the user's, except that the server.properties files are read together (one
    cluster of one broker per file, so duplicate endpoints across them are seen).
    """
    if not paths:
        raise UsageError("kprobe check needs at least one file: server.properties, a Compose file, a Strimzi "
                         "Kafka resource or Bitnami chart values")
    # Each file is read, parsed and classified once: a YAML file's documents serve both (parsing is
    # PyYAML's pure-Python composer under the bomb guard, the slow part of a check).
    texts = [(p, _read(p)) for p in paths]  # every file readable before any is judged, as before
    files = [(p, *_classify(p, text)) for p, text in texts]
    properties = [(p, text) for p, kind, text, _ in files if kind == "properties"]
    out: list[Deployment] = []
    if properties:
        from kprobe.check.deployments.properties import read_properties

        out.append(read_properties(properties))
    for path, kind, _, documents in files:
        if kind == "properties":
            continue
        if kind == "compose":
            from kprobe.check.deployments.compose import read_compose

            out.append(read_compose(path, documents[0]))
        elif kind == "strimzi":
            from kprobe.check.deployments.strimzi import read_strimzi

            out.append(read_strimzi(path, documents))
        else:
            from kprobe.check.deployments.bitnami import read_bitnami

            out.append(read_bitnami(path, documents[0]))
    return out


def _read(path: str) -> str:
    """The file's text; unreadable, too big or not text is bad input.

    The bytes actually read are counted, at most MAX_BYTES + 1 of them: `st_size` says 0 for a pipe
    or `<(...)`, and a device such as /dev/zero never ends.
    """
    p = Path(path)
    try:
        with p.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise UsageError(f"{path}: more than {MAX_BYTES // (1024 * 1024)} MiB, too big for a configuration file: "
                             "give the configuration file itself")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (not UTF-8)") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: a directory; name the configuration files in it") from None
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def detect(path: str, text: str) -> str:
    """`properties`, `compose`, `strimzi` or `bitnami`, from the content (the name only breaks ties).

    A YAML file with `services:` is Compose; with `kind: Kafka` (or a KafkaNodePool) Strimzi; with a
    top-level `listeners:`, `externalAccess:`, `controller:` or `broker:` map, Bitnami chart values. A
    file of `key=value` lines is server.properties. Anything else is bad input, said in one line.
    """
    return _classify(path, text)[0]


def _classify(path: str, text: str) -> tuple[str, str, list[Any]]:
    """The file's kind, its text, and its YAML documents (none for server.properties)."""
    if path.endswith((".properties", ".conf")) or _looks_like_properties(text):
        return "properties", text, []
    documents = load_yaml_documents(path, text)
    maps = [d for d in documents if isinstance(d, dict)]
    if not maps:
        raise UsageError(f"{path}: neither server.properties nor a YAML map kprobe reads (Compose file, Strimzi "
                         "Kafka resource, Bitnami chart values)")
    if any("services" in d for d in maps):
        return "compose", text, documents
    # `kind` is compared and quoted only when it is text: str() of a map or list (an alias) can be huge.
    if any(d.get("kind") in ("Kafka", "KafkaNodePool") for d in maps):
        return "strimzi", text, documents
    if any(k in maps[0] for k in ("listeners", "externalAccess", "controller", "broker")):
        return "bitnami", text, documents
    kinds = sorted({excerpt(d["kind"], 40).strip("'\"") for d in maps if isinstance(d.get("kind"), str) and d["kind"]})
    what = f"a Kubernetes {', '.join(kinds[:5])}" if kinds else "YAML with none of services:, kind: Kafka, listeners:"
    raise UsageError(f"{path}: {what}: kprobe check reads server.properties, Compose files, a Strimzi Kafka resource "
                     "(with its KafkaNodePools) and Bitnami chart values")


def _looks_like_properties(text: str) -> bool:
    """Logical lines of `key=value` and comments (backslash continuations joined): server.properties' shape."""
    from kprobe.check.deployments.properties import logical_lines

    lines = logical_lines(text)
    return bool(lines) and all(_PROPERTY_LINE.match(line) for line in lines[:50])
