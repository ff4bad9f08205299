"""Findings end to end, against the real Kafka lab: identity, consistency, TLS, SASL, proposed fixes.

Each finding is produced by a lab situation (whole `kprobe probe --json` runs, through the CLI's entry
point in this process: tests/support/cli_runner.py), and its absence in the healthy case is checked. The rules
themselves are proven on plain data, code by code and severity by severity, in tests/findings/ (no
broker, no packet); these runs prove that the probe steps observe what those rows assume.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_runner import run_cli
from conftest import topic_on
from report_check import validate


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` in this process (tests/support/cli_runner.py): a child's stdout, stderr and exit code.

    Why not a child: what these tests prove is what a run observes of the lab and reports, not how
    the interpreter starts, and on the suite's two loaded CPUs a child costs a second before it
    probes anything (about 60 runs here).
    """
    return run_cli(list(args))


def probe_json(*args: str) -> tuple[int, dict, str]:
    done = kprobe("probe", "--json", "--timeout", "2", *args)
    for arg in args:  # every run with a secret is searched for it
        if arg.startswith("sasl.password="):
            secret = arg.split("=", 1)[1]
            assert secret not in done.stdout and secret not in done.stderr
    data = json.loads(done.stdout)
    validate(data)
    return done.returncode, data, done.stderr


def found(data: dict) -> set[tuple[str, int | None]]:
    return {(f["code"], f["node_id"]) for f in data["findings"]}


def codes(data: dict) -> set[str]:
    return {f["code"] for f in data["findings"]}


IDENTITY_CODES = {"ENDPOINT_WRONG_BROKER", "ENDPOINT_NOT_KAFKA", "ENDPOINT_ADVERTISES_DIFFERENTLY"}
CONSISTENCY_CODES = {"CLUSTER_ID_MISMATCH", "BROKER_SET_MISMATCH", "DUPLICATE_ENDPOINT", "DNS_VIEWS_DISAGREE"}
TLS_CODES = {"TLS_HOSTNAME_MISMATCH", "TLS_UNTRUSTED", "TLS_EXPIRING", "TLS_HANDSHAKE_FAILED",
             "TLS_INGRESS_DEFAULT_CERTIFICATE", "TLS_SAN_TYPE_MISMATCH"}


# -- identity --------------------------------------------------------------------------------------

def test_healthy_cluster_every_endpoint_is_who_it_says(three_lab):
    code, data, _ = probe_json("-b", three_lab.bootstrap_all("CLIENT"))
    assert code == 0
    assert [(e["node_id"], e["identity"]["status"], e["identity"]["node_id"]) for e in data["endpoints"]] == [
        (0, "match", 0), (1, "match", 1), (2, "match", 2)
    ]
    assert [b["node_id"] for b in data["bootstraps"]] == [0, 1, 2]
    assert not codes(data) & (IDENTITY_CODES | CONSISTENCY_CODES | TLS_CODES)


def test_crossed_endpoint_answers_as_another_broker(three_lab):
    code, data, _ = probe_json("-b", three_lab.real_endpoint("CROSSED", 0))
    assert code == 1
    node2 = next(e for e in data["endpoints"] if e["node_id"] == 2)
    assert node2["identity"]["status"] == "mismatch" and node2["identity"]["node_id"] == 0
    assert ("ENDPOINT_WRONG_BROKER", 2) in found(data)
    # Broker 2's endpoint is the bootstrap's own address with another port: the NAT hint.
    assert ("PORT_DIFFERS_FROM_BOOTSTRAP", 2) in found(data)
    assert ("PORT_DIFFERS_FROM_BOOTSTRAP", 0) not in found(data)  # node 0 is advertised at the bootstrap itself
    # Broker 0's CLIENT listener (where 2's endpoint leads) advertises the CLIENT set, not CROSSED's.
    assert ("ENDPOINT_ADVERTISES_DIFFERENTLY", 2) in found(data)
    wrong = next(f for f in data["findings"] if f["code"] == "ENDPOINT_WRONG_BROKER")
    assert "is node 0" in wrong["message"]
    # TCP reaches all three, a client can use two; the summary says what a client can do.
    assert (data["summary"]["reachable"], data["summary"]["usable"]) == (3, 2)
    text = kprobe("probe", "-b", three_lab.real_endpoint("CROSSED", 0), "--timeout", "2", "--no-color")
    [row] = [ln.split() for ln in text.stdout.splitlines() if ln.startswith("  2 ")]
    assert row[-1] == "unusable" and "2/3 advertised endpoints usable from here" in text.stdout
    prom = kprobe("probe", "-b", three_lab.real_endpoint("CROSSED", 0), "--timeout", "2", "--format",
                  "prometheus").stdout
    usable = {ln.split('node_id="')[1].split('"')[0]: ln.rsplit(" ", 1)[1] for ln in prom.splitlines()
              if ln.startswith("kprobe_endpoint_usable{")}
    assert usable == {"0": "1", "1": "1", "2": "0"}


