"""What a Metadata answer says of the cluster: its brokers as advertised, its topics and their partitions.

Apart from the rest of the models so that the application's records (kprobe.models.application),
which carry topics asked by name, name these without importing the package that imports them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.models.partitions import PartitionInfo
from kprobe.records import record


@record
class AdvertisedBroker:
    """A broker as a Metadata response advertises it to the client."""

    node_id: int
    host: str
    port: int
    rack: str | None = None



@record
class TopicInfo:
    """One topic as a Metadata response describes it.

    `partitions` is a `PartitionTable` when decoded from the wire, any sequence elsewhere (tests).
    """

    name: str
    partitions: Sequence[PartitionInfo]
    error_code: int = 0
    is_internal: bool = False


@record(kw_only=True)
class ClusterMetadata:
    """What one bootstrap connection answered: the advertised view of the cluster."""

    brokers: tuple[AdvertisedBroker, ...]
    cluster_id: str | None
    controller_id: int | None
    topics: tuple[TopicInfo, ...] = ()
    api_version: int | None = None
    local_address: str | None = None
