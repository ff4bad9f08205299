"""A client that reaches the bootstrap with the wrong security settings is told which ones the listener wants.

Against real Kafka 4.1 brokers (the `sasl` and `tls` labs): plaintext sent to a SASL listener reads, on its
own, "connection closed by the broker", which would send the user to the address and port although they are
right. So kprobe asks the listener on a second connection (ApiVersions, then
SaslHandshake, which a SASL listener answers with its mechanisms and a listener without SASL with
ILLEGAL_SASL_STATE) and names the security.protocol and mechanisms it wants; a listener that requires a
client certificate, or refuses the one sent, is named by the broker's TLS alert; and the lab's client
certificate, sent at the bootstrap and at every endpoint, passes. Each run's JSON is saved with -o while
its text is printed, and `kprobe show` of the saved report must print that text again.

Unit tests of the pieces that need no broker (the alert classifier, the one TLS context builder) are at
the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.kafka.connection import client_certificate_refusal
from kprobe.kafka.security import Security
from kprobe.kafka.tlscontext import TlsSettingsError, client_context
from kprobe.output.json_load import from_dict

NEVER = "address and port"  # the old advice, wrong for every case here: the address and port were right


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` in this process (tests/support/cli_runner.py), as a child would run: no child's start-up to wait for."""
    return run_cli(list(args), env={**os.environ, "NO_COLOR": "1"})


