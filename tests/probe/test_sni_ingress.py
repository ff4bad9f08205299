"""TLS as Kubernetes ingresses and OpenShift routes present it, against the lab's `sni-ingress` scenario.

Three real brokers sit behind one real SNI-routing TLS passthrough proxy (HAProxy, Debian's
package): every advertised name resolves to the proxy's one address and port, so the *only*
thing that tells the proxy which broker a connection is for is the server name (SNI) in the
ClientHello. That makes these runs the proof that kprobe sends the advertised host as SNI on
each of its three TLS connections: the bootstrap (without SNI it would reach the default server
and get no metadata), the identity check (each endpoint answering as its own node) and the TLS
check (the broker's certificate, not the proxy's default one). A kprobe that dropped SNI on any
of them fails here: the last test shows what answers without it.

The ROUTE_MISSING listener stages the classic ingress mistake: broker 2's advertised name has no
route, so the proxy's default server answers with ingress-nginx's "Kubernetes Ingress Controller
Fake Certificate" (which the lab makes, self-signed, as the controller does) and HTTP.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess

from cli_runner import run_cli
from report_check import validate

from kprobe.kafka.exchanges import fetch_and_identify
from kprobe.kafka.security import Security
from kprobe.kafka.wire import WireError
from kprobe.lab.sni_proxy import DEFAULT_BODY

DOMAIN = "kafka.apps.kprobe.test"
PARTNERS = "partners.kafka.apps.kprobe.test"
FAKE = "Kubernetes Ingress Controller Fake Certificate"


def probe(lab, listener: str, *extra: str) -> tuple[int, dict]:
    """`kprobe probe --json` through the proxy, as a client on the internet would bootstrap."""
    done = run_cli(["probe", "--json", "--timeout", "3", "-b", "SSL://" + lab.bootstrap(listener),
                    "--nameserver", lab.nameserver("internet"), "-X", f"ssl.ca.location={lab.ca_file}", *extra])
    return done.returncode, validate(json.loads(done.stdout))


def proxy(lab) -> tuple[str, int]:
    ingress = lab.proxies["ingress"]
    return ingress.spec.address, ingress.port


def test_every_broker_answers_through_the_proxy_under_its_own_name(sni_ingress_lab):
    lab = sni_ingress_lab
    address, port = proxy(lab)
    code, data = probe(lab, "INGRESS")
    assert code == 0, data["findings"]
    [boot] = data["bootstraps"]
    assert boot["status"] == "ok" and boot["address"] == f"bootstrap.{DOMAIN}:{port}"
    rows = [(e["node_id"], e["host"], e["port"], e["dns"]["addresses"], e["identity"]["status"],
             e["identity"]["node_id"], e["tls"]["status"]) for e in data["endpoints"]]
    # One address and one port for all three: only the SNI can have sent each to its own broker.
    assert rows == [(n, f"broker-{n}.{DOMAIN}", port, [address], "match", n, "ok") for n in range(3)]
    for e in data["endpoints"]:
        assert e["host"] in e["tls"]["names"] and e["tls"]["trusted"] and e["tls"]["hostname_ok"]
        assert e["tls"]["subject"] != FAKE
    assert data["findings"] == [] and data["summary"]["status"] == "ok"


def test_a_name_without_a_route_gets_the_default_certificate_finding(sni_ingress_lab):
    lab = sni_ingress_lab
    _, port = proxy(lab)
    code, data = probe(lab, "ROUTE_MISSING")
    assert code == 1
    by_node = {e["node_id"]: e for e in data["endpoints"]}
    for n in (0, 1):  # their routes exist: SNI takes each to its broker
        assert (by_node[n]["identity"]["status"], by_node[n]["identity"]["node_id"]) == ("match", n)
        assert by_node[n]["tls"]["status"] == "ok"
    unrouted = by_node[2]
    assert unrouted["host"] == f"broker-2.{PARTNERS}"
    assert unrouted["tls"]["subject"] == FAKE and unrouted["tls"]["issuer"] == FAKE
    assert unrouted["tls"]["names"] == ["ingress.local"] and unrouted["tls"]["sans"] == ["DNS:ingress.local"]
    assert unrouted["identity"]["status"] == "not_kafka"  # past the certificate: the default server's HTTP
    [finding] = [f for f in data["findings"] if f["code"] == "TLS_INGRESS_DEFAULT_CERTIFICATE"]
    assert (finding["severity"], finding["node_id"], finding["endpoint"]) == ("error", 2, f"broker-2.{PARTNERS}:{port}")
    assert f"no route for broker-2.{PARTNERS}" in finding["message"]
    assert f"subject {FAKE}, names ingress.local, issuer {FAKE}" in finding["message"]
    assert f"Ingress rule with host broker-2.{PARTNERS}" in finding["fix"]
    # The default certificate is the cause; TLS_UNTRUSTED would send the user to their CA file instead.
    assert {(f["code"], f["node_id"]) for f in data["findings"]} == {
        ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2), ("ENDPOINT_NOT_KAFKA", 2)}


def test_the_text_report_names_the_missing_route(sni_ingress_lab):
    lab = sni_ingress_lab
    done = run_cli(["probe", "--no-color", "--timeout", "3", "-b", "SSL://" + lab.bootstrap("ROUTE_MISSING"),
                    "--nameserver", lab.nameserver("internet"), "-X", f"ssl.ca.location={lab.ca_file}"])
    assert done.returncode == 1
    assert "TLS_INGRESS_DEFAULT_CERTIFICATE" in done.stdout and FAKE in done.stdout


def test_the_default_server_is_what_ingress_nginx_shows(sni_ingress_lab):
    """The lab's default route, read as any client would: the fake certificate, then HTTP 404."""
    address, port = proxy(sni_ingress_lab)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((address, port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname=f"broker-2.{PARTNERS}") as tls:
        der = tls.getpeercert(binary_form=True)
        tls.sendall(f"GET / HTTP/1.1\r\nHost: broker-2.{PARTNERS}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := tls.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 404") and DEFAULT_BODY.encode() in answer
    pem = ssl.DER_cert_to_PEM_cert(der)
    text = subprocess.run(["openssl", "x509", "-noout", "-subject", "-issuer", "-ext", "subjectAltName"],
                          input=pem, capture_output=True, text=True, check=True).stdout
    assert f"subject=O = Acme Co, CN = {FAKE}" in text and f"issuer=O = Acme Co, CN = {FAKE}" in text
    assert "DNS:ingress.local" in text


def test_without_sni_every_connection_lands_on_the_default_server(sni_ingress_lab):
    """What kprobe would see if it sent no SNI: the same address and port, the proxy's default server.

    This is why the healthy run above proves SNI: drop it from the identity check (here the wire
    client with an IP as its server name, for which no SNI is sent) and broker 0's own endpoint
    answers HTTP behind the fake certificate instead of Kafka as node 0.
    """
    lab = sni_ingress_lab
    address, port = proxy(lab)
    loose = Security(protocol="SSL", ssl_cafile=lab.ca_file, ssl_verify=False, ssl_verify_hostname=False)
    meta, node_id, _, _ = fetch_and_identify(address, port, timeout=3, security=loose,
                                          server_hostname=f"broker-0.{DOMAIN}", topics=[], expected=0)
    assert node_id == 0 and len(meta.brokers) == 3
    try:
        fetch_and_identify(address, port, timeout=3, security=loose, server_hostname=address, topics=[], expected=0)
    except WireError as exc:
        assert exc.kind == "protocol", exc  # bytes that are not Kafka: the default server's HTTP answer
    else:
        raise AssertionError("without SNI the proxy still reached a broker")
    ctx = ssl.create_default_context(cafile=lab.ca_file)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    seen = {}
    for sni in (f"broker-1.{DOMAIN}", None):
        with socket.create_connection((address, port), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=sni) as t:
            seen[sni] = ssl.DER_cert_to_PEM_cert(t.getpeercert(binary_form=True))
    assert seen[f"broker-1.{DOMAIN}"] != seen[None]
    assert FAKE in _subject_of(seen[None]) and FAKE not in _subject_of(seen[f"broker-1.{DOMAIN}"])


def _subject_of(pem: str) -> str:
    return subprocess.run(["openssl", "x509", "-noout", "-subject"], input=pem, capture_output=True, text=True,
                          check=True).stdout
