"""An advertised IP address against a certificate that holds it only as a DNS name (TLS_SAN_TYPE_MISMATCH).

Why this file: kprobe once flattened a certificate's DNS and IP subjectAltName entries into one
list of names and matched an advertised IP against any entry that parsed as one, so a
certificate with `DNS:127.0.0.41` passed for 127.0.0.41. Real clients disagree: Java's
HostnameChecker and OpenSSL (librdkafka) match an IP address only against IP-type entries. The
pure table pins kprobe's matching to theirs; the lab runs show the finding on a real broker (the
`tls` lab's SSL_IP_AS_DNS listener); and the last two tests ask the real clients themselves, the
JDK and librdkafka, on the same certificate, with the lab's SSL_GOOD listener (whose certificate
has `IP:127.0.0.41`) as the control that the address itself is fine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.kafka.certs import cert_names, cert_sans, hostname_matches

IP = "127.0.0.41"  # the tls lab's broker


@pytest.mark.parametrize(("host", "sans", "cn", "matches"), [
    ("10.0.0.5", ("IP:10.0.0.5",), None, True),
    ("10.0.0.5", ("DNS:10.0.0.5",), None, False),                 # the type decides, not the text
    ("10.0.0.5", (), "10.0.0.5", False),                          # an IP never falls back to the CN
    ("10.0.0.5", ("DNS:broker.example", "IP:10.0.0.6"), None, False),
    ("2001:db8::5", ("IP:2001:db8:0:0:0:0:0:5",), None, True),    # one address, two spellings
    ("[2001:db8::5]", ("IP:2001:db8::5",), None, True),
    ("broker.example", ("DNS:broker.example",), None, True),
    ("Broker.Example.", ("DNS:broker.example",), None, True),
    ("broker.example", ("DNS:*.example",), None, True),
    ("a.broker.example", ("DNS:*.example",), None, False),        # a wildcard covers one label
    ("broker.example", ("IP:10.0.0.5",), "broker.example", True),  # no DNS entry: the CN counts (Java, OpenSSL)
    ("broker.example", ("DNS:other.example",), "broker.example", False),  # a DNS entry: the CN does not
])
def test_hostname_matching_follows_java_and_openssl(host, sans, cn, matches):
    assert hostname_matches(host, sans, cn) is matches


def test_cert_sans_keeps_the_type_the_names_drop():
    """The ssl module's view of a certificate (getpeercert), as the TLS step reads it."""
    cert = {"subject": ((("commonName", "broker.example"),),),
            "subjectAltName": (("DNS", "broker.example"), ("DNS", "10.0.0.5"), ("IP Address", "2001:DB8:0:0:0:0:0:5\n"),
                               ("email", "ops@example.com"))}
    assert cert_sans(cert) == ("DNS:broker.example", "DNS:10.0.0.5", "IP:2001:db8::5")
    assert cert_names(cert) == ("broker.example", "10.0.0.5", "2001:db8::5")
    assert cert_names({"subject": ((("commonName", "10.0.0.5"),),)}) == ("10.0.0.5",)  # no SAN: the CN


def probe(lab, listener: str, *extra: str) -> tuple[int, dict]:
    done = run_cli(["probe", "--json", "--timeout", "3", "-b", "SSL://" + lab.bootstrap(listener),
                    "--nameserver", lab.nameserver("clients"), "-X", f"ssl.ca.location={lab.ca_file}", *extra])
    return done.returncode, validate(json.loads(done.stdout))


def test_an_ip_held_as_a_dns_name_is_called_out(tls_lab):
    code, data = probe(tls_lab, "SSL_IP_AS_DNS")
    assert code == 1
    [ep] = data["endpoints"]
    assert ep["host"] == IP and ep["identity"]["status"] == "match"
    assert ep["tls"]["status"] == "hostname_mismatch" and ep["tls"]["trusted"] and ep["tls"]["hostname_ok"] is False
    assert ep["tls"]["sans"] == ["DNS:broker.tls.kprobe.test", f"DNS:{IP}"]
    [finding] = data["findings"]  # it replaces TLS_HOSTNAME_MISMATCH: one cause, one finding
    assert (finding["code"], finding["severity"], finding["node_id"]) == ("TLS_SAN_TYPE_MISMATCH", "error", 0)
    assert f"only as a DNS-type subjectAltName entry (DNS:{IP}), not as an IP address entry (IP:{IP})" \
        in finding["message"]
    assert f"No subject alternative names matching IP address {IP} found" in finding["message"]
    assert f"subjectAltName=IP:{IP}" in finding["fix"] and "(DNS names: broker.tls.kprobe.test)" in finding["fix"]