def probe(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """One run's exit code, its saved JSON report (validated), and its text; `show` must reprint the text."""
    path = tmp_path / f"r-{uuid.uuid4().hex[:8]}.json"
    done = kprobe("probe", "--timeout", "2", *args, "-o", str(path))
    data = validate(json.loads(path.read_text()))
    shown = kprobe("show", str(path))
    assert (shown.returncode, shown.stdout) == (0, done.stdout), shown.stderr
    # The new fields survive the reader (kprobe show, diff, aggregate all read through it).
    loaded = from_dict(data).bootstraps
    assert [(b.wanted_protocol, b.tls_alert, b.tls_failure, b.sasl_mechanisms) for b in loaded] == [
        (b["wanted_protocol"], b["tls_alert"], b["tls_failure"], tuple(b["sasl_mechanisms"]))
        for b in data["bootstraps"]
    ]
    return done.returncode, data, done.stdout


def one_finding(data: dict[str, Any], code: str) -> dict[str, Any]:
    """The run's only finding, which must be `code` and never send the user to the address and port."""
    assert [f["code"] for f in data["findings"]] == [code], data["findings"]
    found = data["findings"][0]
    assert NEVER not in found["message"] and NEVER not in found["fix"], found
    return found


def learnt(data: dict[str, Any]) -> tuple[Any, ...]:
    [boot] = data["bootstraps"]
    return boot["status"], boot["protocol"], boot["wanted_protocol"], boot["sasl_mechanisms"]


def sasl_settings(lab: Any, protocol: str) -> list[str]:
    return ["-X", f"security.protocol={protocol}", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice",
            "-X", f"sasl.password={lab.passwords['alice']}"]


# -- security.protocol: each listener says which one it wants -------------------------------------------

def test_plaintext_to_a_sasl_plaintext_listener(sasl_lab, tmp_path):
    """The listener answers ApiVersions, then closes at Metadata; asked again, SaslHandshake lists PLAIN."""
    code, data, text = probe(tmp_path, "-b", sasl_lab.real_endpoint("SASL_PLAIN"))
    assert code == 3
    assert learnt(data) == ("error", "PLAINTEXT", "SASL_PLAINTEXT", ["PLAIN"])
    found = one_finding(data, "SECURITY_PROTOCOL_MISMATCH")
    assert "(security.protocol=PLAINTEXT) to a SASL_PLAINTEXT listener" in found["message"]
    assert "it listed its SASL mechanisms (PLAIN)" in found["message"]
    assert found["fix"].startswith("Set security.protocol=SASL_PLAINTEXT and sasl.mechanism=PLAIN")
    assert "SECURITY_PROTOCOL_MISMATCH" in text


def test_sasl_to_a_plaintext_listener(sasl_lab, tmp_path):
    """Measured: Kafka answers SaslHandshake on a PLAINTEXT listener with ILLEGAL_SASL_STATE and no mechanisms."""
    code, data, _ = probe(tmp_path, "-b", sasl_lab.real_endpoint("INTERNAL"),
                          *sasl_settings(sasl_lab, "SASL_PLAINTEXT"))
    assert code == 3
    assert learnt(data) == ("error", "SASL_PLAINTEXT", "PLAINTEXT", [])
    found = one_finding(data, "SECURITY_PROTOCOL_MISMATCH")
    assert "(security.protocol=SASL_PLAINTEXT) to a PLAINTEXT listener" in found["message"]
    assert "ILLEGAL_SASL_STATE" in found["message"]
    assert found["fix"].startswith("Set security.protocol=PLAINTEXT, without the sasl.* settings")
    assert sasl_lab.passwords["alice"] not in json.dumps(data)


def test_ssl_to_a_sasl_ssl_listener(sasl_lab, tmp_path):
    """The same as plaintext to SASL_PLAINTEXT, inside TLS: the second connection asks inside TLS too."""
    code, data, _ = probe(tmp_path, "-b", sasl_lab.bootstrap("SASL_SSL_PLAIN"), "--nameserver",
                          sasl_lab.nameserver("clients"), "-X", "security.protocol=SSL",
                          "-X", f"ssl.ca.location={sasl_lab.ca_file}")
    assert code == 3
    assert learnt(data) == ("error", "SSL", "SASL_SSL", ["PLAIN"])
    found = one_finding(data, "SECURITY_PROTOCOL_MISMATCH")
    assert "(security.protocol=SSL) to a SASL_SSL listener" in found["message"]
    assert found["fix"].startswith("Set security.protocol=SASL_SSL and sasl.mechanism=PLAIN")


def test_sasl_ssl_to_an_ssl_listener(tls_lab, tmp_path):
    code, data, _ = probe(tmp_path, "-b", tls_lab.bootstrap("SSL_GOOD"), "--nameserver", tls_lab.nameserver("clients"),
                          "-X", f"ssl.ca.location={tls_lab.ca_file}", "-X", "security.protocol=SASL_SSL",
                          "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=unused")
    assert code == 3
    assert learnt(data) == ("error", "SASL_SSL", "SSL", [])
    found = one_finding(data, "SECURITY_PROTOCOL_MISMATCH")
    assert "(security.protocol=SASL_SSL) to an SSL listener" in found["message"]
    assert found["fix"].startswith("Set security.protocol=SSL, without the sasl.* settings")


def test_plaintext_to_a_sasl_ssl_listener_names_tls_and_the_mechanism(sasl_lab, tmp_path):
    """A TLS answer to plaintext leaves SSL or SASL_SSL to guess; the second connection tells."""
    code, data, _ = probe(tmp_path, "-b", sasl_lab.bootstrap("SASL_SSL_PLAIN"), "--nameserver",
                          sasl_lab.nameserver("clients"))
    assert code == 3
    assert learnt(data) == ("error", "PLAINTEXT", "SASL_SSL", ["PLAIN"])
    assert data["bootstraps"][0]["speaks_tls"] is True
    found = one_finding(data, "SECURITY_PROTOCOL_MISMATCH")
    assert found["fix"].startswith("Set security.protocol=SASL_SSL and sasl.mechanism=PLAIN")


# -- mutual TLS: the lab's SSL_MTLS listener requires a client certificate from the lab CA --------------

def mtls(lab: Any, *extra: str) -> list[str]:
    return ["-b", lab.bootstrap("SSL_MTLS"), "--nameserver", lab.nameserver("clients"), "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={lab.ca_file}", *extra]


def test_tls_without_the_client_certificate_the_listener_requires(tls_lab, tmp_path):
    """Measured: Kafka 4.1.1 on Java 17 sends "bad certificate", after a TLS 1.3 handshake the client completed."""
    code, data, _ = probe(tmp_path, *mtls(tls_lab))
    assert code == 3
    [boot] = data["bootstraps"]
    assert (boot["tls_failure"], boot["tls_alert"]) == ("client_certificate_required", "bad certificate")
    found = one_finding(data, "CLIENT_CERTIFICATE_REQUIRED")
    assert "the listener requires a client certificate" in found["message"]
    assert '"bad certificate"' in found["message"]
    assert "ssl.keystore.location" in found["fix"] and "ssl.certificate.location and ssl.key.location" in found["fix"]


def test_a_client_certificate_from_another_ca_is_refused(tls_lab, tmp_path):
    other = tls_lab.certs["client-other-ca"]
    code, data, _ = probe(tmp_path, *mtls(tls_lab, "-X", f"ssl.certificate.location={other.certificate}",
                                          "-X", f"ssl.key.location={other.key}"))
    assert code == 3
    [boot] = data["bootstraps"]
    assert (boot["tls_failure"], boot["tls_alert"]) == ("client_certificate_refused", "certificate unknown")
    found = one_finding(data, "CLIENT_CERTIFICATE_REFUSED")
    assert "refused the client certificate sent" in found["message"]
    assert "truststore" in found["fix"]


def test_the_client_certificate_is_sent_at_the_bootstrap_and_at_every_endpoint(tls_lab, tmp_path):
    """Exit 0: the bootstrap answers, and at the advertised endpoint both the TLS check and the identity check
    (a Kafka request, which the listener answers only past its client-certificate check) pass."""
    code, data, _ = probe(tmp_path, *mtls(tls_lab, "-X", f"ssl.certificate.location={tls_lab.client_cert_file}",
                                          "-X", f"ssl.key.location={tls_lab.client_key_file}"))
    assert (code, data["findings"]) == (0, [])
    [endpoint] = data["endpoints"]
    assert (endpoint["status"], endpoint["tls"]["status"], endpoint["identity"]["status"]) == ("reachable", "ok",
                                                                                              "match")


def test_an_advertised_endpoint_that_requires_a_client_certificate(tls_lab, tmp_path):
    """The bootstrap takes no client certificate; its advertised endpoint leads (--connect-to, as a NAT rule
    would) to the listener that requires one. The TLS 1.3 handshake there succeeds, so only the identity
    request meets the broker's alert: named at that endpoint, not left as "identity not checked"."""
    good = tls_lab.bootstrap("SSL_GOOD")
    mtls_endpoint = tls_lab.real_endpoint("SSL_MTLS")
    code, data, _ = probe(tmp_path, "-b", good, "--nameserver", tls_lab.nameserver("clients"), "-X",
                          "security.protocol=SSL", "-X", f"ssl.ca.location={tls_lab.ca_file}",
                          "--connect-to", f"{good}={mtls_endpoint}")
    assert code == 1
    [endpoint] = data["endpoints"]
    assert (endpoint["tls"]["status"], endpoint["identity"]["tls_failure"]) == ("ok", "client_certificate_required")
    assert [f["code"] for f in data["findings"]] == ["CLIENT_CERTIFICATE_REQUIRED", "REMAPPED_ENDPOINTS"]
    found = data["findings"][0]
    assert (found["node_id"], found["endpoint"]) == (0, good)
    assert "requires a client certificate" in found["message"] and "ssl.keystore.location" in found["fix"]


def test_the_client_certificate_from_memory_never_reaches_the_output(tls_lab, tmp_path):
    """ssl.certificate.pem and ssl.key.pem (what a Java keystore becomes): loaded through a memory file."""
    key, certificate = Path(tls_lab.client_key_file).read_text(), Path(tls_lab.client_cert_file).read_text()
    code, data, text = probe(tmp_path, *mtls(tls_lab, "-X", f"ssl.certificate.pem={certificate}",
                                             "-X", f"ssl.key.pem={key}"))
    assert (code, data["findings"]) == (0, [])
    body = key.strip().splitlines()[1]
    assert body not in json.dumps(data) and body not in text


# -- the pieces, without a broker -------------------------------------------------------------------------

@pytest.mark.parametrize(("reason", "sent", "expected"), [
    ("SSLV3_ALERT_BAD_CERTIFICATE", False, ("client_certificate_required", "bad certificate")),  # Kafka, measured
    ("TLSV13_ALERT_CERTIFICATE_REQUIRED", False, ("client_certificate_required", "certificate required")),
    ("SSLV3_ALERT_CERTIFICATE_UNKNOWN", True, ("client_certificate_refused", "certificate unknown")),  # measured
    ("TLSV1_ALERT_UNKNOWN_CA", True, ("client_certificate_refused", "unknown ca")),
    ("SSLV3_ALERT_BAD_CERTIFICATE", True, ("client_certificate_refused", "bad certificate")),
    ("TLSV1_ALERT_UNKNOWN_CA", False, None),  # no certificate sent: not about one
    ("SSLV3_ALERT_HANDSHAKE_FAILURE", False, None),  # a cipher or version mismatch as often as a certificate
    ("UNEXPECTED_EOF_WHILE_READING", False, None),
    (None, False, None),
])
def test_which_tls_alerts_are_about_the_client_certificate(reason, sent, expected):
    assert client_certificate_refusal(reason, sent) == expected


def test_one_context_per_setting_reused_and_rebuilt_when_the_file_changes(tmp_path):
    import ssl

    from kprobe.lab.certs import make_ca

    ca = make_ca(tmp_path, "ca")
    security = Security(protocol="SSL", ssl_cafile=str(ca))
    first = client_context(security)
    assert client_context(Security(protocol="SSL", ssl_cafile=str(ca))) is first
    assert client_context(security, verify=False) is not first
    assert first.check_hostname and first.verify_mode == ssl.CERT_REQUIRED
    loose = client_context(security, verify=False)
    assert not loose.check_hostname and loose.verify_mode == ssl.CERT_NONE
    ca.write_bytes(ca.read_bytes() + b"\n")  # a renewed file: read again
    assert client_context(security) is not first


def test_a_key_that_cannot_be_loaded_is_named_without_its_secret(tmp_path):
    secret = "s3cret-key-password"
    bad = Security(protocol="SSL", ssl_certificate_pem="-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----",
                   ssl_key_pem="-----BEGIN PRIVATE KEY-----\nQUJDREVGRw==\n-----END PRIVATE KEY-----",
                   ssl_key_password=secret)
    with pytest.raises(TlsSettingsError) as raised:
        client_context(bad)
    assert "ssl.certificate.pem and ssl.key.pem" in str(raised.value)
    assert secret not in str(raised.value) and "QUJDREVGRw" not in str(raised.value)
    with pytest.raises(TlsSettingsError, match=r"ssl\.key\.pem is missing"):
        client_context(Security(protocol="SSL", ssl_certificate_pem="x"))
    with pytest.raises(TlsSettingsError, match=r"cannot load ssl\.ca\.location"):
        client_context(Security(protocol="SSL", ssl_cafile=str(tmp_path / "missing.pem")))
