"""Configuration read from text in memory: the patched files judged before anything is written."""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.check.deployments import detect
from kprobe.check.deployments.common import load_yaml_documents
from kprobe.check.listeners import Deployment


def read_texts(files: Sequence[tuple[str, str]]) -> list[Deployment]:
    """(path, text) pairs read as `kprobe.check.deployments.read_files` reads the files at those paths."""
    properties = [(p, t) for p, t in files if detect(p, t) == "properties"]
    out: list[Deployment] = []
    if properties:
        from kprobe.check.deployments.properties import read_properties

        out.append(read_properties(properties))
    for path, text in files:
        kind = detect(path, text)
        if kind == "compose":
            from kprobe.check.deployments.compose import read_compose

            out.append(read_compose(path, load_yaml_documents(path, text)[0]))
        elif kind == "strimzi":
            from kprobe.check.deployments.strimzi import read_strimzi

            out.append(read_strimzi(path, load_yaml_documents(path, text)))
        elif kind == "bitnami":
            from kprobe.check.deployments.bitnami import read_bitnami

            out.append(read_bitnami(path, load_yaml_documents(path, text)[0]))
    return out
