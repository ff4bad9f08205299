"""Session-scoped labs: real Kafka brokers start once per test session, not per test.

Every lab started here is stopped at session end, and the last fixture to finish checks that
no broker JVM of this session is left behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kprobe.lab.native import NativeLab, running_jvms
from kprobe.lab.scenarios import get_scenario


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[dict[str, NativeLab]]:
    """Starts each scenario at most once per session; stops all at the end."""
    labs: dict[str, NativeLab] = {}
    yield labs
    for lab in labs.values():
        lab.stop()
    leftovers = {name: running_jvms(lab.lab_id) for name, lab in labs.items()}
    assert not any(leftovers.values()), f"broker JVMs left behind: {leftovers}"


def _lab(labs: dict[str, NativeLab], name: str) -> NativeLab:
    if name not in labs:
        labs[name] = NativeLab(get_scenario(name)).start()
    return labs[name]


@pytest.fixture(scope="session")
def listeners_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "listeners")


@pytest.fixture(scope="session")
def cloud_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "cloud")


@pytest.fixture(scope="session")
def three_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "three-brokers")


@pytest.fixture(scope="session")
def tls_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "tls")


@pytest.fixture(scope="session")
def sasl_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "sasl")


@pytest.fixture(scope="session")
def collector_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return _lab(lab_factory, "collector")
