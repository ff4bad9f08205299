"""Small helpers every rule module shares."""

from __future__ import annotations

from kprobe.models import EndpointResult


def source_of(result: EndpointResult) -> str | None:
    """The first bootstrap that advertised this endpoint: the one a finding names."""
    return result.endpoint.advertised_by[0] if result.endpoint.advertised_by else None
