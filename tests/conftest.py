"""Session-scoped labs: real Kafka brokers start once per test session, not per test.

Every lab started here is stopped at session end, and the last fixture to finish checks that
no broker JVM of this session is left behind. The session, and every Python process it starts,
sends packets to loopback only (tests/fence/loopback_fence.py): a test that tries otherwise fails.

The suite runs on four pytest-xdist workers (pyproject.toml's addopts), on a machine of two CPUs:
in one process a test spends much of its time waiting (on a broker, a JVM starting, a timeout it
provokes, a client's budget) while a CPU idles. With two workers both CPUs were busy while the Spark
tests ran and half idle when both workers were on such waiting tests; more workers keep the CPUs busy
while the others wait, for the same work.
Each worker closes its own DNS namespace, fences itself and keeps
its own labs and Spark session; the scheduler gives each lab, and the Spark session, to one worker,
which runs the tests that need it. Scenarios that bind fixed ports (443, 9092, node ports) would get
other ports beside a copy of themselves, so all the tests of those run as one unit, on one worker;
so do the tests that share a module-scoped fixture (a module's recorded reports, its OAuth server),
which is then built once, and the tests of one `serial` mark. Every other test is a unit of its own
(pytest_xdist_make_scheduler says how).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
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
UNITS_ENV = "KPROBE_TEST_UNITS"  # where xdist workers leave the suite's units for the controller


def _role(config: pytest.Config) -> str:
    """'worker' (an xdist worker), 'controller' (xdist's, which runs no test) or 'single' (-n 0)."""
    if hasattr(config, "workerinput"):
        return "worker"
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") != "no":
        return "controller"
    return "single"


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: the session's DNS stays on loopback (tests/support/hermetic_dns.py says why), and so do its packets.

    The fence comes after hermetic_dns, whose Maven run (a JVM, unfenced anyway) may fetch jars
    from Maven Central. Children find the fence through PYTHONPATH (tests/fence/sitecustomize.py)
    and log their crossings to the same file as this process.

    Under xdist only the processes that run tests, the workers, do either: each closes its own
    namespace around its own stub. (A controller that fenced itself would hand its environment to
    the workers, whose sitecustomize would then install a second fence, one that knows nothing of
    a test's expected crossings.)
    """
    if _role(config) != "worker":
        _byte_compile()
    _sigint_as_at_a_terminal()
    if _role(config) == "controller":
        os.environ[UNITS_ENV] = tempfile.mkdtemp(prefix="kprobe-test-units-")  # the workers inherit it
        return
    hermetic_dns.setup()
    # The Spark JVMs of the tests (in-process sessions and `kprobe aggregate` children) JIT with C1
    # alone and collect with one thread, as the lab's brokers do: tiny inputs, where C2 and G1's
    # threads are mostly start-up cost. Measured on two aggregate tests: 111 s of CPU, 78 s with these.
    # The code cache as large as tiered compilation's (kprobe.aggregate.jvm.LIGHT_JVM says why): a
    # worker's one session for the whole suite filled C1's 48 MB and Spark stopped its context.
    from kprobe.aggregate.jvm import LIGHT_JVM  # no PySpark imported

    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{LIGHT_JVM}' pyspark-shell")
    fd, log = tempfile.mkstemp(prefix="kprobe-test-fence-", suffix=".log")
    os.close(fd)
    FENCE.install(log)
    os.environ[FENCE_ENV] = log
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(FENCE_DIR), os.environ.get("PYTHONPATH")) if p)
    config.addinivalue_line("markers", "labs(*names): lab scenarios a test starts without their fixtures")
    config.addinivalue_line("markers", "serial(name): tests of that name run as one unit: one at a time, on one worker")


def pytest_unconfigure(config: pytest.Config) -> None:
    """What the session made in the temporary folder goes with it: the units file, the fence's log, the DNS stub's."""
    import shutil

    if _role(config) == "controller":
        if os.environ.get(UNITS_ENV):
            shutil.rmtree(os.environ[UNITS_ENV], ignore_errors=True)
        return
    hermetic_dns.teardown()
    if os.environ.get(FENCE_ENV):
        Path(os.environ[FENCE_ENV]).unlink(missing_ok=True)


def _sigint_as_at_a_terminal() -> None:
    """SIGINT handled, as in a shell at a terminal, so that every process the session starts gets it by default.

    A suite started in the background by a shell without job control (`.ci/run &`, nohup) inherits
    SIGINT ignored, and passes that on to every child; Python keeps an inherited SIG_IGN, so a
    `kprobe` sent Ctrl-C by a test (signal_when) never saw it. A handler, unlike SIG_IGN, is reset
    to the default at exec. Set here rather than per child: a function run between fork and exec
    is not safe beside the worker's threads.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _byte_compile() -> None:
    """kprobe's modules, and the fence every child Python loads, compiled once, as an installed kprobe is.

    pip compiles what it installs, but not the source tree of an editable install, and where
    PYTHONDONTWRITEBYTECODE is set (this machine, CI) nothing ever writes the byte code: each of the
    suite's ~180 kprobe processes compiled every module it imported, a probe twice the CPU an
    installed one takes. The tests then run kprobe as its users do, from byte code.
    """
    import compileall

    import kprobe

    for folder in (Path(kprobe.__file__).parent, FENCE_DIR):
        compileall.compile_dir(folder, quiet=1)


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """Fail the test that leaves kprobe's logging set up for the tests after it in this process.

    A command run in-process without tests/support/cli_runner.py (which puts logging back) can leave the
    "kprobe" logger with a handler of its own and `propagate` off, or a setup waiting for the first
    warning (kprobe.logs): a later test's first warning then installs that handler, and its `caplog`
    sees nothing, depending on the collection order.
    """
    import logging

    from kprobe import logs

    kprobe_logger = logging.getLogger("kprobe")
    before = (list(kprobe_logger.handlers), kprobe_logger.propagate, kprobe_logger.level)
    yield
    after = (list(kprobe_logger.handlers), kprobe_logger.propagate, kprobe_logger.level)
    waiting = bool(logs._pending)
    if after != before or waiting:
        logs.configure_on_first_use(None)
        kprobe_logger.handlers, kprobe_logger.propagate, kprobe_logger.level = before
        pytest.fail(f"the test left kprobe's logging changed (handlers, propagate, level: {before} -> {after}; a "
                    f"setup waiting: {waiting}): put it back, or run the command with tests/support/cli_runner.py",
                    pytrace=False)


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
    "port_forward_lab": "port-forward", "nodeport_lab": "nodeport", "defaults_lab": "defaults", "groups_lab": "groups",
}
_LABS: dict[str, NativeLab] = {}  # the session's running labs (lab_factory hands this very dict out)
_LAST_USE: dict[str, int] = {}  # scenario -> the collection index of the last test that uses it
_INDEX: dict[pytest.Item, int] = {}  # test -> its place in the collection


def _stop(labs: dict[str, NativeLab], names: list[str]) -> None:
    """Stop these labs and check each left nothing behind."""
    stopped = {name: labs.pop(name) for name in names if name in labs}
    for lab in stopped.values():
        lab.stop()
    leftovers = {name: running_jvms(lab.lab_id) for name, lab in stopped.items()}
    assert not any(leftovers.values()), f"broker JVMs left behind: {leftovers}"
    helpers = {name: running_helpers(lab.lab_id) for name, lab in stopped.items()}
    assert not any(helpers.values()), f"helper processes (proxies) left behind: {helpers}"


def _module_scoped(item: pytest.Item) -> list[str]:
    """The module- and class-scoped fixtures a test uses: built once per process that runs it."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items()
                  if defs and defs[-1].scope in ("module", "class", "package"))


def _binds_fixed_ports(name: str) -> bool:
    """A scenario that prefers fixed ports (443, 9092, node ports) takes others beside a copy of itself."""
    scenario = get_scenario(name)
    return (any(lst.port for node in scenario.nodes for lst in node.listeners)
            or any(fwd.port for fwd in scenario.forwards.values()) or bool(scenario.proxies))


def _labs_of(item: pytest.Item) -> set[str]:
    names = {LAB_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in LAB_FIXTURES}
    for mark in item.iter_markers("labs"):
        names.update(mark.args)
    return names


# Fixtures that start a JVM for the test: the session's labs (real brokers) and the Spark session.
_JVM_FIXTURES = {*LAB_FIXTURES, "lab_factory", "spark"}


@pytest.hookimpl(tryfirst=True, specname="pytest_collection_modifyitems")  # before -m deselects
def pytest_collection_modifyitems_lab_mark(items: list[pytest.Item]) -> None:
    """The `lab` mark on every test that needs a live lab, so that `pytest -m "not lab"` runs the fast tests alone.

    Given here, by what a test asks for (a lab or Spark fixture, a `labs` or `docker` mark), rather than
    written on each test, so that a new test of a lab is marked by the fixture it takes. A module that
    starts brokers, a JVM or network namespaces its own way says `pytestmark = pytest.mark.lab`
    (tests/README.md).
    """
    for item in items:
        if (_JVM_FIXTURES.intersection(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("labs") or item.get_closest_marker("docker")):
            item.add_marker(pytest.mark.lab)


_LONG_FIRST = {path: i for i, path in enumerate((
    "tests/lab/test_netns.py", "tests/lab/test_containers.py", "tests/test_docker_images.py"))}


@pytest.hookimpl(tryfirst=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_units(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist's units: tests that share a module-scoped fixture, a fixed-port lab or a `serial` mark go together.

    A unit is contiguous in the collection, because the controller hands units out in collection
    order (--no-loadscope-reorder): each worker then runs tests in increasing collection order,
    which is what lets it tell, after any test, which of its labs no later test of its own can
    need (pytest_runtest_teardown).
    """
    # Units go out in collection order: the modules whose units run longest and need no Spark (namespaces,
    # containers) are collected first, so the suite's last minutes are not one worker finishing them alone.
    items.sort(key=lambda item: _LONG_FIRST.get(item.nodeid.split("::", 1)[0], len(_LONG_FIRST)))
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keys: dict[pytest.Item, list[str]] = {}
    for item in items:
        shared = _module_scoped(item)
        mine = [f"{item.nodeid.split('::', 1)[0]}:{'+'.join(shared)}"] if shared else []
        mine += [f"lab:{name}" for name in sorted(_labs_of(item)) if _binds_fixed_ports(name)]
        mine += [f"serial:{name}" for mark in item.iter_markers("serial") for name in mark.args]
        for key in mine[1:]:
            parent[root(key)] = root(mine[0])
        keys[item] = mine
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(root(keys[item][0]) if keys[item] else item.nodeid, []).append(item)
    items[:] = [item for unit in units.values() for item in unit]
    if _role(config) == "worker":  # the controller reads them in _UnitScheduling
        grouped = {item.nodeid: unit for unit, members in units.items() if len(members) > 1 for item in members}
        holds = {}  # keyed by the scope the scheduler gives the unit: _split_scope's own lookup in `grouped`
        for members in units.values():
            if held := set().union(*map(_holds, members)):
                holds[grouped.get(members[0].nodeid, members[0].nodeid)] = sorted(held)
        folder = Path(os.environ[UNITS_ENV])
        part = folder / f".{os.environ['PYTEST_XDIST_WORKER']}.json"
        part.write_text(json.dumps({"units": grouped, "holds": holds}))
        part.replace(folder / part.name[1:])


def _holds(item: pytest.Item) -> set[str]:
    """What a test needs running in its process that costs seconds of CPU to start: its labs, the Spark session."""
    return {f"lab:{name}" for name in _labs_of(item)} | ({"spark"} if "spark" in getattr(item, "fixturenames", ()) else set())


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with this suite's units as the scopes, each lab and Spark on one worker.

    (Its own `loadgroup` would do for the units, from `xdist_group` marks, but its renaming of node
    ids does not take on pytest 9.2, whose node ids are no longer the attribute it rewrites.) A
    worker sends the controller only node ids, so each worker leaves its units, and what each
    needs running (`_holds`), in a file the controller reads once every worker has collected, which
    is when the scheduler first asks for a scope.

    Why the affinity: a lab (or the Spark session) lives in the worker that started it, so plain
    scope scheduling, which gives the next unit to whichever worker asks, started most labs once
    per worker: 60 broker JVMs a suite for about 25 brokers' worth of scenarios, at some 4 s of CPU
    each with its format, and a Spark session per worker. Here the first worker to take a unit
    that needs a lab or Spark owns it; the others take the next unit they can run without starting
    a copy, and the owner runs the ones it skipped. A worker left with nothing it can run without a
    copy takes the first unit left rather than idle, starting the copy, unless the copy would be
    a second Spark session: that worker idles, and the session's owner runs the rest.

    A worker still takes its units in increasing collection order, what its labs' stops rely on
    (pytest_runtest_teardown), but for two cases: a unit that needs labs owned by two workers, and
    a unit taken rather than idle. Going back in the collection can find a lab the worker already
    stopped (it went past the lab's last use, then came back to a unit skipped for it before): with
    three workers, three-brokers started twice in 20 s on one worker. So a lab its owner has been
    sent past counts as no one's, and a unit that needs it as a copy for that worker (`_stopped`).
    """
    from xdist.scheduler import LoadScopeScheduling

    class _UnitScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: object) -> None:
            super().__init__(config, log)
            self.units: dict[str, str] | None = None
            self.holds: dict[str, list[str]] = {}  # unit -> what it needs running
            self.owners: dict[str, object] = {}  # a lab or "spark" -> the worker that runs its units
            self.started: dict[object, set[str]] = {}  # worker -> every lab (or "spark") it has had a unit of
            self.last: dict[str, int] = {}  # a lab -> the collection index of the last test that needs it
            self.furthest: dict[object, int] = {}  # worker -> the highest collection index sent to it

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                self.units = {}
                for part in sorted(Path(os.environ[UNITS_ENV]).glob("*.json")):
                    data = json.loads(part.read_text())
                    self.units.update(data["units"])
                    self.holds.update(data["holds"])
            return self.units.get(nodeid, nodeid)

        def _stopped(self, node: object, held: str) -> bool:
            """Whether `node` has stopped the lab `held`, or will: it was sent a test past the lab's last use.

            A worker stops a lab once its next test stands past the lab's last use (pytest_runtest_teardown).
            A unit skipped for it earlier (it needed what another worker held) can still need the lab: sent
            to that worker, it would start the lab again (three-brokers twice in 20 s on one worker, 16 s of
            CPU), so it counts as a copy there, and the lab as no one's.
            """
            if not held.startswith("lab:"):
                return False  # the Spark session lives as long as its worker
            if not self.last:
                for index, nodeid in enumerate(self.collection or ()):
                    for name in self.holds.get(self._split_scope(nodeid), ()):
                        self.last[name] = index
            return self.furthest.get(node, -1) > self.last.get(held, -1)

        def _choose(self, node: object) -> str | None:
            """The first unit `node` can run without a copy of what another worker holds, else the first left.

            None when all that is left needs another worker's Spark session (`_spark_elsewhere`) or a lab
            two other workers run already.

            Of the units left, one whose copies this worker already made comes first (a copy serves
            every unit after it).
            """
            for scope in self.workqueue:
                if self._spark_elsewhere(node, scope):
                    continue
                held = self.holds.get(scope, ())
                owners = {self.owners[h] for h in held if h in self.owners and not self._stopped(self.owners[h], h)}
                # Held by two workers already: no worker can run it without a copy, so whoever comes first.
                if (owners <= {node} and not any(self._stopped(node, h) for h in held)) or len(owners) > 1:
                    return scope
            mine = {h for h in self.started.get(node, set()) if not self._stopped(node, h)}
            # Not a third copy of a lab: two workers already running it finish what needs it while this one
            # idles, where a third start (2 to 6 s of CPU a lab) would only take CPU from them on two CPUs.
            copyable = [s for s in self.workqueue if not self._spark_elsewhere(node, s)
                        and all(len(self._running(h) - {node}) < 2 for h in self.holds.get(s, ()))]
            return next((s for s in copyable if mine.issuperset(self.holds.get(s, ()))), next(iter(copyable), None))

        def _running(self, held: str) -> set[object]:
            """The workers that have `held` (a lab or the Spark session) running and will use it again."""
            return {n for n, labs in self.started.items() if held in labs and not self._stopped(n, held)}

        def _spark_elsewhere(self, node: object, scope: str) -> bool:
            """Whether the unit needs the Spark session of another worker that still runs tests.

            A second session costs some 25 s of CPU, for Spark tests that take a second or two each on the
            owner's session: a worker with nothing else left waits for the suite's end instead, leaving the
            CPU to the workers still running (a lab's copy, a few seconds of CPU, is made as before).
            """
            owner = self.owners.get("spark")
            return "spark" in self.holds.get(scope, ()) and owner not in (None, node) and owner in self.assigned_work

        def _assign_work_unit(self, node: object) -> None:
            scope = self._choose(node)
            if scope is None:
                return  # idle to the end: xdist ends the session once every unit is done
            work_unit = self.workqueue.pop(scope)
            for held in self.holds.get(scope, ()):
                if held not in self.owners or self._stopped(self.owners[held], held):
                    self.owners[held] = node
                self.started.setdefault(node, set()).add(held)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            indices = [collection.index(nodeid) for nodeid, done in work_unit.items() if not done]
            self.furthest[node] = max([self.furthest.get(node, -1), *indices])
            node.send_runtest_some(indices)

    return _UnitScheduling(config, log)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after -k and -m have deselected
def pytest_collection_modifyitems_last_uses(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note where each lab's last test stands, so it stops there instead of idling to the session's end.

    An idle broker JVM still costs a few per cent of a CPU (heartbeats, the raft log); a dozen
    scenarios kept to the end slowed every later test on a two-CPU machine. A lab needed again
    after all (a test that starts one without saying so) is simply started again.
    """
    _INDEX.clear()
    _LAST_USE.clear()
    for index, item in enumerate(items):
        _INDEX[item] = index
        for name in _labs_of(item):
            _LAST_USE[name] = index


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures, start again the labs of its lab fixtures that this worker had stopped.

    Why here: a lab fixture is session-scoped, and hands out the same `_SessionLab` after the worker
    stopped its lab (pytest_runtest_teardown below); the lab then started again at the test's first use
    of it, inside the test's body, on whatever clock the test kept there (a deadline test's wall clock
    read 17 s in CI, its run's own 1.5 s). Started here, the start is the setup's. After the skip marks
    are read (this hook is not tryfirst): a test that skips starts nothing.
    """
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in LAB_FIXTURES:
            start_once(_LABS, LAB_FIXTURES[fixture])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test (and its fixtures' teardown), stop the labs no later test of this process uses.

    A process runs tests in increasing collection order (one process, or an xdist worker given
    contiguous units in order), so a lab whose last use stands before the next test's place is
    done here, even when that last use ran on another worker.
    """
    yield
    if nextitem is None:  # the last test of all: lab_factory's own teardown stops what is left
        return
    upcoming = _INDEX.get(nextitem, len(_INDEX))
    _stop(_LABS, [name for name in list(_LABS) if _LAST_USE.get(name, len(_INDEX)) < upcoming])


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[dict[str, NativeLab]]:
    """Starts each scenario at most once per session (start_once); stops all at the end."""
    yield _LABS
    _stop(_LABS, list(_LABS))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession per process that runs tests, shared by every module that needs one.

    Session-scoped, so that it neither ties the Spark tests of a module into one xdist unit nor
    starts a JVM per module (a second session in a process would get the first one back anyway).
    """
    from kprobe.aggregate.job import session

    # With the Kafka source's jars (resolved once, cached), so a test reads a topic with the job in this
    # JVM rather than a `kprobe aggregate --kafka` child's (tests/aggregate/test_job.py's topic test; the CLI
    # reading a topic in its own JVM is tests/lab/test_netns.py's pipeline test).
    s = session("local[2]", app="kprobe-tests", kafka=True)
    # Interpreted, not generated code: the tests' inputs are a few rows, and compiling each plan's
    # Java (whole-stage and per-expression, Janino and then the JIT) was most of a run's CPU. How
    # Spark's own suites run with codegen off; the `kprobe aggregate` children of the tests (kill -9,
    # the topic, the standalone cluster, the page) keep Spark's defaults, so generated code is run too.
    s.conf.set("spark.sql.codegen.wholeStage", "false")
    s.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    # Two shuffle partitions, one per core of local[2], for inputs of a few hundred rows: still more
    # than one, so an order that holds only within one partition still fails here; the children keep
    # kprobe's default of 8, whose scheduling would cost more than these rows.
    s.conf.set("spark.sql.shuffle.partitions", "2")
    # Without adaptive execution: for a few hundred rows in two partitions there is nothing to re-plan,
    # and each shuffle it materialises is a job of its own. The `kprobe aggregate` children keep it, as users run it, and the topic test compares a
    # child's outputs with this session's, row by row.
    s.conf.set("spark.sql.adaptive.enabled", "false")
    yield s
    s.stop()


def start_once(labs: dict[str, NativeLab], name: str) -> NativeLab:
    """The session's lab of that scenario, started on first use."""
    if name not in labs:
        labs[name] = NativeLab(get_scenario(name)).start()
    return labs[name]


class _SessionLab:
    """What a session lab fixture hands out: the scenario's running lab, started again if it was stopped.

    Why not the lab itself: pytest keeps a session fixture's value for the session, and a worker stops
    a lab after the test it takes for the lab's last use (pytest_runtest_teardown); when the scheduler
    then gives that worker an earlier test of the lab after all (a unit taken rather than idle), that
    test would get the stopped lab (a publish test would read a stopped collector). Every attribute is the running lab's, so the test gets the lab started again.
    """

    def __init__(self, labs: dict[str, NativeLab], name: str) -> None:
        self._labs, self._name = labs, name
        start_once(labs, name)

    def __getattr__(self, attr: str) -> object:
        return getattr(start_once(self._labs, self._name), attr)


def _session_lab_fixture(fixture: str, name: str) -> object:
    """A session fixture named `fixture` that hands out the `name` lab, as a _SessionLab."""

    def lab(lab_factory: dict[str, NativeLab]) -> _SessionLab:
        return _SessionLab(lab_factory, name)

    lab.__name__ = fixture
    return pytest.fixture(scope="session", name=fixture)(lab)


# listeners_lab, three_lab, ...: one fixture per entry of LAB_FIXTURES, so the table that tells which
# tests need which lab (_labs_of) and the fixtures that start them cannot disagree.
for _fixture, _scenario in LAB_FIXTURES.items():
    globals()[_fixture] = _session_lab_fixture(_fixture, _scenario)


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

    Returned once every broker's metadata names it with a leader for each partition
    (`_until_every_broker_knows`): a publish before was told "topic ... does not exist" (a
    fresh-clone run saw it).
    The admin client is dropped at once: its background connections would log while a test
    stops the broker.
    """
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": lab.bootstrap("CLIENT")})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    del admin
    _until_every_broker_knows(lab, topic, partitions)
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
    _until_every_broker_knows(lab, name, len(assignment), [replicas[0] for replicas in assignment])
    return name


def _until_every_broker_knows(lab: NativeLab, topic: str, partitions: int, leaders: list[int] | None = None,
                              timeout: float = 30) -> None:
    """Wait until each broker's own metadata has the topic's partitions led (by these leaders, if given).

    CreateTopics returns once the controller has the topic; each broker learns it a moment later. A
    probe that comes sooner (in-process, with no interpreter start-up in between) asks a broker that
    does not know the topic yet, and gets no partition to judge. Each broker is asked directly, on
    kprobe's own connection, as the probe's bootstrap step will.
    """
    from kprobe.kafka.connection import KafkaConnection

    deadline = time.monotonic() + timeout
    for node in (n for n in lab.nodes.values() if "CLIENT" in n.listeners):
        ip, port = lab.real_endpoint("CLIENT", node.node_id).rsplit(":", 1)
        while True:
            with KafkaConnection(ip, int(port), timeout=5) as conn:
                conn.connect()
                conn.negotiate()
                known = {t.name: [p.leader for p in t.partitions] for t in conn.metadata([topic]).topics}
            led = known.get(topic, [])
            if len(led) == partitions and all(leader >= 0 for leader in led) and leaders in (None, led):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"broker {node.node_id} still answers {known} for {topic} after {timeout} s")
            time.sleep(0.05)


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
