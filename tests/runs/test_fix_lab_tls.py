"""`kprobe fix` on real brokers with TLS listeners: the seeded mistakes of an SSL listener, probed, patched, run again.

The two TLS cases of tests/data/seeded/ (its README says what each seeds) run on the native lab from their
own files (kprobe.lab.from_properties: each SSL listener presents a certificate from the lab's CA, naming
what the broker's file advertises unless the test reissues it). One lab start per case, probed from every view:
- the seeded gap is seen from the view that has it, and every other view works;
- `kprobe check` on the files patched by hand (the folder's `fixed/`) predicts no error from any view;
- `kprobe fix REPORTS --config FILES --json`, run as the network with the gap runs it (its vantage, its view's
  nameserver), gives a patch that `patch -p0` applies to a copy of the files, touching only the files `fixed/`
  touches, proven by its `kprobe check` prediction, and for a new TLS name with the step that asks the
  broker's certificate to hold it;
- the patched files run with each certificate as it was, where a new TLS name fails its check; then with the
  certificate reissued as the step says, and every view works with a client that verifies the broker's name.
Clients of an SSL listener trust the lab's CA (`-X ssl.ca.location`), made afresh at each start. Before the fix,
the internet's clients of the SAN case skip the name check (ssl.endpoint.identification.algorithm=none, the
usual way past a certificate that names only the private host); after it they check names again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from seeded_lab import SEEDED, bootstrap_after, failing, files_of, kprobe, probe

from kprobe.lab.from_properties import StagedCluster, Views, certificate_names, read_cluster
from kprobe.lab.native import running_jvms
from kprobe.records import record

pytestmark = pytest.mark.lab  # every case starts real brokers

PROD = "kafka-1.prod.example.com"
INTERNAL = "ip-172-31-18-160.us-west-2.compute.internal"
PUBLIC = "ec2-34-211-52-10.us-west-2.compute.amazonaws.com"
SKIP_NAME_CHECK = ("-X", "ssl.endpoint.identification.algorithm=none")


@record
class Seed:
    """A TLS case: its networks, where each bootstraps (`SSL://` for a TLS client), the error each gapped view
    sees per broker, the client settings a view probes with before the fix only, and the names the fix advertises
    that a broker's certificate does not hold (node id -> names: what its certificate step must ask for)."""

    views: Views
    boots: dict[str, str]
    gaps: dict[str, dict[int, str]]
    first_address: int
    before: dict[str, tuple[str, ...]]
    new_names: dict[int, tuple[str, ...]]


CASES = {
    "tls-advertised-on-plaintext-port": Seed(
        views={"datacentre": {PROD: 1}, "tls": {PROD: 1}},
        boots={"datacentre": f"{PROD}:9092", "tls": f"SSL://{PROD}:9093"},
        gaps={"tls": {1: "TLS_HANDSHAKE_FAILED"}}, first_address=236, before={}, new_names={}),
    "tls-new-name-needs-san": Seed(
        views={"vpc": {INTERNAL: 1, PUBLIC: 1}, "internet": {PUBLIC: 1}},
        boots={"vpc": f"{INTERNAL}:9092", "internet": f"SSL://{PUBLIC}:9093"},
        gaps={"internet": {1: "ADVERTISED_UNRESOLVABLE"}}, first_address=238,
        before={"internet": SKIP_NAME_CHECK}, new_names={1: (PUBLIC,)}),
}


def held(case: str) -> dict[int, tuple[str, ...]]:
    """The names each broker's certificate holds as the case is seeded: what its file advertises."""
    return {b.node_id: certificate_names(b) for b in read_cluster(files_of(case)).brokers
            if b.node_id is not None and any(lst.protocol == "SSL" for lst in b.listeners)}


def reissued(case: str) -> dict[int, tuple[str, ...]]:
    """The certificates the certificate steps ask for: the names held, and the new ones."""
    return {node: (*held(case)[node], *names) for node, names in CASES[case].new_names.items()}