def test_with_the_name_check_off_it_is_a_warning(tls_lab):
    code, data = probe(tls_lab, "SSL_IP_AS_DNS", "-X", "ssl.endpoint.identification.algorithm=none")
    assert code == 0
    assert [(f["code"], f["severity"]) for f in data["findings"]] == [("TLS_SAN_TYPE_MISMATCH", "warning")]


def test_an_ip_held_as_an_ip_entry_is_no_type_mismatch(tls_lab):
    """SSL_OTHER_CA advertises the same address, with `IP:127.0.0.41` in an untrusted chain: only the chain fails."""
    _, data = probe(tls_lab, "SSL_FORWARD")
    [ep] = data["endpoints"]
    assert ep["host"] == IP and f"IP:{IP}" in ep["tls"]["sans"] and ep["tls"]["hostname_ok"] is True
    tls_codes = [f["code"] for f in data["findings"] if f["code"].startswith("TLS_")]
    assert tls_codes == ["TLS_UNTRUSTED"]  # (and the port hint: it is the bootstrap's address on another port)


def _port(lab, listener: str) -> int:
    return lab.listener(listener).port


JAVA_CHECK = textwrap.dedent("""
    import java.io.FileInputStream;
    import java.security.KeyStore;
    import java.security.cert.CertificateFactory;
    import javax.net.ssl.*;

    // What a Kafka Java client checks (ssl.endpoint.identification.algorithm=https, its default): the JDK's
    // HostnameChecker, through endpoint identification "HTTPS", against the advertised host.
    public class SanCheck {
        public static void main(String[] args) throws Exception {
            KeyStore trust = KeyStore.getInstance("PKCS12");
            trust.load(null, null);
            trust.setCertificateEntry("ca", CertificateFactory.getInstance("X.509")
                .generateCertificate(new FileInputStream(args[0])));
            TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
            tmf.init(trust);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            for (int i = 2; i < args.length; i++) {
                try (SSLSocket s = (SSLSocket) ctx.getSocketFactory().createSocket(args[1], Integer.parseInt(args[i]))) {
                    SSLParameters p = s.getSSLParameters();
                    p.setEndpointIdentificationAlgorithm("HTTPS");
                    s.setSSLParameters(p);
                    s.startHandshake();
                    System.out.println(args[i] + " OK");
                } catch (SSLHandshakeException e) {
                    System.out.println(args[i] + " " + e.getMessage());
                }
            }
        }
    }
""")


def test_the_jdk_refuses_what_kprobe_calls_a_type_mismatch(tls_lab, tmp_path):
    source = tmp_path / "SanCheck.java"
    source.write_text(JAVA_CHECK)
    bad, good = _port(tls_lab, "SSL_IP_AS_DNS"), _port(tls_lab, "SSL_GOOD")
    done = subprocess.run(["java", str(source), tls_lab.ca_file, IP, str(bad), str(good)], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.splitlines() == [f"{bad} No subject alternative names matching IP address {IP} found",
                                        f"{good} OK"]


LIBRDKAFKA_CHECK = textwrap.dedent("""
    import sys
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": sys.argv[1], "security.protocol": "SSL", "ssl.ca.location": sys.argv[2],
                         "debug": "security"})
    try:
        admin.list_topics(timeout=2)
        print("metadata answered over the verified connection", file=sys.stderr)
    except Exception:
        pass  # the verdict is in librdkafka's own log lines, on stderr
""")


def test_librdkafka_refuses_it_too(tls_lab):
    """librdkafka (confluent-kafka) bootstrapping at the advertised IP: the handshake fails, with its misleading hint.

    Judged on librdkafka's log of the bootstrap connection's handshake, not on whether metadata
    came back: SSL_GOOD advertises a name this machine does not resolve, and librdkafka then often
    drops the bootstrap before list_topics returns (the design notes, section 7). When the answer
    does come back, it may come within 10 ms, and then the debug line of the verification is often
    never printed (the client is destroyed first; half of 40 runs on a busy machine): an answer
    over a connection that verifies certificates shows the verification as well.
    """
    def client_log(listener: str) -> str:
        return subprocess.run([sys.executable, "-c", LIBRDKAFKA_CHECK, f"{IP}:{_port(tls_lab, listener)}",
                               tls_lab.ca_file], capture_output=True, text=True, timeout=60, check=True).stderr

    refused = client_log("SSL_IP_AS_DNS")
    assert "SSL handshake failed" in refused and "certificate verify failed" in refused
    assert "ssl.ca.location" in refused and "Broker SSL certificate verified" not in refused
    assert "metadata answered" not in refused
    control = client_log("SSL_GOOD")  # IP:127.0.0.41 in its certificate: the same address, verified
    assert ("Broker SSL certificate verified" in control
            or "metadata answered over the verified connection" in control), control[-3000:]
    assert "certificate verify failed" not in control
