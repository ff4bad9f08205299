"""One validation for every report a test parses: the shipped JSON Schema, and real timestamps.

jsonschema only checks `format: date-time` with an optional package installed, and silently
passes without it; the contract promises RFC 3339 UTC, so that is checked here explicitly.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import jsonschema

from kprobe.output import json_report

SCHEMA = json_report.schema()
_VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
_RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def validate(data: dict[str, Any]) -> dict[str, Any]:
    """The report itself, once it is known to keep the contract."""
    _VALIDATOR.validate(data)
    for key in ("started_at", "finished_at"):
        value = data[key]
        assert _RFC3339_UTC.fullmatch(value), f"{key} is not RFC 3339 UTC: {value!r}"
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))  # a real date and time, not just the shape
    assert data["started_at"] <= data["finished_at"]
    return data
