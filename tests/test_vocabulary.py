"""The status and severity vocabularies of the models are the report contract's, word for word.

The models spell them as Literal types (mypy with strict equality rejects a comparison with a
word outside them); the shipped JSON Schema spells them as enums. A word added on one side only
would be a report the schema refuses, or a schema promising a word the code never writes.
"""

from __future__ import annotations

from typing import get_args

import pytest

from kprobe import models
from kprobe.findings.catalogue import CATALOGUE, SEVERITY_ORDER
from kprobe.output.json_report import schema

SCHEMA = schema()
DEFS = SCHEMA["$defs"]


@pytest.mark.parametrize(("literal", "enum"), [
    (models.BootstrapStatus, DEFS["bootstrap"]["properties"]["status"]["enum"]),
    (models.Via, DEFS["bootstrap"]["properties"]["via"]["enum"]),
    (models.Protocol, [p for p in DEFS["bootstrap"]["properties"]["protocol"]["enum"] if p is not None]),
    (models.DnsStatus, DEFS["dns"]["properties"]["status"]["enum"]),
    (models.DnsSource, DEFS["dns"]["properties"]["source"]["enum"]),
    (models.TcpStatus, DEFS["endpoint"]["properties"]["tcp"]["items"]["properties"]["status"]["enum"]),
    (models.EndpointStatus, DEFS["endpoint"]["properties"]["status"]["enum"]),
    (models.IdentityStatus, DEFS["endpoint"]["properties"]["identity"]["properties"]["status"]["enum"]),
    (models.TlsStatus, DEFS["endpoint"]["properties"]["tls"]["properties"]["status"]["enum"]),
    (models.Severity, DEFS["finding"]["properties"]["severity"]["enum"]),
    (models.TlsFailure, [v for v in DEFS["bootstrap"]["properties"]["tls_failure"]["enum"] if v is not None]),
    (models.RunStatus, SCHEMA["properties"]["summary"]["properties"]["status"]["enum"]),
    (models.ResolverKind, SCHEMA["properties"]["vantage"]["properties"]["resolver"]["properties"]["kind"]["enum"]),
    (models.ControllerStatus, DEFS["controller_bootstrap"]["properties"]["status"]["enum"]),
    (models.RoundtripStatus, SCHEMA["properties"]["roundtrip"]["properties"]["status"]["enum"]),
    (models.PartitionRoundtripStatus, DEFS["roundtrip_partition"]["properties"]["status"]["enum"]),
    (models.CoordinatorKind, SCHEMA["properties"]["application"]["properties"]["coordinators"]["items"]["properties"]
     ["kind"]["enum"]),
    (models.NamedTopicStatus, SCHEMA["properties"]["application"]["properties"]["topics"]["items"]["properties"]
     ["status"]["enum"]),
], ids=lambda v: getattr(v, "__name__", None) or "")
def test_literal_matches_schema_enum(literal, enum):
    assert list(get_args(literal)) == list(enum)


def test_the_internal_topics_are_the_schemas():
    internal = SCHEMA["properties"]["application"]["properties"]["internal_topics"]["items"]["properties"]["name"]
    assert list(models.INTERNAL_TOPICS) == internal["enum"]


def test_every_severity_is_ordered_and_every_code_uses_known_severities():
    assert set(SEVERITY_ORDER) == set(get_args(models.Severity))
    for code, kind in CATALOGUE.items():
        assert kind.severities and set(kind.severities) <= set(get_args(models.Severity)), code
