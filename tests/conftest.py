"""Session-scoped labs: real Kafka brokers start once per test session, not per test.

Every lab started here is stopped at session end, and the last fixture to finish checks that
no broker JVM of this session is left behind. The session, and every Python process it starts,
sends packets to loopback only (tests/fence/loopback_fence.py): a test that tries otherwise fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import hermetic_dns
import pytest
from fence.loopback_fence import ENV as FENCE_ENV
from fence.loopback_fence import FENCE

from kprobe.lab.helpers import running_helpers
from kprobe.lab.native import NativeLab, running_jvms
from kprobe.lab.scenarios import get_scenario

FENCE_DIR = Path(__file__).resolve().parent / "fence"


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: the session's DNS stays on loopback (tests/hermetic_dns.py says why), and so do its packets.

    The fence comes after hermetic_dns, whose Maven run (a JVM, unfenced anyway) may fetch jars
    from Maven Central. Children find the fence through PYTHONPATH (tests/fence/sitecustomize.py)
    and log their crossings to the same file as this process.
    """
    hermetic_dns.setup()
    fd, log = tempfile.mkstemp(prefix="kprobe-test-fence-", suffix=".log")
    os.close(fd)
    FENCE.install(log)
    os.environ[FENCE_ENV] = log
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(FENCE_DIR), os.environ.get("PYTHONPATH")) if p)
    config.addinivalue_line("markers", "labs(*names): lab scenarios a test starts without their fixtures")


@pytest.fixture(autouse=True)
def _loopback_only() -> Iterator[None]:
    """Fail the test during which any process of the session tried to send a packet off loopback.

    Read from the log rather than from the exception: kprobe turns a refused connect into an
    unreachable endpoint, and a child's stderr may never be looked at.
    """
    log = Path(os.environ[FENCE_ENV])
    start = log.stat().st_size
    yield
    with log.open() as lines:
        lines.seek(start)
        crossed = lines.read()
    if crossed:
        pytest.fail(f"packets meant for outside loopback during this test:\n{crossed}", pytrace=False)


# The session fixture of each scenario; a test that starts labs another way names them with
# `@pytest.mark.labs(NAME, ...)`. Both tell the session when a lab's last test has run.
LAB_FIXTURES = {
    "listeners_lab": "listeners", "cloud_lab": "cloud", "three_lab": "three-brokers", "controllers_lab": "controllers",
    "tls_lab": "tls", "sasl_lab": "sasl", "scram_lab": "scram", "sni_ingress_lab": "sni-ingress",
    "oauth_lab": "oauth", "collector_lab": "collector", "dual_stack_lab": "dual-stack",
    "port_forward_lab": "port-forward", "nodeport_lab": "nodeport",
}
_LABS: dict[str, NativeLab] = {}  # the session's running labs (lab_factory hands this very dict out)
_LAST_USE: dict[str, list[str]] = {}  # test node id -> the scenarios no later test uses


def _stop(labs: dict[str, NativeLab], names: list[str]) -> None:
    """Stop these labs and check each left nothing behind."""
    stopped = {name: labs.pop(name) for name in names if name in labs}
    for lab in stopped.values():
        lab.stop()
    leftovers = {name: running_jvms(lab.lab_id) for name, lab in stopped.items()}
    assert not any(leftovers.values()), f"broker JVMs left behind: {leftovers}"
    helpers = {name: running_helpers(lab.lab_id) for name, lab in stopped.items()}
    assert not any(helpers.values()), f"helper processes (proxies) left behind: {helpers}"


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: only the tests that will run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note each lab's last test, so it stops there instead of idling to the session's end.

    An idle broker JVM still costs a few per cent of a CPU (heartbeats, the raft log); a dozen
    scenarios kept to the end slowed every later test on a two-CPU machine. A lab needed again
    after all (a test that starts one without saying so) is simply started again.
    """
    last: dict[str, str] = {}
    for item in items:
        names = {LAB_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in LAB_FIXTURES}
        for mark in item.iter_markers("labs"):
            names.update(mark.args)
        for name in names:
            last[name] = item.nodeid
    _LAST_USE.clear()
    for name, nodeid in last.items():
        _LAST_USE.setdefault(nodeid, []).append(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a lab's last test (and its fixtures' teardown), stop that lab."""
    yield
    if nextitem is not None:  # the last test of all: lab_factory's own teardown stops what is left
        _stop(_LABS, _LAST_USE.get(item.nodeid, []))


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[dict[str, NativeLab]]:
    """Starts each scenario at most once per session (start_once); stops all at the end."""
    yield _LABS
    _stop(_LABS, list(_LABS))


