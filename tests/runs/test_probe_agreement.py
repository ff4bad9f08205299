"""kprobe's verdict against real clients, for every lab scenario and each of its vantages.

For each case kprobe probes, and Apache Kafka's Java client and librdkafka each produce one record to
every partition of a topic whose partitions are led one per broker and read them back. All three run
as child processes of one private mount namespace (tests/support/system_network.py) whose /etc/hosts holds the
vantage's DNS view, so they resolve every name through the same system resolver and nothing leaves
loopback. A case agrees when:

- kprobe exits 0 exactly when both clients get every record back, and
- the brokers kprobe's error findings name are exactly the leaders of the partitions each client lost
  (every broker when an error concerns the whole run, a failed bootstrap for one), and
- kprobe's own --roundtrip loses what the librdkafka client lost and never finds the verdict contradicted.

kprobe saves each report with -o while printing its text: `kprobe show` of the saved file must print
that text byte for byte, so every scenario and vantage also proves the reader.

Every scenario but `collector` (the sink `watch --publish` writes to, no client shape of its own).
Left out, and where each is proven instead: the dual-stack name whose IPv6 address drops packets (its
librdkafka verdict depends on the set-up timeout: tests/net/test_dualstack.py runs it with both clients),
OAUTHBEARER through the lab's OIDC token endpoint is in, twice: a client the broker takes and one whose
token is for another audience (the Java client lists the endpoint in Kafka 4's allowed-URLs property and
trusts its certificate through the JAAS line's own ssl.truststore.* options, as Kafka reads them), and so is
the unsecured-JWT listener.

For the TLS and SASL scenarios kprobe is given the Java client's own client.properties (--command-config,
bootstrap.servers included), the very file the Java client loads: JAAS logins, JKS and PKCS12 truststores
made by keytool.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from conftest import start_once
from real_clients import Outcome, java_round_trip, librdkafka_round_trip
from report_check import validate
from system_network import kprobe, system_network

from kprobe.lab.idp import ALLOWED_URLS_PROPERTY


@dataclass
class Case:
    """One vantage on one listener, with the client settings both clients and kprobe share."""

    view: str
    name: str
    bootstrap: str
    props: dict[str, str] = field(default_factory=dict)  # librdkafka's names (kprobe takes them too)
    java: dict[str, str] = field(default_factory=dict)  # the Java client's names for the same settings
    # Long enough for a working client on a busy two-CPU machine, short enough that a failing one costs little.
    # (5 s was not, once the suite ran on two workers: a working Java producer saw its new topic's metadata late.)
    budget_ms: int = 10000
    # The Java settings go into one client.properties that both kprobe (--command-config) and the Java client
    # load: kprobe must judge the configuration the user's Java application really has.
    java_file: bool = False
    jvm: list[str] = field(default_factory=list)  # -D options of the Java client
    # kprobe's --timeout: short, because a case that drops connections makes kprobe wait it out once per
    # endpoint within the same budget the clients have.
    timeout_s: int = 2
    # kprobe's --deadline is the whole run's: its probe first, then its round trip on what is left. The clients'
    # budget is for their round trip alone, so kprobe's run gets the budget plus what its probe may take.
    probe_s: int = 1


def _hosts(view: dict[str, tuple[str, ...]]) -> list[str]:
    lines = [f"{address} {name}" for name, addresses in view.items() for address in addresses]
    return lines if any(line.endswith(" localhost") for line in lines) else ["127.0.0.1 localhost", *lines]


def _tls(lab: Any, protocol: str = "SSL") -> tuple[dict[str, str], dict[str, str]]:
    return ({"security.protocol": protocol, "ssl.ca.location": lab.ca_file},
            {"security.protocol": protocol, "ssl.truststore.type": "PEM", "ssl.truststore.location": lab.ca_file})


def _sasl(protocol: str, mechanism: str, user: str, password: str) -> tuple[dict[str, str], dict[str, str]]:
    module = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule"}.get(
        mechanism, "org.apache.kafka.common.security.scram.ScramLoginModule")
    return ({"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.username": user,
             "sasl.password": password},
            {"security.protocol": protocol, "sasl.mechanism": mechanism,
             "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'})


def _merge(*pairs: tuple[dict[str, str], dict[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    rd: dict[str, str] = {}
    java: dict[str, str] = {}
    for a, b in pairs:
        rd.update(a)
        java.update(b)
    return rd, java


def cases_for(scenario: str, lab: Any) -> list[Case]:
    """Every (vantage, listener) of the scenario that a client is pointed at, with its settings."""
    views = list(lab.scenario.views)
    out: list[Case] = []

    def each_view(name: str, bootstrap: str, settings: tuple[dict[str, str], dict[str, str]] = ({}, {}),
                  only: list[str] | None = None) -> None:
        for view in only or views:
            out.append(Case(view, name, bootstrap, dict(settings[0]), dict(settings[1])))

    if scenario == "listeners":
        for listener in ("LISTENER_BOB", "LISTENER_FRED", "LISTENER_ALICE"):
            each_view(listener, lab.real_endpoint(listener))
    elif scenario == "cloud":
        for listener in ("INTERNAL", "EXTERNAL"):
            each_view(listener, lab.bootstrap(listener))
    elif scenario == "three-brokers":
        for listener in ("CLIENT", "BLACKHOLED", "DARK", "CROSSED", "TWIN", "IMPOSTOR", "PARTIAL"):
            each_view(listener, lab.real_endpoint(listener, 0))
    elif scenario == "tls":
        for listener in ("SSL_GOOD", "SSL_INTERNAL_NAME", "SSL_EXPIRING", "SSL_OTHER_CA", "SSL_FORWARD",
                         "SSL_TO_PLAIN", "SSL_IP_AS_DNS"):
            each_view(listener, lab.bootstrap(listener), _tls(lab))
        # A client that does not check host names (Java: an empty ssl.endpoint.identification.algorithm) gets past
        # the certificate naming another host: kprobe judges it as that client does (a warning, exit 0).
        each_view("SSL_INTERNAL_NAME without the name check", lab.bootstrap("SSL_INTERNAL_NAME"), _merge(_tls(lab), (
            {"ssl.endpoint.identification.algorithm": "none"}, {"ssl.endpoint.identification.algorithm": ""})))
        # ssl.client.auth=required: the client certificate from a keystore (PKCS12, made by openssl as people do).
        each_view("SSL_MTLS", lab.bootstrap("SSL_MTLS"), _merge(_tls(lab), (
            {"ssl.certificate.location": lab.client_cert_file, "ssl.key.location": lab.client_key_file},
            {"ssl.keystore.type": "PKCS12-FROM-PEM", "ssl.keystore.location": lab.client_keystore_file})))
    elif scenario == "sasl":
        alice = lab.passwords["alice"]
        each_view("SASL_PLAIN", lab.bootstrap("SASL_PLAIN"), _sasl("SASL_PLAINTEXT", "PLAIN", "alice", alice))
        each_view("SASL_SCRAM", lab.bootstrap("SASL_SCRAM"),
                  _sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", alice))
        each_view("SASL_SSL_PLAIN", lab.bootstrap("SASL_SSL_PLAIN"),
                  _merge(_tls(lab, "SASL_SSL"), _sasl("SASL_SSL", "PLAIN", "alice", alice)))
    elif scenario == "scram":
        user = next(iter(lab.passwords))
        for listener in ("SCRAM_GOOD", "SCRAM_BROKEN"):
            each_view(listener, lab.bootstrap(listener),
                      _sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", user, lab.passwords[user]))
    elif scenario == "oauth":
        each_view("OAUTH_UNSECURED", lab.bootstrap("OAUTH_UNSECURED"), (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
             "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=alice"},
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
             "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                 'unsecuredLoginStringClaim_sub="alice";'}))
        idp = lab.idp
        for client in ("kprobe-app", "billing-app"):  # billing-app's token is for another audience: refused
            each_view(f"OAUTH_OIDC as {client}", lab.bootstrap("OAUTH_OIDC"), (
                {"security.protocol": "SASL_PLAINTEXT", **idp.client_properties(client),
                 "https.ca.location": lab.ca_file},
                {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                 "sasl.login.callback.handler.class":
                     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                 "sasl.oauthbearer.token.endpoint.url": idp.token_url,
                 "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                     f'clientId="{client}" clientSecret="{idp.client_secrets[client]}" '
                                     f'ssl.truststore.type="PEM" ssl.truststore.location="{lab.ca_file}";'}))
        for case in out:
            if case.name.startswith("OAUTH_OIDC"):
                case.jvm = [f"-D{ALLOWED_URLS_PROPERTY}={idp.token_url}"]
    elif scenario == "sni-ingress":
        for listener in ("INGRESS", "ROUTE_MISSING"):
            each_view(listener, lab.bootstrap(listener), _tls(lab))
    elif scenario == "controllers":
        for listener in ("CLIENT", "CONTROLLER_LEAK"):
            each_view(listener, lab.real_endpoint(listener, 1))
        for case in out:
            # A node of this lab answers the identity check as a controller too, and every client of the scenario
            # starts at once beside it: in a loaded run kprobe's probe used all of budget + 1 s before its round trip
            # began (both clients delivered, with their budget for the round trip alone). Its probe gets the same
            # allowance as a TLS case's.
            case.probe_s = 10
    elif scenario == "dual-stack":
        for listener in ("DUAL", "LOCALHOST"):
            each_view(listener, lab.real_endpoint(listener))
        for case in out:
            # librdkafka draws an address afresh for each attempt (a re-bootstrap each time its one broker is
            # down): a draw of ::1 costs 1 to 2 s, and draws are coin flips. It gets through, as its default
            # 300 s message timeout allows. 15 s held 7 or 8 draws per connection: over the eight here (a
            # producer and a consumer for the client and for kprobe's round trip, in two cases), about one
            # run in 30 lost. 30 s holds 15 (docs/dual-stack.md); a working client stops at its first IPv4 draw.
            case.budget_ms = 30000
    elif scenario == "port-forward":
        each_view("PLAIN through the bootstrap service", lab.bootstrap("PLAIN"), only=["cluster"])
        each_view("PLAIN through one port-forward", lab.forwards.endpoint("pod0"), only=["laptop"])
    elif scenario == "nodeport":
        for listener in ("NODEPORT", "NODEPORT_INTERNAL"):
            each_view(listener, lab.bootstrap(listener))
    else:
        raise AssertionError(f"no agreement cases for scenario {scenario}")
    for case in out:
        case.java_file = scenario in JAVA_FILE_SCENARIOS
        tls = case.props.get("security.protocol") in ("SSL", "SASL_SSL")
        if tls:
            # Seven JVMs starting at once, each loading the TLS stack for its first handshake, on two CPUs beside
            # the brokers: a working Java client took longer than 5 s to see its topic once (a loaded run), and a
            # working librdkafka client longer than 15 s in a CI run of 12 minutes. A working client stops at its
            # records, so the long budget is only the failing clients' wait (their outcome the same either way).
            case.budget_ms = max(case.budget_ms, 30000)
            # And kprobe's run does its TLS probe before its round trip: in such a CI run a TLS bootstrap alone took
            # 3.3 s (0.2 s idle), then the endpoints are checked, while the librdkafka client needed 13.7 s of its 15
            # for its round trip alone; kprobe's round trip, on what a deadline of budget + 1 s left it, lost a
            # partition the client had. Its failing cases now end with the Java clients' (25 to 28 s), not before.
            case.probe_s = 10
        # Every client of a scenario starting at once makes its fresh brokers slow to answer kprobe's bootstrap
        # (connect, ApiVersions, Metadata, the identity check; each within --timeout): a working TLS bootstrap took
        # 1.0 to 2.2 s (idle: 80 ms), one through the nodeport lab's proxy 1.2 to 2.0 s (idle: 60 to 110 ms), and
        # one TLS case in CI waited past 2 s, BOOTSTRAP_UNREACHABLE where both clients, patient for 10 s and more,
        # got through. kprobe gets its default patience, as the clients get theirs, wherever no endpoint drops
        # connections (three-brokers' do, and kprobe waits each out: there its plaintext bootstraps took 4 to
        # 190 ms in the same runs). Over TLS, the Java client's own patience for a connection and its handshake
        # (socket.connection.setup.timeout.ms, 10 s): in a CI run kprobe's TLS handshakes to the lab's broker waited
        # 5.4 to 7.4 s, where the Java client, as patient as this, got through.
        if tls:
            case.timeout_s = 10
        elif not lab.scenario.blackholes:
            case.timeout_s = 5
    return out


# Run inside the namespace, with every view's names in its hosts file: a broker's inter-broker listener may
# advertise a name only one network resolves (the cloud lab's VPC name), and an admin client follows it.
_CREATE_TOPIC = r"""
import json, sys
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, name, brokers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
new = NewTopic(name, num_partitions=len(brokers), replica_assignment=[[b] for b in brokers])
admin.create_topics([new], request_timeout=30)[name].result(40)
"""


def _topic(lab: Any, brokers: list[int], prefix: list[str]) -> str:
    """One partition led by each broker, made through the inter-broker listener (plaintext, a super user)."""
    inter = next(name for name, rl in next(iter(lab.nodes.values())).listeners.items() if rl.spec.inter_broker)
    name = f"agree-{uuid.uuid4().hex[:8]}"
    subprocess.run([*prefix, sys.executable, "-c", _CREATE_TOPIC, lab.real_endpoint(inter, brokers[0]), name,
                    json.dumps(brokers)], check=True, capture_output=True, timeout=90)
    return name


# Codes whose harm reaches past the broker they name, for some clients. Measured here:
# - ENDPOINT_IS_CONTROLLER: clients send metadata requests to the controller broker 1 advertises; the Java
#   producer then often fails every record (UnsupportedVersionException), librdkafka now and then the
#   records of broker 2's partition (timeouts), where kprobe's verdict names broker 1 only.
# - a broken endpoint (refused, dropped, not Kafka, the wrong certificate): the Java producer with a 5 s
#   delivery.timeout.ms now and then lets records for healthy brokers' partitions expire too ("Expiring 1
#   record(s) ... 5000 ms has passed since batch creation") while it retries the broken one; librdkafka
#   never did. With the default 120 s they would go out: a slower client, not a wrong verdict.
# For these, a client must lose at least the brokers kprobe names (it found every broken one), and may
# lose more. librdkafka is held to exact agreement everywhere else, the Java client wherever no endpoint
# is broken.
SPILLS = {"ENDPOINT_IS_CONTROLLER": {"java", "librdkafka"}}


# Where kprobe reads the Java client's own properties file instead of -X: every SASL and TLS form (PLAIN, SCRAM,
# unsecured OAUTHBEARER, a PEM, JKS or PKCS12 truststore, a client keystore). sni-ingress keeps librdkafka's names.
JAVA_FILE_SCENARIOS = ("tls", "sasl", "scram", "oauth")


def java_properties_text(settings: dict[str, str]) -> str:
    """A client.properties as a person writes one: `key=value`, the JAAS line continued with `\\`."""
    lines = ["# written by the agreement test: kprobe and the Java client load this same file"]
    for key, value in settings.items():
        escaped = value.replace("\\", "\\\\")
        if key == "sasl.jaas.config" and " required " in escaped:
            module, _, options = escaped.partition(" required ")
            escaped = f"{module} required \\\n    " + " \\\n    ".join(options.split(" "))
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"


# The truststore each scenario's Java file names: as MSK's and Aiven's guides make them (keytool), so kprobe's
# reading of JKS and PKCS12 is held to what the Java client reads from the same file.
STORE_TYPES = {"tls": "JKS", "sasl": "PKCS12"}


def _keytool_truststore(ca_file: str, store_type: str, folder: Path) -> Path:
    store = folder / f"truststore.{store_type.lower()}"
    if not store.exists():
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "CARoot", "-file", ca_file, "-keystore",
                        str(store), "-storetype", store_type, "-storepass", "changeit"], check=True,
                       capture_output=True, timeout=60)
    return store


def _with_store(java: dict[str, str], store_type: str | None, folder: Path) -> dict[str, str]:
    """A PEM truststore setting turned into a keytool-made store of `store_type`, the rest kept.

    A keystore marked PKCS12-FROM-PEM becomes a PKCS12 file made by `openssl pkcs12 -export` from the
    lab's PEM key and chain, with a password, as a client's keystore is usually made.
    """
    if java.get("ssl.keystore.type") == "PKCS12-FROM-PEM":
        keystore = folder / "client-keystore.p12"
        if not keystore.exists():
            subprocess.run(["openssl", "pkcs12", "-export", "-in", java["ssl.keystore.location"], "-out",
                            str(keystore), "-passout", "pass:changeit", "-name", "client"], check=True,
                           capture_output=True, timeout=60)
        java = {**java, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
                "ssl.keystore.password": "changeit"}
    if store_type is None or java.get("ssl.truststore.type") != "PEM":
        return java
    store = _keytool_truststore(java["ssl.truststore.location"], store_type, folder)
    return {**java, "ssl.truststore.type": store_type, "ssl.truststore.location": str(store),
            "ssl.truststore.password": "changeit"}


SCENARIOS = ["listeners", "cloud", "three-brokers", "tls", "sasl", "scram", "oauth", "sni-ingress", "controllers",
             "dual-stack", "port-forward", "nodeport"]


# One unit, on one worker: the scenarios that bind fixed ports already join tests/test_docs_site.py's unit
# (conftest: a fixed-port lab's tests go together), and that test runs the stagings of every scenario here
# but scram. Split over two workers, the docs test started a copy of each lab the other worker had (seven
# labs, 36 s), and its own worker's later tests of those labs started them once more.
@pytest.mark.serial("agreement")
@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.labs(s)) for s in SCENARIOS])
def test_verdict_agrees_with_real_clients(scenario: str, lab_factory, tmp_path: Path, request) -> None:
    lab = start_once(lab_factory, scenario)
    _agree(scenario, lab, tmp_path, lambda: _start_next_lab(request, lab_factory))


# The thread that starts labs ahead lives as long as the process: a broker dies with the thread that
# started it (PR_SET_PDEATHSIG is the forking thread's, not the process's), and this thread outlives
# every lab, which the session stops before it exits.
_AHEAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-ahead")


def _start_next_lab(request: pytest.FixtureRequest, labs: dict) -> Future:
    """The next scenario's lab, started while this one's clients wait out their budgets.

    A case whose clients fail holds its scenario for the whole budget (10 to 30 s) with the CPU
    mostly idle, and a lab takes 2 to 6 s to start: the worker that runs this unit spent 37 of its
    200 s starting labs one after another. A lab that fails to start here is started again, and its
    failure reported, by the test that needs it.
    """
    items = request.session.items
    place = items.index(request.node) + 1
    following = items[place] if place < len(items) else None
    if following is None or getattr(following, "originalname", None) != request.node.originalname:
        return _AHEAD.submit(lambda: None)
    return _AHEAD.submit(start_once, labs, following.callspec.params["scenario"])


def _agree(scenario: str, lab: Any, tmp_path: Path, start_next: Callable[[], Future]) -> None:
    brokers = sorted(n.node_id for n in lab.nodes.values() if n.spec.role != "controller")
    cases = cases_for(scenario, lab)
    views = {view: _hosts(dict(records)) for view, records in lab.scenario.views.items()}
    views["every"] = sorted({line for lines in views.values() for line in lines})
    with system_network(tmp_path, {}, hosts=views["every"]) as ns:
        prefixes = {}
        for view, lines in views.items():
            hosts = tmp_path / f"hosts-{view}"
            hosts.write_text("".join(line + "\n" for line in lines))
            prefixes[view] = [*ns[:-1], str(hosts)]  # the same namespace recipe, this view's hosts file
        topic = _topic(lab, brokers, prefixes["every"])
        # Every process of a scenario at once, each a thread here. A client that fails waits out its budget, so
        # a pool of 15 ran the scenarios of many cases (tls: nine, 27 processes) in waves of budgets; started all
        # at once, nine TLS JVMs made the working ones' produce take 9.4 s of a 15 s budget. What costs CPU is a
        # Java client's start, so the clients start four at a time (real_clients.JAVA_STARTS) and then wait
        # together; librdkafka's and kprobe's, a Python process each, start beside them.
        with ThreadPoolExecutor(max_workers=3 * len(cases)) as pool:
            runs = []
            for i, case in enumerate(cases):
                prefix = prefixes[case.view]
                props = [arg for k, v in case.props.items() for arg in ("-X", f"{k}={v}")]
                java_file, java_props = None, case.java
                if case.java_file:
                    # bootstrap.servers from the file too: kprobe takes it there when no -b is given.
                    java_file = tmp_path / f"client-{i}.properties"
                    settings = _with_store(case.java, STORE_TYPES.get(scenario), tmp_path)
                    java_file.write_text(java_properties_text({"bootstrap.servers": case.bootstrap, **settings}))
                    props, java_props = ["--command-config", str(java_file)], {}
                target = [] if java_file else ["-b", case.bootstrap]
                saved = tmp_path / f"report-{i}.json"
                runs.append((case, saved,
                             pool.submit(kprobe, prefix, "probe", *target, *props, "--timeout", str(case.timeout_s),
                                         "--deadline", str(case.budget_ms // 1000 + case.probe_s), "--roundtrip", topic,
                                         "-o", str(saved)),
                             pool.submit(java_round_trip, prefix, lab.classpath, tmp_path, case.bootstrap, topic,
                                         len(brokers), budget_ms=case.budget_ms, props=java_props,
                                         properties_file=java_file, jvm=case.jvm),
                             pool.submit(librdkafka_round_trip, prefix, case.bootstrap, topic, len(brokers),
                                         budget_ms=case.budget_ms, props=case.props)))
            # What comes next (the next lab's start) overlaps the failing clients' waiting, once the working
            # ones, which start their JVMs at the same time, are done or half their budget has passed.
            wait([java for _, _, _, java, _ in runs], timeout=min(case.budget_ms for case in cases) / 2000)
            ahead = start_next()
            try:
                results = [(case, saved, verdict.result(), java.result(), rd.result())
                           for case, saved, verdict, java, rd in runs]
            finally:
                # Started before anything else here: the checks below run kprobe in this process, which
                # waits for the threads that appear meanwhile, and the teardown reads the session's labs.
                ahead.exception()
    problems = []
    table = []
    for case, saved, done, java, rd in results:
        report = validate(json.loads(saved.read_text()))
        # The saved report reads back as the run printed it, for every scenario and vantage. In this
        # process (tests/support/cli_runner.py): reading a file needs neither the namespace nor a child's start-up.
        shown = run_cli(["show", str(saved)])
        if shown.returncode != 0 or shown.stdout != done.stdout:
            problems.append(f"{scenario}/{case.view}/{case.name}: `kprobe show` of the saved report differs from "
                            f"what the probe printed: {shown.stderr or shown.stdout[:300]!r}")
        errors = [f for f in report["findings"] if f["severity"] == "error" and not f["code"].startswith("ROUNDTRIP_")]
        # Every broker an error concerns (`node_ids`: one finding may stand for several); one concerning no broker
        # in particular (a bootstrap, the cluster) names them all.
        named = {n for f in errors for n in f["node_ids"]} if all(f["node_ids"] for f in errors) else set(brokers)
        if not report["bootstraps"] or all(b["status"] != "ok" for b in report["bootstraps"]):
            named = set(brokers)  # no bootstrap answered: a client gets nowhere
        label = f"{scenario}/{case.view}/{case.name}"
        table.append(f"{label}: kprobe exit {done.returncode} in {report['duration_ms'] / 1000:.1f} s naming {sorted(named)} "
                     f"({', '.join(f['code'] for f in errors) or 'no errors'}); java {_lost(java, brokers)} "
                     f"({java.seconds:.1f} s), librdkafka {_lost(rd, brokers)} ({rd.seconds:.1f} s)"
                     + "".join(f"; bootstrap {b['address']} {b['status']} in {b['ms'] or 0:.0f} ms: {b['error']}"
                               for b in report["bootstraps"] if b["status"] != "ok"))
        # A broker whose endpoint belongs to a listener that advertises differently is reached or not by luck
        # (the client's metadata flips between two views, ENDPOINT_ADVERTISES_DIFFERENTLY): kprobe names it, and
        # its partitions are left out of the comparison either way.
        luck = {f["node_id"] for f in report["findings"] if f["code"] == "ENDPOINT_ADVERTISES_DIFFERENTLY"}
        expected = (named if done.returncode else set()) - luck
        for client in (java, rd):
            lost = set(_lost(client, brokers)) - luck
            spills = (any(client.client in SPILLS.get(f["code"], ()) for f in errors)
                      or (client.client == "java" and bool(errors))) and lost >= expected
            if lost != expected and not spills:
                problems.append(f"{label}: kprobe exit {done.returncode} naming {sorted(named)}, {client.client} lost "
                                f"the partitions led by {sorted(lost)} ({client.error or 'no error'})")
        # kprobe's own round trip (librdkafka, --timeout 2) loses what the librdkafka client lost, and never
        # contradicts the verdict here: ROUNDTRIP_DISAGREES is for cases no lab scenario is.
        trip = report["roundtrip"]
        if trip["status"] != "not_run":
            trip_lost = {brokers[p["partition"]] for p in trip["partitions"] if p["status"] != "ok"} - luck
            trip_spills = any("librdkafka" in SPILLS.get(f["code"], ()) for f in errors)
            if trip_lost != set(_lost(rd, brokers)) - luck and not (trip_spills and trip_lost >= expected):
                why = "; ".join(f"partition {p['partition']} {p['status']} after {p['roundtrip_ms'] or 0:.0f} ms: "
                                f"{p['error']}" for p in trip["partitions"] if p["status"] != "ok")
                problems.append(f"{label}: --roundtrip lost {sorted(trip_lost)}, the librdkafka client "
                                f"{_lost(rd, brokers)} (run {report['duration_ms']:.0f} ms; {why})")
        elif done.returncode != 3:
            problems.append(f"{label}: --roundtrip not run ({trip['error']}) although a bootstrap answered")
        # A round trip that could not start because no bootstrap answered says so (ROUNDTRIP_NOT_RUN); any other
        # round-trip finding is a verdict contradicted.
        trips = [f for f in report["findings"] if f["code"].startswith("ROUNDTRIP_")
                 and not (f["code"] == "ROUNDTRIP_NOT_RUN" and done.returncode == 3)]
        if trips:
            problems.append(f"{label}: {[f['message'] for f in trips]}")
    print("\n".join(table))  # shown with -s, or beside a failure
    assert not problems, "\n".join([*problems, "", *table])


def _lost(outcome: Outcome, brokers: list[int]) -> list[int]:
    """The brokers whose partition's record did not come back (partition i is led by brokers[i])."""
    return [b for i, b in enumerate(brokers) if i not in outcome.ok_partitions]
