"""The Spark schema of a report, derived from the shipped JSON Schema.

Why derived rather than written by hand: the JSON Schema is the report contract; deriving the
Spark schema from it keeps the two from drifting, and an explicit schema spares Spark an
inference pass over every input file (a full extra scan at scale).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from kprobe.output.json_report import SCHEMA_ID, schema

SUPPORTED = (SCHEMA_ID,)
CORRUPT = "_corrupt_record"


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        target: Any = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        return dict(target)
    return node


def _types(node: dict[str, Any]) -> list[str]:
    kind = node.get("type")
    if isinstance(kind, list):
        return [k for k in kind if k != "null"]
    if isinstance(kind, str):
        return [kind]
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        return ["integer"] if values and all(isinstance(v, int) for v in values) else ["string"]
    if "const" in node:
        return ["string"]
    return []


def to_spark(node: dict[str, Any], root: dict[str, Any], refs: tuple[str, ...] = ()) -> T.DataType | None:
    """One JSON Schema node as a Spark type; None for what Spark does not need.

    Free-form objects (settings) and recursive references (dns.detail is a dns) are left out:
    Spark types cannot recurse, and the aggregation reads neither.
    """
    ref = node.get("$ref")
    if ref in refs:
        return None
    if ref:
        refs = (*refs, ref)
    node = _resolve(node, root)
    kinds = _types(node)
    if not kinds:
        return None
    kind = kinds[0]
    if kind == "object":
        props = node.get("properties")
        if not props:
            return None
        fields = []
        for name, sub in props.items():
            spark_type = to_spark(sub, root, refs)
            if spark_type is not None:
                fields.append(T.StructField(name, spark_type, True))
        return T.StructType(fields)
    if kind == "array":
        item = to_spark(node.get("items", {}), root, refs)
        return T.ArrayType(item, True) if item is not None else None
    return {"string": T.StringType(), "integer": T.LongType(), "number": T.DoubleType(),
            "boolean": T.BooleanType()}.get(kind, T.StringType())


def report_schema() -> T.StructType:
    """The report struct, plus a column for records that are not JSON at all."""
    root = schema()
    spark_type = to_spark(root, root)
    assert isinstance(spark_type, T.StructType)
    return T.StructType([*spark_type.fields, T.StructField(CORRUPT, T.StringType(), True)])


# The fields the job reads, as a tree: everything else in a report is tokenized by the JSON
# parser but never materialized. Building rows for the fields no output reads (settings, tool,
# answered_by, every address list) was most of the parse's cost. A finding's message and fix are
# read: each gap on the page says why in the report's own words; most reports have no
# finding, so they cost little.
READ: dict[str, Any] = {
    "schema": None, "id": None, "started_at": None,
    "vantage": {"name": None},
    "summary": {"status": None},
    "bootstraps": {"address": None, "status": None, "cluster_id": None, "ms": None,
                   "brokers": {"node_id": None, "host": None, "port": None}},
    "endpoints": {"node_id": None, "host": None, "port": None, "status": None, "dns": {"status": None, "ms": None},
                  "tcp": {"status": None, "ms": None}, "tls": {"status": None}, "identity": {"status": None}},
    "findings": {"code": None, "severity": None, "endpoints": None, "node_ids": None, "endpoint": None,
                 "node_id": None, "bootstrap": None, "message": None, "fix": None},
}
# What the job keeps of a report's findings on its report row (weights per code and day); the
# message and fix of a finding are kept on the observations of the endpoints it concerns instead.
KEPT_FINDING: dict[str, Any] = {"code": None, "severity": None, "endpoints": None}


def prune(spark_type: T.DataType, keep: dict[str, Any] | None) -> T.DataType:
    """`spark_type` reduced to the fields named in `keep` (a tree like READ; None keeps a field whole).

    The types still come from the shipped JSON Schema, so a renamed field fails here, at once,
    rather than reading as null in every report.
    """
    if keep is None:
        return spark_type
    if isinstance(spark_type, T.ArrayType):
        return T.ArrayType(prune(spark_type.elementType, keep), True)
    assert isinstance(spark_type, T.StructType), spark_type
    by_name = {f.name: f for f in spark_type.fields}
    missing = sorted(set(keep) - set(by_name))
    if missing:
        raise KeyError(f"fields the aggregation reads are not in the report schema: {missing}")
    return T.StructType([T.StructField(name, prune(by_name[name].dataType, sub), True) for name, sub in keep.items()])


def read_schema() -> T.StructType:
    """The report struct as the job parses it: only READ's fields, plus the corrupt-record column."""
    full = report_schema()
    pruned = prune(T.StructType([f for f in full.fields if f.name != CORRUPT]), READ)
    assert isinstance(pruned, T.StructType)
    return T.StructType([*pruned.fields, T.StructField(CORRUPT, T.StringType(), True)])
