"""`kprobe fix` on real brokers: seeded server.properties mistakes, probed, patched, run again, probed again.

Each case of tests/data/seeded/ (its README says what each seeds) runs on the native lab from
its own files (kprobe.lab.from_properties: each file a broker on its own loopback address, each listener
on the file's port, each client network a DNS view). One lab start per case, probed from every view:
- the seeded gap is seen from the view that has it, and every other view works;
- the files patched by hand (the folder's `fixed/`, the oracle of what a fix should be): `kprobe check` on
  them predicts no gap from any view, and `kprobe fix`'s patch touches the files they touch;
- `kprobe fix REPORTS --config FILES --json --verify`, run on the reports of the first probes as the network
  with the gap runs it (its vantage, its view's nameserver), while the seeded files still run, gives a
  patch that `patch -p0` applies to a copy of the files, touching only the brokers with a gap; the patched
  files run, and every view works; and its own proof closes the gap from that network.
After a fix a client bootstraps where the patched files advertise for its network: the listener it used
before where that still advertises a name its network resolves to the broker, else the one that does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from seeded_lab import SEEDED, bootstrap_after, failing, files_of, kprobe, probe

from kprobe.errors import LabError
from kprobe.lab.from_properties import StagedCluster, Views
from kprobe.lab.native import running_jvms

pytestmark = pytest.mark.lab  # every case starts real brokers

INTERNAL = "ip-172-31-18-160.us-west-2.compute.internal"
PUBLIC = "ec2-34-211-52-10.us-west-2.compute.amazonaws.com"

# case -> (views: name -> node, where each view's clients bootstrap, the endpoints each view fails on before).
CASES: dict[str, tuple[Views, dict[str, str], dict[str, dict[int, str]]]] = {
    "docker-name-to-host": (
        {"docker": {"kafka0": 0, "localhost": None}, "host": {"localhost": 0}},
        {"docker": "kafka0:29092", "host": "localhost:9092"},
        {"host": {0: "unresolvable"}}),
    "port-typo": (
        {"clients": {"kafka0": 0, "kafka1": 1, "kafka2": 2}},
        {"clients": "kafka0:9092,kafka1:9092,kafka2:9092"},  # as clients list them: each answers as its broker
        {"clients": {2: "unreachable"}}),
    "cloud-private-name": (
        {"vpc": {INTERNAL: 1, PUBLIC: 1}, "internet": {PUBLIC: 1}},
        {"vpc": f"{INTERNAL}:9092", "internet": f"{PUBLIC}:9092"},
        {"internet": {1: "unresolvable"}}),
    "localhost-to-remote": (
        {"broker-host": {"localhost": 1, "kafka-prod-1": 1}, "remote": {"kafka-prod-1": 1, "localhost": None}},
        {"broker-host": "localhost:9092", "remote": "kafka-prod-1:9092"},
        {"remote": {1: "unreachable"}}),
    "two-networks-one-listener": (
        {"docker": {"kafka0": 0, "localhost": None}, "host": {"localhost": 0}},
        {"docker": "kafka0:9092", "host": "localhost:9092"},
        {"host": {0: "unresolvable"}}),
}
# Each case's brokers on their own addresses, so cases staged at once (by several runs) never meet.
FIRST_ADDRESS = {case: 210 + 5 * i for i, case in enumerate(CASES)}

# kprobe check alone judges a server.properties from where it runs, so a listener that advertises localhost on
# every interface is an error to it (ADVERTISED_LOOPBACK), although on the Docker host it is reached through the
# published port: right for these fixes, which add or change a listener for the host. kprobe fix's proof judges
# it from the reports' own networks instead.
CHECK_LOOPBACK = {"docker-name-to-host", "two-networks-one-listener"}


def assert_every_view_works(cluster: StagedCluster, case: str) -> dict[str, str]:
    """Probe from every view of the case, at its bootstrap after the patch: every endpoint of every broker used."""
    views, boots, _ = CASES[case]
    brokers = {b.node_id for b in cluster.deployment.brokers if b.is_broker}
    used = {}
    for view, before in boots.items():
        boot = bootstrap_after(cluster.deployment, views, view, before)
        report = probe(cluster, view, boot)
        assert failing(report) == {}, (view, boot, report["endpoints"], report["findings"])
        assert {e["node_id"] for e in report["endpoints"]} == brokers, (view, report["endpoints"])
        assert not [f for f in report["findings"] if f["severity"] == "error"], (view, report["findings"])
        used[view] = boot
    return used


@pytest.fixture(scope="module", params=sorted(CASES))
def seeded(request, tmp_path_factory):
    """One case running from its seeded files, with a report of a probe from each view (report-VIEW.json)."""
    case = request.param
    views, boots, _ = CASES[case]
    reports = tmp_path_factory.mktemp(f"reports-{case}")
    cluster = StagedCluster(files_of(case), views, name=f"seeded-{case}", first_address=FIRST_ADDRESS[case]).start()
    try:
        assert cluster.moved == {}, f"the lab could not bind the files' own ports: {cluster.moved}"
        before = {view: probe(cluster, view, boot, reports / f"report-{view}.json") for view, boot in boots.items()}
        work = tmp_path_factory.mktemp(f"config-{case}")
        # kprobe fix's what-if probes the cluster as the reports saw it: run while the seeded files run
        fixed = fix(case, cluster, sorted(reports.glob("report-*.json")), work)
        yield case, cluster, before, fixed, work
    finally:
        cluster.stop()
    assert running_jvms(cluster.lab.lab_id) == []


def test_seeded_gap_is_seen_from_its_network_only(seeded):
    case, _, before, _, _ = seeded
    _, _, gaps = CASES[case]
    seen = {view: failing(report) for view, report in before.items()}
    assert seen == {view: gaps.get(view, {}) for view in before}, seen
    for view, report in before.items():
        # every bootstrap answers: the gap is after it
        assert [b["status"] for b in report["bootstraps"]] == ["ok"] * len(report["bootstraps"]), view
        errors = {f["node_id"] for f in report["findings"] if f["severity"] == "error"}
        assert errors == set(gaps.get(view, {})), (view, report["findings"])


def test_restaging_other_brokers_is_refused_and_the_cluster_keeps_running(seeded):
    case, cluster, _, _, _ = seeded
    other = "port-typo" if case != "port-typo" else "cloud-private-name"
    with pytest.raises(LabError, match=r"are not the staged cluster's"):
        cluster.restage(files_of(other))
    assert all(proc.poll() is None for proc in cluster.lab.processes.values())


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_predicts_no_gap_on_hand_patched_files(case, seeded_views):
    """`kprobe check` from each network (its view's nameserver) on the `fixed/` files: no error predicted, but for
    the localhost a Docker host's listener advertises, which check alone cannot tell from a mistake."""
    for view, nameserver in seeded_views[case].items():
        done = kprobe("check", *map(str, files_of(case, fixed=True)), "--nameserver", nameserver, "--json")
        report = json.loads(done.stdout)
        errors = [(f["code"], f["severity"]) for f in report["findings"] if f["severity"] == "error"]
        if case in CHECK_LOOPBACK:
            assert errors == [("ADVERTISED_LOOPBACK", "error")], (view, report["findings"])
            assert done.returncode == 1, (view, done.stderr)
            continue
        assert errors == [], view
        assert done.returncode == 0, (view, done.stderr)


@pytest.fixture(scope="module")
def seeded_views():
    """Every case's DNS views served, without brokers (kprobe check resolves names, and connects nowhere)."""
    from kprobe.lab.dns_server import start_views
    from kprobe.lab.from_properties import read_cluster, scenario_from_properties

    servers = {}
    try:
        for case, (views, _, _) in CASES.items():
            scenario = scenario_from_properties(read_cluster(files_of(case)), views,
                                                first_address=FIRST_ADDRESS[case])
            servers[case] = start_views(scenario.views)
        yield {case: {view: s.nameserver for view, s in started.items()} for case, started in servers.items()}
    finally:
        for started in servers.values():
            for server in started.values():
                server.stop()


def fix(case: str, cluster: StagedCluster, reports: list[Path], work: Path) -> subprocess.CompletedProcess[str]:
    """`kprobe fix REPORTS --config FILE... --json --verify`, in a copy of the case's files, as a user of the network
    with the gap runs it there (its vantage name, its view's nameserver): the what-if probe is that network's."""
    shutil.copytree(SEEDED / case, work, ignore=shutil.ignore_patterns("fixed"), dirs_exist_ok=True)
    config = [arg for path in sorted(work.glob("*.properties")) for arg in ("--config", path.name)]
    [view] = CASES[case][2]  # each case has one network with a gap
    return kprobe("fix", *map(str, reports), *config, "--json", "--verify", "--vantage", view,
                  "--nameserver", cluster.nameserver(view), cwd=work)


def test_kprobe_fix_patch_closes_every_gap(seeded):
    case, cluster, _, done, work = seeded
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "kprobe.fix/v1"
    assert doc["patch"], doc
    applied = subprocess.run(["patch", "-p0", "--forward", "--batch"], input=doc["patch"], text=True, cwd=work,
                             capture_output=True, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    changed = {f["path"] for f in doc["files"] if f["changes"]}
    assert changed == {p.name for p in files_of(case) if p.read_text() != (p.parent / "fixed" / p.name).read_text()}
    for path in files_of(case):  # a broker that works from every view keeps its lines
        if path.name not in changed:
            assert (work / path.name).read_text() == path.read_text(), path.name
    cluster.restage(sorted(work.glob("*.properties")))
    assert_every_view_works(cluster, case)


def test_kprobe_fix_proves_its_patch_from_the_network_with_the_gap(seeded):
    case, _, _, done, _ = seeded
    doc = json.loads(done.stdout)
    [view] = CASES[case][2]
    verdicts = {v["vantage"]: (v["before"], v["after"]) for v in doc["vantages"]}
    assert verdicts[view] == ("gap", "closed"), doc["vantages"]
    assert all(after != "gap" for _, after in verdicts.values()), verdicts
    assert (done.returncode, doc["status"]) == (0, "ok"), doc["summary"]
