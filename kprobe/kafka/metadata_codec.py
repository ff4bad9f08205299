"""The Metadata request (v4-v12) and its answer: pure, no sockets, bounded as `kprobe.kafka.wire` is.

A big cluster's answer is mostly partitions, so they decode in bulk: a topic's partitions are
first read as if they all had one shape, and only where that fails one by one.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache, partial
from itertools import chain

from kprobe.kafka.wire import API_METADATA, Reader, WireError, enc_string, uvarint
from kprobe.models import (
    RUN_MAX,
    AdvertisedBroker,
    ClusterMetadata,
    PartitionRun,
    PartitionTable,
    RunBuilder,
    TopicInfo,
    run_limit,
)

METADATA_MIN, METADATA_MAX = 4, 12


def metadata_version(api_versions: dict[int, tuple[int, int]]) -> int:
    """The highest Metadata version both sides speak, within what kprobe decodes."""
    low, high = api_versions.get(API_METADATA, (METADATA_MIN, METADATA_MAX))
    version = min(high, METADATA_MAX)
    if version < max(low, METADATA_MIN):
        raise WireError("protocol", f"broker speaks Metadata v{low}-v{high}, kprobe needs v4-v12")
    return version


def encode_metadata_request(version: int, topics: Sequence[str] | None, auto_create: bool = False) -> bytes:
    """Metadata for `topics` ([] = brokers only, None = all topics).

    A diagnostic never creates a topic. `auto_create` asks what a producer asks (librdkafka's and Java's
    producers set it), so that --publish learns before producing whether the collector would create its
    topic on first use (auto.create.topics.enable): it answers UNKNOWN_TOPIC_OR_PARTITION only where it will not.
    """
    flexible = version >= 9
    body = bytearray()
    if topics is None:
        body += b"\x00" if flexible else struct.pack(">i", -1)
    else:
        body += uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
        for name in topics:
            if version >= 10:
                body += b"\x00" * 16  # topic id: none, ask by name
            body += enc_string(name, flexible)
            if flexible:
                body += b"\x00"
    body += b"\x01" if auto_create else b"\x00"  # allow_auto_topic_creation
    if 8 <= version <= 10:
        body += b"\x00"  # include_cluster_authorized_operations
    if version >= 8:
        body += b"\x00"  # include_topic_authorized_operations
    if flexible:
        body += b"\x00"
    return bytes(body)


def decode_metadata(reader: Reader, version: int) -> ClusterMetadata:
    """Decode a Metadata response body (v4-v12).

    Partitions decode in bulk (`_partitions`): a big cluster's answer is mostly partitions.
    """
    flexible = version >= 9
    reader.int32()  # throttle_time_ms
    brokers = []
    for _ in range(reader.array_len(flexible, 10)):
        node_id = reader.int32()
        host = reader.string(flexible) or ""
        port = reader.int32()
        rack = reader.string(flexible, nullable=True)
        if flexible:
            reader.tagged_fields()
        brokers.append(AdvertisedBroker(node_id, host, port, rack))
    cluster_id = reader.string(flexible, nullable=True)
    controller_id = reader.int32()
    topics = []
    for _ in range(reader.array_len(flexible, 4)):
        code = reader.int16()
        name = reader.string(flexible, nullable=True) or ""
        if version >= 10:
            reader.take(16)  # topic id
        internal = reader.boolean()
        partitions = _partitions(reader, version, reader.array_len(flexible, 14))
        if version >= 8:
            reader.int32()  # topic authorized operations
        if flexible:
            reader.tagged_fields()
        topics.append(TopicInfo(name, partitions, code, internal))
    if 8 <= version <= 10:
        reader.int32()  # cluster authorized operations
    if flexible:
        reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise WireError("protocol", f"Metadata response has {len(reader.data) - reader.pos} unexpected trailing bytes")
    return ClusterMetadata(brokers=tuple(brokers), cluster_id=cluster_id, controller_id=controller_id,
                           topics=tuple(topics), api_version=version)


# How a partition is laid out in Metadata vN, for the bulk decoder: the bytes before the replica
# count (error 2, index 4, leader 4, and the leader epoch 4 from v7), whether there are offline
# replicas (v5+), and whether counts are one-byte compact varints with a tagged-fields byte (v9+).
def _layout(version: int) -> tuple[int, bool, bool]:
    return (14 if version >= 7 else 10), version >= 5, version >= 9


def _formats(version: int, replicas: int, isrs: int, offline: int) -> tuple[str, str]:
    """Two `struct` formats for one partition of this shape in the plain encoding: one reads its
    error code, counts (and tagged-fields byte) to check the shape, the other its id, leader and
    replica ids, skipping the rest.
    """
    head, has_offline, flexible = _layout(version)
    epoch = f"{head - 10}x"  # the leader epoch, from v7
    if flexible:
        return (f"h{head - 2}xB{4 * replicas}xB{4 * isrs}xB{4 * offline}xB",
                f"2xii{epoch}x{replicas}ix{isrs}ix{offline}ix")
    if has_offline:
        return (f"h{head - 2}xi{4 * replicas}xi{4 * isrs}xi{4 * offline}x",
                f"2xii{epoch}4x{replicas}i4x{isrs}i4x{offline}i")
    return f"h{head - 2}xi{4 * replicas}xi{4 * isrs}x", f"2xii{epoch}4x{replicas}i4x{isrs}i"


# A compiled format holds an entry per value, so one for a whole run of 1,024 partitions takes a few
# hundred KB: few are kept (topics of a cluster share a handful of partition counts and shapes).
@lru_cache(maxsize=32)
def _run_structs(version: int, replicas: int, isrs: int, offline: int, count: int) -> tuple[struct.Struct, ...]:
    """The check and values formats of `_formats` for `count` partitions at once."""
    return tuple(struct.Struct(">" + f * count) for f in _formats(version, replicas, isrs, offline))


@lru_cache(maxsize=256)
def _one_struct(version: int, replicas: int, isrs: int, offline: int) -> struct.Struct:
    """The values format of `_formats` for one partition."""
    return struct.Struct(">" + _formats(version, replicas, isrs, offline)[1])


@lru_cache(maxsize=256)
def _check_struct(version: int, replicas: int, isrs: int, offline: int) -> struct.Struct:
    """The check format of `_formats` for one partition: it spans the whole partition."""
    return struct.Struct(">" + _formats(version, replicas, isrs, offline)[0])


def _partitions(reader: Reader, version: int, count: int) -> PartitionTable:
    """A topic's `count` partitions, as runs of columns.

    Brokers send a topic's partitions mostly alike (same replication factor, full ISR, no error),
    so each chunk of up to RUN_MAX partitions is first read as if all had the first one's shape:
    one `struct` call checks that they do, one more reads them (C, not a loop per field). A chunk
    that is not uniform is scanned partition by partition (`_scan`). Either way every length is
    checked against the bytes present: a broken answer is a protocol error, as everywhere here.
    """
    builder = RunBuilder()
    left = count
    while left:
        chunk = min(left, RUN_MAX)
        run = _uniform(reader, version, chunk, builder.added)
        if run is None:
            _scan(reader, version, chunk, builder)
        else:
            builder.append(run)
            chunk = len(run)
        left -= chunk
    return builder.table()


_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


def _shape(data: bytes, pos: int, version: int) -> tuple[int, int, int, int, int] | None:
    """(error code, replicas, isrs, offline, size) of the partition at `pos` if it is in the plain
    encoding (non-negative counts; from v9 one-byte counts and no tagged field) and whole; else None.
    """
    head, has_offline, flexible = _layout(version)
    try:
        if flexible:
            at = pos + head
            replicas = data[at] - 1
            at += 1 + 4 * replicas
            isrs = data[at] - 1
            at += 1 + 4 * isrs
            offline = data[at] - 1
            at += 1 + 4 * offline
            if min(replicas, isrs, offline) < 0 or max(replicas, isrs, offline) >= 0x7F or data[at] != 0:
                return None
            end = at + 1
        else:
            (replicas,) = _INT32.unpack_from(data, pos + head)
            at = pos + head + 4 + 4 * replicas
            (isrs,) = _INT32.unpack_from(data, at)
            at += 4 + 4 * isrs
            offline = 0
            if has_offline:
                (offline,) = _INT32.unpack_from(data, at)
                at += 4 + 4 * offline
            if min(replicas, isrs, offline) < 0:
                return None
            end = at
    except (IndexError, struct.error):  # runs past the end
        return None
    if end > len(data):
        return None
    (error,) = _INT16.unpack_from(data, pos)
    return error, replicas, isrs, offline, end - pos


def _uniform(reader: Reader, version: int, count: int, start: int) -> PartitionRun | None:
    """Up to `count` partitions shaped like the first (as many as one run holds), read in bulk;
    None (nothing consumed) if they are not all alike.
    """
    data, pos = reader.data, reader.pos
    first = _shape(data, pos, version)
    if first is None:
        return None
    error, replicas, isrs, offline, size = first
    count = min(count, run_limit(replicas, isrs, offline))
    if pos + size * count > len(data):
        return None
    check, values = _run_structs(version, replicas, isrs, offline, count)
    seen = check.unpack_from(data, pos)
    width = len(seen) // count
    if seen != seen[:width] * count:
        return None
    reader.pos = pos + size * count
    return PartitionRun(error, replicas, isrs, offline, values.unpack_from(data, pos), start=start)


def _scan(reader: Reader, version: int, count: int, builder: RunBuilder) -> None:
    """`count` partitions of mixed shapes (a topic whose ISRs shrank): same-shaped partitions are
    gathered into one run each, read record by record in C; a partition in any other encoding
    (multi-byte counts, tagged fields, or broken) is read field by field.

    A topic has few shapes: each partition is first checked against the shapes already met (one
    `struct` call each, the check of `_formats`, which reads the counts where that shape has them:
    all equal means that shape), and measured field by field only when none fits.
    """
    data = reader.data
    pos = reader.pos
    first = builder.added
    # Per shape met: its check format, the values the check reads, its size, where its partitions are
    # (in the bytes and in the answer's order), and how many one run holds.
    shapes: list[tuple[struct.Struct, tuple[int, ...], int, list[int], list[int], int]] = []
    odd: list[PartitionRun] = []
    for k in range(count):
        for shape in shapes:
            try:
                if shape[0].unpack_from(data, pos) == shape[1]:
                    break
            except struct.error:  # runs past the end: not this shape
                pass
        else:
            measured = _shape(data, pos, version)
            if measured is None:
                reader.pos = pos
                odd.append(_one_partition(reader, version, first + k))
                pos = reader.pos
                continue
            check = _check_struct(version, *measured[1:4])
            shape = (check, check.unpack_from(data, pos), measured[4], [], [], run_limit(*measured[1:4]))
            shapes.append(shape)
        shape[3].append(pos)
        shape[4].append(first + k)
        pos += shape[2]
        if len(shape[3]) == shape[5]:  # as many as one run holds
            builder.append(_gathered(data, version, shape[1], shape[3], shape[4]))
            shape[3].clear()
            shape[4].clear()
    reader.pos = pos
    for _, checked, _, at, order, _ in shapes:
        if at:
            builder.append(_gathered(data, version, checked, at, order))
    for run in odd:
        builder.append(run)


def _gathered(data: bytes, version: int, checked: tuple[int, ...], at: list[int], order: list[int]) -> PartitionRun:
    """The run of the same-shaped partitions at `at`, which stood at `order` in the answer."""
    error, replicas, isrs, offline = _counts(version, checked)
    read = partial(_one_struct(version, replicas, isrs, offline).unpack_from, data)
    return PartitionRun(error, replicas, isrs, offline, tuple(chain.from_iterable(map(read, at))), order=tuple(order))


def _counts(version: int, checked: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(error code, replicas, isrs, offline) from what a check format read."""
    if version >= 9:
        return checked[0], checked[1] - 1, checked[2] - 1, checked[3] - 1
    return checked[0], checked[1], checked[2], checked[3] if version >= 5 else 0


def _one_partition(reader: Reader, version: int, position: int) -> PartitionRun:
    """One partition field by field: any valid encoding, and the exact error for a broken one."""
    flexible = version >= 9
    p_code = reader.int16()
    index = reader.int32()
    leader = reader.int32()
    if version >= 7:
        reader.int32()  # leader epoch
    replicas = reader.int32_array(flexible)
    isrs = reader.int32_array(flexible)
    offline = reader.int32_array(flexible) if version >= 5 else ()
    if flexible:
        reader.tagged_fields()
    return PartitionRun(p_code, len(replicas), len(isrs), len(offline), (index, leader, *replicas, *isrs, *offline),
                        order=(position,))