def client(cluster: StagedCluster, bootstrap: str, extra: tuple[str, ...] = ()) -> list[str]:
    """A client's own settings: a TLS client trusts the running cluster's CA."""
    tls = ["-X", f"ssl.ca.location={cluster.ca_file}"] if bootstrap.startswith("SSL://") else []
    return [*tls, *extra]


def errors(report: dict[str, Any]) -> dict[int | None, str]:
    """The error findings of a probe: node id -> code."""
    return {f["node_id"]: f["code"] for f in report["findings"] if f["severity"] == "error"}


def assert_every_view_works(cluster: StagedCluster, case: str) -> None:
    """Probe from every view at its bootstrap after the patch, checking names: every endpoint of every broker used."""
    seed = CASES[case]
    brokers = {b.node_id for b in cluster.deployment.brokers if b.is_broker}
    for view, before in seed.boots.items():
        boot = bootstrap_after(cluster.deployment, seed.views, view, before)
        report = probe(cluster, view, boot, client=client(cluster, boot))
        assert [b["status"] for b in report["bootstraps"]] == ["ok"], (view, boot, report["bootstraps"])
        assert failing(report) == {}, (view, boot, report["endpoints"])
        assert {e["node_id"] for e in report["endpoints"]} == brokers, (view, report["endpoints"])
        assert errors(report) == {}, (view, report["findings"])


@pytest.fixture(scope="module", params=sorted(CASES))
def seeded(request, tmp_path_factory):
    """One case running from its seeded files: the first probes, `kprobe check` on `fixed/`, and `kprobe fix`
    with its patch applied to a copy of the files (in `work`)."""
    case = request.param
    seed = CASES[case]
    reports = tmp_path_factory.mktemp(f"reports-{case}")
    work = tmp_path_factory.mktemp(f"config-{case}")
    cluster = StagedCluster(files_of(case), seed.views, name=f"seeded-{case}", first_address=seed.first_address)
    try:
        cluster.start()
        assert cluster.moved == {}, f"the lab could not bind the files' own ports: {cluster.moved}"
        before = {view: probe(cluster, view, boot, reports / f"report-{view}.json",
                              client=client(cluster, boot, seed.before.get(view, ())))
                  for view, boot in seed.boots.items()}
        checked = {view: kprobe("check", *map(str, files_of(case, fixed=True)), "--nameserver",
                                cluster.nameserver(view), "--json") for view in seed.views}
        shutil.copytree(SEEDED / case, work, ignore=shutil.ignore_patterns("fixed"), dirs_exist_ok=True)
        config = [arg for path in sorted(work.glob("*.properties")) for arg in ("--config", path.name)]
        [view] = seed.gaps  # each case has one network with a gap
        # --verify's what-if is a TLS client as the report's was: the settings the report recorded (its CA)
        done = kprobe("fix", *map(str, sorted(reports.glob("report-*.json"))), *config, "--json", "--verify",
                      "--vantage", view, "--nameserver", cluster.nameserver(view), cwd=work)
        doc = json.loads(done.stdout) if done.stdout.strip() else {}
        applied = subprocess.run(["patch", "-p0", "--forward", "--batch"], input=doc.get("patch", ""), text=True,
                                 cwd=work, capture_output=True, check=False)
        yield case, cluster, before, checked, done, doc, applied, work
    finally:
        cluster.stop()
    assert running_jvms(cluster.lab.lab_id) == []


def test_seeded_gap_is_seen_from_its_network_only(seeded):
    case, _, before, _, _, _, _, _ = seeded
    gaps = CASES[case].gaps
    for view, report in before.items():
        # every bootstrap answers: the gap is after it
        assert [b["status"] for b in report["bootstraps"]] == ["ok"], (view, report["bootstraps"])
        assert errors(report) == gaps.get(view, {}), (view, report["findings"])
        assert set(failing(report)) <= set(gaps.get(view, {})), (view, report["endpoints"])


def test_check_predicts_no_error_on_hand_patched_files(seeded):
    """`kprobe check` from each network (its view's nameserver) on the `fixed/` files: no error predicted."""
    _, _, _, checked, _, _, _, _ = seeded
    for view, done in checked.items():
        report = json.loads(done.stdout)
        assert [(f["code"], f["severity"]) for f in report["findings"] if f["severity"] == "error"] == [], view
        assert done.returncode == 0, (view, done.stderr)