def test_twin_endpoint_is_a_duplicate(three_lab):
    code, data, _ = probe_json("-b", three_lab.real_endpoint("TWIN", 1))
    assert code == 1
    # Held against broker 2, who does not answer there: broker 0's own endpoint stays usable, as clients find it.
    assert ("DUPLICATE_ENDPOINT", 2) in found(data)
    assert ("ENDPOINT_WRONG_BROKER", 2) in found(data)
    assert data["summary"]["usable"] == 2
    assert "ENDPOINT_ADVERTISES_DIFFERENTLY" not in codes(data)  # same listener, same set


def test_impostor_is_not_kafka(three_lab):
    code, data, _ = probe_json("-b", three_lab.real_endpoint("IMPOSTOR", 0))
    assert code == 1
    node2 = next(e for e in data["endpoints"] if e["node_id"] == 2)
    assert node2["status"] == "reachable"  # TCP alone says all is well...
    assert node2["identity"]["status"] == "not_kafka"  # ...Kafka says otherwise
    assert found(data) >= {("ENDPOINT_NOT_KAFKA", 2)}
    assert {s for s in codes(data)} - {"ENDPOINT_NOT_KAFKA"} == set()


def test_no_identity_skips_the_check(three_lab):
    _, data, _ = probe_json("-b", three_lab.real_endpoint("CROSSED", 0), "--no-identity")
    assert all(e["identity"] is None for e in data["endpoints"])
    assert not codes(data) & IDENTITY_CODES


# -- consistency ----------------------------------------------------------------------------------

def test_bootstraps_of_two_clusters(three_lab, listeners_lab):
    code, data, _ = probe_json("-b", three_lab.bootstrap("CLIENT", 0), "-b", listeners_lab.bootstrap("LISTENER_FRED"))
    assert code == 1
    assert "CLUSTER_ID_MISMATCH" in codes(data)
    ids = {b["cluster_id"] for b in data["bootstraps"]}
    assert ids == {three_lab.cluster_id, listeners_lab.cluster_id}


def test_listener_missing_on_one_broker(three_lab):
    """The listener-missing scenario: PARTIAL is defined on brokers 0 and 1, not on broker 2.

    No --resolve or --connect-to mapping can fix this one, nor stand for its fix: a mapping changes
    where an advertised endpoint leads, and through PARTIAL the metadata has no endpoint for broker 2
    at all (checked below). The fix is the listener on broker 2. The CLIENT listener, on every
    broker, is the control: the same topic through it has no LISTENER_NOT_FOUND.
    """
    # Partition 0 led by broker 2 (which lacks PARTIAL), 1 followed by it, 2 clear of it. Kafka 4.1 answers
    # partition 0 through PARTIAL with leader -1 and LISTENER_NOT_FOUND: producers to it fail.
    name = topic_on(three_lab, "partial", [[2, 0], [0, 2], [1, 0]])
    code, data, _ = probe_json("-b", three_lab.real_endpoint("PARTIAL", 0), "-b", three_lab.bootstrap("CLIENT", 1))
    partial = next(b for b in data["bootstraps"] if b["address"] == three_lab.real_endpoint("PARTIAL", 0))
    assert sorted(b["node_id"] for b in partial["brokers"]) == [0, 1]  # nothing of broker 2's to map anywhere
    assert "BROKER_SET_MISMATCH" in codes(data)
    assert code == 1  # every advertised endpoint is reachable, but a partition is led out of the listener's reach
    missing = {(f["severity"], f["node_id"]): f["message"] for f in data["findings"] if f["code"] == "LISTENER_NOT_FOUND"}
    assert set(missing) == {("error", 2), ("warning", 2)}, data["findings"]
    assert f"{name}-0" in missing[("error", 2)] and f"{name}-1" not in missing[("error", 2)]
    assert f"{name}-1" in missing[("warning", 2)] and f"{name}-0" not in missing[("warning", 2)]
    assert f"{name}-2" not in missing[("error", 2)] + missing[("warning", 2)]
    assert data["summary"]["status"] == "gap"
    # Through CLIENT, which every broker defines, the same topic is fine.
    _, client, _ = probe_json("-b", three_lab.bootstrap("CLIENT", 1))
    assert "LISTENER_NOT_FOUND" not in codes(client)
    partial_only = probe_json("-b", three_lab.real_endpoint("PARTIAL", 0), "-b", three_lab.real_endpoint("PARTIAL", 1))
    assert "BROKER_SET_MISMATCH" not in codes(partial_only[1])


