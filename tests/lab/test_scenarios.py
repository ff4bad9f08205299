"""The scenarios' declarations (kprobe/lab/scenarios.py) say things a probe can say, without starting a lab."""

from __future__ import annotations

from kprobe.findings.catalogue import CATALOGUE, ERROR
from kprobe.lab.scenarios import SCENARIOS


def test_every_expectation_is_of_a_view_and_names_an_error_probe_can_report():
    """An expectation is printed under its view: a view the scenario lacks would never be printed, and an OK
    with a finding, a gap without one or a code missing from the catalogue is a promise no run keeps."""
    declared = [(scenario, spec, view, expect) for scenario in SCENARIOS.values() for node in scenario.nodes
                for spec in node.listeners for view, expect in spec.expect.items()]
    assert declared  # the listeners scenario declares one per listener and view
    for scenario, spec, view, expect in declared:
        where = (scenario.name, spec.name, view)
        assert view in scenario.views, where
        assert (expect.verdict == "OK") == (not expect.finding), where
        if expect.finding:
            assert ERROR in CATALOGUE[expect.finding].severities, where
        assert expect.exit_code == {"OK": 0, "GAP": 1, "FAILED": 3}[expect.verdict], where