def start_once(labs: dict[str, NativeLab], name: str) -> NativeLab:
    """The session's lab of that scenario, started on first use."""
    if name not in labs:
        labs[name] = NativeLab(get_scenario(name)).start()
    return labs[name]


@pytest.fixture(scope="session")
def listeners_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "listeners")


@pytest.fixture(scope="session")
def cloud_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "cloud")


@pytest.fixture(scope="session")
def three_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "three-brokers")


@pytest.fixture(scope="session")
def controllers_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "controllers")


@pytest.fixture(scope="session")
def tls_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "tls")


@pytest.fixture(scope="session")
def sasl_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "sasl")


@pytest.fixture(scope="session")
def sni_ingress_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "sni-ingress")


@pytest.fixture(scope="session")
def oauth_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "oauth")


@pytest.fixture(scope="session")
def scram_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "scram")


@pytest.fixture(scope="session")
def collector_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "collector")


@pytest.fixture(scope="session")
def dual_stack_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "dual-stack")


@pytest.fixture(scope="session")
def port_forward_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "port-forward")


@pytest.fixture(scope="session")
def nodeport_lab(lab_factory: dict[str, NativeLab]) -> NativeLab:
    return start_once(lab_factory, "nodeport")


def signal_when(
    args: list[str], marker: str, sig: int = signal.SIGINT, *, within: float = 30.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run kprobe with --verbose, send `sig` once stderr shows `marker`; also how long it then took to exit.

    A fixed sleep races start-up on a loaded machine (the signal lands during imports, before
    any report or handler exists); waiting for the run's own progress line does not.
    """
    import os
    import select
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "kprobe", *args, "--verbose"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    give_up = time.monotonic() + within
    while marker.encode() not in seen:
        left = give_up - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"never saw {marker!r} on stderr: {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            seen += os.read(fd, 65536)  # unbuffered: a line never waits in a buffer select cannot see
    time.sleep(0.2)  # into the blackholed connects that follow the marker
    signalled = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, seen.decode() + err), time.monotonic() - signalled


def new_topic(lab: NativeLab, prefix: str, partitions: int = 1) -> str:
    """A topic of its own on the lab's CLIENT listener, so tests that publish never share one.

    The admin client is dropped at once: its background connections would log while a test
    stops the broker.
    """
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": lab.bootstrap("CLIENT")})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    del admin
    return topic


def topic_on(lab: NativeLab, prefix: str, assignment: list[list[int]]) -> str:
    """A topic of its own whose partitions sit on the brokers `assignment` names, leader first.

    A leader chosen on purpose: a partition led by the broker that lacks a listener is the gap to see.
    """
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": lab.bootstrap("CLIENT")})
    admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)])[name].result(30)
    del admin
    return name


def restart_settled(lab: NativeLab, node_id: int, timeout: float = 60) -> None:
    """Start a stopped broker again and wait until every partition has its leader and a full ISR.

    A broker that serves clients has not yet caught up: until its replicas rejoin the ISR, a listing
    shows "N partitions under-replicated", which a later test comparing with kcat (or counting
    partitions) would take for its own result. A test that stops a broker leaves the lab as it found it.
    """
    from confluent_kafka.admin import AdminClient

    lab.start_node(node_id)
    admin = AdminClient({"bootstrap.servers": lab.bootstrap("CLIENT", 0)})
    deadline = time.monotonic() + timeout
    while True:
        partitions = [p for t in admin.list_topics(timeout=10).topics.values() for p in t.partitions.values()]
        if all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in partitions):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"broker {node_id} restarted, but partitions were still out of sync after {timeout} s")
        time.sleep(0.2)