def test_dns_views_disagree(listeners_lab):
    code, data, _ = probe_json("-b", listeners_lab.real_endpoint("LISTENER_BOB"),
                               "--nameserver", listeners_lab.nameserver("docker"),
                               "--compare-nameserver", listeners_lab.nameserver("host"))
    assert code == 0  # a warning: from the docker network (the resolver in use) all is well
    assert ("DNS_VIEWS_DISAGREE", 0) in found(data)
    compared = data["endpoints"][0]["compared_dns"]
    assert compared[0]["status"] == "nxdomain" and compared[0]["server"] == listeners_lab.nameserver("host")
    same = probe_json("-b", listeners_lab.real_endpoint("LISTENER_BOB"), "--nameserver",
                      listeners_lab.nameserver("docker"), "--compare-nameserver", listeners_lab.nameserver("docker"))
    assert "DNS_VIEWS_DISAGREE" not in codes(same[1]) and same[0] == 0


# -- TLS ------------------------------------------------------------------------------------------

def tls_probe(lab, listener: str, *extra: str) -> tuple[int, dict, str]:
    return probe_json("-b", "SSL://" + lab.bootstrap(listener), "--nameserver", lab.nameserver("clients"),
                      "-X", f"ssl.ca.location={lab.ca_file}", *extra)