def test_kprobe_fix_patch_applies_to_the_files_fixed_touches_and_is_proven_by_check(seeded):
    case, _, _, _, done, doc, applied, work = seeded
    assert done.returncode == 0, done.stdout + done.stderr
    assert (doc["schema"], doc["status"]) == ("kprobe.fix/v1", "ok"), doc
    assert applied.returncode == 0, applied.stdout + applied.stderr
    changed = {f["path"] for f in doc["files"] if f["changes"]}
    assert changed == {p.name for p in files_of(case) if p.read_text() != (p.parent / "fixed" / p.name).read_text()}
    # the TLS clients' listener, never the PLAINTEXT one (whose endpoint the copied SSL entry advertises)
    assert {(c["listener"], c["action"]) for f in doc["files"] for c in f["changes"]} == {("SSL", "replace")}, doc
    [view] = CASES[case].gaps
    verdicts = {v["vantage"]: (v["before"], v["after"]) for v in doc["vantages"]}
    assert verdicts[view] == ("gap", "closed"), doc["vantages"]
    assert all(after != "gap" for _, after in verdicts.values()), verdicts
    assert doc["unresolved"] == []
    # the what-if ran from the gapped network as a TLS client, the gap endpoint dialled where it answers today
    [proof] = [v for v in doc["vantages"] if v["vantage"] == view]
    assert f"the what-if probed from here ({view}): " in proof["how"] and " reachable, ok" in proof["how"], proof
    assert " -b SSL://" in proof["command"] and " -X ssl.ca.location=" in proof["command"], proof
    for path in files_of(case):
        if path.name not in changed:
            assert (work / path.name).read_text() == path.read_text(), path.name


def test_the_certificate_step_names_the_broker_and_each_new_tls_name(seeded):
    case, _, _, _, _, doc, _, _ = seeded
    steps = [s["text"] for s in doc["steps"] if s["kind"] == "certificate"]
    new = [(node, name) for node, names in CASES[case].new_names.items() for name in names]
    assert len(steps) == len(new), doc["steps"]  # a name the certificate holds already (a port changed) needs none
    for node, name in new:
        [text] = [t for t in steps if f"(broker {node})" in t]
        assert f"its certificate must name {name} " in text and f"reissue it with {name}" in text, text


def test_the_patched_files_run_and_every_view_works_once_the_certificates_name_what_they_advertise(seeded):
    """Restaged from the patched files with each certificate as it was: a new TLS name fails its check there, the
    networks whose names it holds work. Then with the certificates reissued as the certificate steps say (none
    where the fix keeps every name): every view works."""
    case, cluster, _, _, _, _, applied, work = seeded
    seed = CASES[case]
    assert applied.returncode == 0, applied.stdout + applied.stderr
    patched = sorted(work.glob("*.properties"))
    if seed.new_names:
        cluster.restage(patched, certificates=held(case))  # the certificate as it was
        assert cluster.certificates == held(case)
        [view] = seed.gaps
        boot = bootstrap_after(cluster.deployment, seed.views, view, seed.boots[view])
        report = probe(cluster, view, boot, client=client(cluster, boot), exits=(3,))  # no bootstrap answered
        [bootstrap] = report["bootstraps"]
        assert (bootstrap["status"], bootstrap["tls_failure"]) == ("error", "hostname_mismatch"), bootstrap
        assert errors(report) == {None: "BOOTSTRAP_TLS_FAILED"}, report["findings"]
        for other in set(seed.boots) - {view}:
            boot = bootstrap_after(cluster.deployment, seed.views, other, seed.boots[other])
            assert errors(probe(cluster, other, boot, client=client(cluster, boot))) == {}, other
    cluster.restage(patched, certificates=reissued(case))  # the certificate steps, done
    assert cluster.certificates == {**held(case), **reissued(case)}
    assert_every_view_works(cluster, case)
