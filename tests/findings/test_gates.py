"""The gates in kprobe.findings.diagnose, which load a rule module only when a run has its inputs
(a healthy PLAINTEXT probe imports no TLS, DNS-view or shape rules), never hide a finding.

Every row of every rule table is run through the gated rules directly: wherever a gate says "no
input here", the rules it guards must find nothing. A rule that one day reads a new input fails here
first, naming the row, instead of going silent in the probe.
"""

from __future__ import annotations

import importlib

import pytest
from observations import Case

from kprobe.findings import diagnose as d
from kprobe.findings.application import application_findings
from kprobe.findings.dns import dns_view_findings
from kprobe.findings.shapes import shape_findings
from kprobe.findings.tls import client_certificate_findings, expiring_once, tls_findings

TABLES = ("test_rules_advertised", "test_rules_application", "test_rules_bootstrap", "test_rules_consistency",
          "test_rules_controllers", "test_rules_dns", "test_rules_identity", "test_rules_repeats", "test_rules_roundtrip",
          "test_rules_run", "test_rules_shapes", "test_rules_tls")
ROWS: list[Case] = [row for name in TABLES for row in getattr(importlib.import_module(name), "CASES", [])]


def test_the_tables_are_read():
    assert len(ROWS) > 100 and {r.name for r in ROWS} >= {r.name for r in importlib.import_module("test_rules_tls").CASES}


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_no_gate_hides_a_finding(row: Case):
    endpoints = row.endpoints
    if not d._tls_inputs(endpoints):
        assert [f for r in endpoints for f in (*tls_findings(r), *client_certificate_findings(r))] == []
        assert list(expiring_once(endpoints)) == []
    if not d._view_inputs(endpoints):
        assert [f for r in endpoints for f in dns_view_findings(r)] == []
    if not d._shape_inputs(endpoints):
        assert list(shape_findings(row.bootstraps, endpoints)) == []
    if row.application is None and not d._sees_nothing(row.bootstraps):
        assert application_findings(None, row.bootstraps, endpoints, []) == []