def test_tls_good_listener(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_GOOD")
    assert code == 0, data["findings"]
    tls = data["endpoints"][0]["tls"]
    assert tls["status"] == "ok" and tls["trusted"] and tls["hostname_ok"]
    assert "broker.tls.kprobe.test" in tls["names"] and tls["days_left"] > 700
    assert data["endpoints"][0]["identity"]["status"] == "match"
    assert not codes(data) & TLS_CODES


def test_tls_certificate_names_another_host(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_INTERNAL_NAME")
    assert code == 1
    [finding] = [f for f in data["findings"] if f["code"] == "TLS_HOSTNAME_MISMATCH"]
    assert "kafka-tls.internal.kprobe.test" in finding["message"]
    assert "broker.tls.kprobe.test" in finding["message"]  # the certificate's names
    assert finding["severity"] == "error"
    assert data["endpoints"][0]["tls"]["client_verifies"] == {"chain": True, "name": True}


def test_tls_mismatch_with_the_name_check_off_hurts_other_clients_only(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_INTERNAL_NAME", "-X", "ssl.endpoint.identification.algorithm=none")
    assert code == 0  # a warning: these settings connect; the message says who still fails
    [finding] = [f for f in data["findings"] if f["code"] == "TLS_HOSTNAME_MISMATCH"]
    assert finding["severity"] == "warning"
    assert "ssl.endpoint.identification.algorithm=none" in finding["message"]
    assert data["endpoints"][0]["tls"]["client_verifies"] == {"chain": True, "name": False}


def test_tls_through_security_protocol_property(tls_lab):
    """`-X security.protocol=SSL` with a bare host:port is the same TLS probe as an SSL:// address."""
    code, data, _ = probe_json("-b", tls_lab.bootstrap("SSL_INTERNAL_NAME"), "--nameserver", tls_lab.nameserver("clients"),
                               "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls_lab.ca_file}")
    assert code == 1
    assert data["bootstraps"][0]["protocol"] == "SSL"
    assert data["endpoints"][0]["tls"]["status"] == "hostname_mismatch"
    assert "TLS_HOSTNAME_MISMATCH" in codes(data)
    good = probe_json("-b", tls_lab.bootstrap("SSL_GOOD"), "--nameserver", tls_lab.nameserver("clients"),
                      "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls_lab.ca_file}")
    assert good[0] == 0 and good[1]["endpoints"][0]["tls"]["status"] == "ok"


def test_tls_expiring(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_EXPIRING")
    [finding] = [f for f in data["findings"] if f["code"] == "TLS_EXPIRING"]
    assert finding["severity"] == "warning" and code == 0
    assert 3.9 < data["endpoints"][0]["tls"]["days_left"] <= 5
    _, quiet, _ = tls_probe(tls_lab, "SSL_EXPIRING", "--tls-expiry-days", "2")
    assert "TLS_EXPIRING" not in codes(quiet)


def test_tls_untrusted_behind_a_trusted_bootstrap(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_FORWARD")
    assert code == 1
    [finding] = [f for f in data["findings"] if f["code"] == "TLS_UNTRUSTED"]
    assert "other-ca" in finding["message"]


def test_tls_advertised_port_is_plaintext(tls_lab):
    code, data, _ = tls_probe(tls_lab, "SSL_TO_PLAIN")
    assert code == 1
    assert "TLS_HANDSHAKE_FAILED" in codes(data)


def test_tls_bootstrap_without_the_ca(tls_lab):
    code, data, _ = probe_json("-b", "SSL://" + tls_lab.bootstrap("SSL_GOOD"), "--nameserver",
                               tls_lab.nameserver("clients"))
    assert code == 3
    [finding] = data["findings"]
    assert finding["code"] == "BOOTSTRAP_TLS_FAILED" and "ssl.ca.location" in finding["fix"]
    assert data["bootstraps"][0]["tls_failure"] == "untrusted"
    # The refused certificate is named: who it is for and who issued it.
    assert "names broker.tls.kprobe.test" in finding["message"] and "issuer " in finding["message"]


# -- SASL and secrets -------------------------------------------------------------------------------

def sasl_args(lab, listener: str, mechanism: str, password: str) -> list[str]:
    return ["-b", lab.bootstrap(listener), "-X", "security.protocol=SASL_PLAINTEXT", "-X",
            f"sasl.mechanism={mechanism}", "-X", "sasl.username=alice", "-X", f"sasl.password={password}"]


def test_sasl_plain_spoken_by_kprobe(sasl_lab):
    password = sasl_lab.passwords["alice"]
    code, data, _ = probe_json(*sasl_args(sasl_lab, "SASL_PLAIN", "PLAIN", password))
    assert code == 0
    assert data["bootstraps"][0]["via"] == "kprobe"
    assert data["endpoints"][0]["identity"]["status"] == "match"
    assert data["settings"]["properties"]["sasl.password"] == "[redacted]"


def test_sasl_plain_wrong_password_is_auth_failed(sasl_lab):
    code, data, _ = probe_json(*sasl_args(sasl_lab, "SASL_PLAIN", "PLAIN", "not-the-password"))
    assert code == 3
    assert data["bootstraps"][0]["status"] == "auth_failed"
    assert codes(data) == {"AUTH_FAILED"}


def test_sasl_scram_spoken_by_kprobe(sasl_lab):
    """SCRAM on kprobe's own connection (it went through librdkafka once, and identity went unchecked)."""
    code, data, stderr = probe_json(*sasl_args(sasl_lab, "SASL_SCRAM", "SCRAM-SHA-256", sasl_lab.passwords["alice"]))
    assert code == 0, data["findings"]
    assert stderr == ""
    assert data["bootstraps"][0]["via"] == "kprobe"
    [endpoint] = data["endpoints"]
    assert endpoint["status"] == "reachable" and endpoint["identity"]["status"] == "match"
    assert data["findings"] == []


def test_sasl_scram_wrong_password_is_auth_failed(sasl_lab):
    code, data, _ = probe_json(*sasl_args(sasl_lab, "SASL_SCRAM", "SCRAM-SHA-256", "not-alices-password"))
    assert code == 3
    [boot] = data["bootstraps"]
    assert boot["status"] == "auth_failed" and boot["via"] == "kprobe"
    assert "invalid credentials" in boot["error"]
    assert codes(data) == {"AUTH_FAILED"}


def sasl_ssl_args(lab, user: str, password: str) -> list[str]:
    return ["-b", lab.bootstrap("SASL_SSL_PLAIN"), "--nameserver", lab.nameserver("clients"),
            "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={lab.ca_file}", "-X", "sasl.mechanism=PLAIN",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]


def test_sasl_ssl_plain_through_security_protocol(sasl_lab):
    code, data, stderr = probe_json(*sasl_ssl_args(sasl_lab, "alice", sasl_lab.passwords["alice"]))
    assert code == 0, data["findings"]
    assert data["bootstraps"][0]["protocol"] == "SASL_SSL" and data["bootstraps"][0]["via"] == "kprobe"
    [endpoint] = data["endpoints"]
    assert endpoint["host"] == "kafka-sasl" and endpoint["status"] == "reachable"
    assert endpoint["tls"]["status"] == "ok" and "kafka-sasl" in endpoint["tls"]["names"]
    assert endpoint["identity"]["status"] == "match"
    assert data["findings"] == [] and stderr == ""


def test_sasl_ssl_wrong_password_is_auth_failed(sasl_lab):
    code, data, _ = probe_json(*sasl_ssl_args(sasl_lab, "alice", "not-alices-password"))
    assert code == 3
    assert data["bootstraps"][0]["status"] == "auth_failed"
    assert codes(data) == {"AUTH_FAILED"}


def test_identity_without_permission_degrades_to_not_checked(sasl_lab):
    """bob may read metadata but not describe broker configs (no ACL, authorizer on): identity is not checked,
    and since he may describe no topic either, his clients would meet TOPIC_AUTHORIZATION_FAILED everywhere."""
    code, data, _ = probe_json(*sasl_ssl_args(sasl_lab, "bob", sasl_lab.passwords["bob"]))
    assert code == 0  # nothing a client would meet: an info finding
    [endpoint] = data["endpoints"]
    assert endpoint["status"] == "reachable" and endpoint["tls"]["status"] == "ok"
    assert endpoint["identity"]["status"] == "unchecked"
    assert "not authorised to describe broker configs" in endpoint["identity"]["detail"]
    assert codes(data) == {"IDENTITY_NOT_CHECKED", "NO_TOPICS_VISIBLE"}
    [finding] = [f for f in data["findings"] if f["code"] == "IDENTITY_NOT_CHECKED"]
    assert finding["severity"] == "info"
    assert finding["message"].startswith("Identity not checked: not authorised to describe broker configs")
    assert "DescribeConfigs" in finding["fix"]


def needle_of(secret: str) -> bytes:
    return secret.encode()


def mismatch_args(lab, listener: str, protocol: str, password: str) -> list[str]:
    """alice's PLAIN settings with the wrong security.protocol for `listener`: her password is never sent."""
    return ["-b", lab.bootstrap(listener), "--nameserver", lab.nameserver("clients"), "-X",
            f"security.protocol={protocol}", "-X", f"ssl.ca.location={lab.ca_file}", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.username=alice", "-X", f"sasl.password={password}"]


def test_no_password_anywhere(sasl_lab, tmp_path):
    """Every byte of every output of SASL runs, searched for the secret.

    Also the runs that end before or after the password is used, with -o and --verbose: bob denied
    Describe (his password worked; identity is not checked), and the protocol mismatches both ways,
    where the password never reaches the broker but still sits in the settings every output echoes.
    """
    secret = sasl_lab.passwords["alice"]
    bob = sasl_lab.passwords["bob"]
    props = tmp_path / "client.properties"
    props.write_text(f"sasl.password={secret}\nssl.key.password={secret}\n")
    runs = []
    for listener, mechanism in (("SASL_PLAIN", "PLAIN"), ("SASL_SCRAM", "SCRAM-SHA-256")):
        for password in (secret, secret + "-wrong"):
            for fmt in ("--json", "--no-color"):
                out = tmp_path / f"{listener}-{fmt}-{len(runs)}.json"
                args = [*sasl_args(sasl_lab, listener, mechanism, password), fmt, "--verbose", "-o", str(out),
                        "--timeout", "2"]
                runs.append(kprobe("probe", *args))
        runs.append(kprobe("probe", "-b", sasl_lab.bootstrap(listener), "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", f"sasl.mechanism={mechanism}", "-X", "sasl.username=alice", "-F", str(props),
                           "--json", "--timeout", "2"))
    others = {  # name: (args, exit code, the finding codes)
        "bob denied Describe": (sasl_ssl_args(sasl_lab, "bob", bob), 0, {"IDENTITY_NOT_CHECKED", "NO_TOPICS_VISIBLE"}),
        "SASL_SSL to a plaintext listener": (mismatch_args(sasl_lab, "SASL_PLAIN", "SASL_SSL", secret), 3,
                                             {"SECURITY_PROTOCOL_MISMATCH"}),
        "SASL_PLAINTEXT to a TLS listener": (mismatch_args(sasl_lab, "SASL_SSL_PLAIN", "SASL_PLAINTEXT", secret), 3,
                                             {"SECURITY_PROTOCOL_MISMATCH"}),
    }
    for index, (name, (args, exit_code, code)) in enumerate(others.items()):
        for fmt in ("--json", "--no-color"):
            out = tmp_path / f"other-{index}{fmt}.json"
            done = kprobe("probe", *args, fmt, "--verbose", "-o", str(out), "--timeout", "2")
            report = json.loads(out.read_bytes())  # the -o file; stdout and stderr are searched with the rest
            assert (done.returncode, codes(report)) == (exit_code, code), (name, report["findings"])
            assert report["settings"]["properties"]["sasl.password"] == "[redacted]"
            assert done.stderr, name  # --verbose logged: the search below covers something
            runs.append(done)
    # reports spooled for a collector that is down keep no secret either
    spool = tmp_path / "spool"
    runs.append(kprobe("probe", *sasl_args(sasl_lab, "SASL_PLAIN", "PLAIN", secret), "--publish",
                       "127.0.0.1:1/reports", "--spool", str(spool), "--timeout", "1", "--json"))
    assert list(spool.glob("*.json"))
    for spooled in spool.glob("*.json"):
        assert needle_of(secret) not in spooled.read_bytes()
    # a typo that makes the secret an unexpected argument
    runs.append(kprobe("probe", "-b", "h:1", "-X", "sasl.password", secret))
    for needle in (secret, bob):
        for run in runs:
            assert needle not in run.stdout and needle not in run.stderr, run.args
        for report in tmp_path.glob("*.json"):
            assert needle.encode() not in report.read_bytes()
    assert any("[redacted]" in run.stdout for run in runs)
    assert runs[-1].returncode == 2 and "[redacted]" in runs[-1].stderr


# -- fixes the evidence supports ------------------------------------------------------------------

def test_fix_proposes_listener_lines_from_the_bootstrap(cloud_lab):
    bootstrap = cloud_lab.bootstrap("INTERNAL")
    code, data, _ = probe_json("-b", bootstrap, "--nameserver", cloud_lab.nameserver("internet"))
    assert code == 1
    [finding] = data["findings"]
    assert finding["code"] == "ADVERTISED_UNRESOLVABLE"
    host = bootstrap.rsplit(":", 1)[0]
    internal, external = cloud_lab.listener("INTERNAL").advertised, cloud_lab.listener("EXTERNAL").advertised
    # The broker's own settings, read on the identity request, name the listener and show EXTERNAL taken.
    assert f"answers at {bootstrap} (your bootstrap, identified as node 0). Its listener INTERNAL advertises " \
           f"{internal}, a cloud provider's private name" in finding["fix"]
    assert "INTERNAL is also the inter-broker listener" in finding["fix"]
    assert f"`EXTERNAL_2://{host}:<free port>` in advertised.listeners" in finding["fix"]
    assert "`EXTERNAL_2:PLAINTEXT` in listener.security.protocol.map; publish its port" in finding["fix"]
    assert f"The broker also advertises EXTERNAL://{external}: if it serves this network" in finding["fix"]
    assert f"Do not replace {internal} with {bootstrap}" in finding["fix"]


def test_fix_points_first_at_the_listener_that_works_from_here(cloud_lab):
    """INTERNAL and EXTERNAL probed together from the internet: EXTERNAL works, so it is the first fix."""
    internal, external = cloud_lab.bootstrap("INTERNAL"), cloud_lab.bootstrap("EXTERNAL")
    code, data, _ = probe_json("-b", f"{internal},{external}", "--nameserver", cloud_lab.nameserver("internet"))
    assert code == 1
    [finding] = data["findings"]
    assert (finding["code"], finding["endpoint"]) == ("ADVERTISED_UNRESOLVABLE", cloud_lab.listener("INTERNAL").advertised)
    fix = finding["fix"]
    assert fix.startswith(f"Bootstrap with {external}, which works from here: the same cluster ({cloud_lab.cluster_id}) "
                          f"answers there, and every endpoint it advertises ({external}) resolves and connects from "
                          f"here, so clients on this network need no change on the brokers. Only if they must use "
                          f"{internal}, change that listener too. From here broker 0 answers at {internal}"), fix
    assert fix.index("EXTERNAL://") > fix.index("change that listener too")  # the listener lines come second
    # Alone, INTERNAL has nothing that works beside it: the listener lines are the fix (the test above).
    _, alone, _ = probe_json("-b", internal, "--nameserver", cloud_lab.nameserver("internet"))
    assert alone["findings"][0]["fix"].startswith("From here broker 0 answers at")


@pytest.mark.parametrize("extra", [["--no-identity"]])
def test_no_proposal_without_evidence(cloud_lab, extra):
    _, data, _ = probe_json("-b", cloud_lab.bootstrap("INTERNAL"), "--nameserver", cloud_lab.nameserver("internet"),
                            *extra)
    [finding] = data["findings"]
    assert "EXTERNAL://" not in finding["fix"] and "your bootstrap" not in finding["fix"]


# -- a bootstrap that gives no metadata names its cause in its own code --

def test_bootstrap_failures_each_have_their_code(tls_lab, sasl_lab):
    """Before, all of these were BOOTSTRAP_UNREACHABLE ("did not answer in time"), which sends people to the
    network when the certificate, the protocol or the mechanism is at fault."""
    ns, ca = tls_lab.nameserver("clients"), f"ssl.ca.location={tls_lab.ca_file}"
    good = tls_lab.bootstrap("SSL_GOOD")
    internal_name = "kafka-tls.internal.kprobe.test:" + good.rsplit(":", 1)[1]
    cases = {
        "plaintext to TLS": (["-b", good, "--nameserver", ns], "SECURITY_PROTOCOL_MISMATCH", {"speaks_tls": True}),
        "TLS to plaintext": (["-b", tls_lab.real_endpoint("INTERNAL"), "-X", "security.protocol=SSL", "-X", ca],
                             "SECURITY_PROTOCOL_MISMATCH", {"speaks_tls": False, "tls_failure": "handshake_failed"}),
        "no CA": (["-b", good, "--nameserver", ns, "-X", "security.protocol=SSL"], "BOOTSTRAP_TLS_FAILED",
                  {"tls_failure": "untrusted"}),
        "a name the certificate lacks": (["-b", internal_name, "--nameserver", ns, "-X", "security.protocol=SSL",
                                          "-X", ca], "BOOTSTRAP_TLS_FAILED", {"tls_failure": "hostname_mismatch"}),
        "PLAIN to a SCRAM listener": (sasl_args(sasl_lab, "SASL_SCRAM", "PLAIN", sasl_lab.passwords["alice"]),
                                      "SASL_MECHANISM_MISMATCH", {"sasl_mechanisms": ["SCRAM-SHA-256"]}),
    }
    for name, (args, code, fields) in cases.items():
        exit_code, data, _ = probe_json(*args)
        [boot] = data["bootstraps"]
        assert (exit_code, codes(data)) == (3, {code}), (name, data["findings"])
        assert {key: boot[key] for key in fields} == fields, (name, boot)
    # The certificate's names are in the message, so the user sees which names it holds.
    _, data, _ = probe_json(*cases["a name the certificate lacks"][0])
    assert "broker.tls.kprobe.test" in data["findings"][0]["message"]
