"""An operator's resource edited by its own editor: a Strimzi Kafka resource or Bitnami chart values."""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.check.listeners import Deployment
from kprobe.fix.model import Change, ListenerEdit


def edit_resource(dep: Deployment, path: str, text: str,
                  edits: Sequence[ListenerEdit]) -> tuple[str, list[Change]]:
    """The resource's new text and its changes; the editors load only for the kind of file given."""
    if dep.operator == "strimzi":
        from kprobe.fix.edit_strimzi import edit_strimzi

        return edit_strimzi(dep, path, text, edits)
    from kprobe.fix.edit_bitnami import edit_bitnami

    return edit_bitnami(dep, path, text, edits)
