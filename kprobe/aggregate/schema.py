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
