"""An expired certificate at the bootstrap is BOOTSTRAP_TLS_FAILED with the cause `expired`.

Why this file: the rule was proven on plain data only (tests/findings/test_rules_bootstrap.py), so
nothing showed that a real handshake with an expired certificate reaches it: that OpenSSL's verify
code for it is the one kprobe/kafka/certs.py maps to `expired`, and that the connection carries it
through. The lab's brokers get certificates made at start and valid for days, so the certificate
here is made already expired (openssl's `ca -startdate/-enddate`, as the lab makes its
certificates with the openssl CLI) and served by the lab's own HTTPS server on 127.0.0.44: the
verdict is given in the TLS handshake, before any Kafka byte, so what answers after it does not
matter. A certificate from the same CA that is still valid, on the same kind of server, is the
control: it passes the handshake.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.kafka.certs import verify_failure
from kprobe.lab.certs import CertSpec, make_ca, make_cert
from kprobe.lab.http_server import LabHttpServer, tls_context

ADDRESS = "127.0.0.44"  # no lab scenario uses it


# -- pure: OpenSSL's verify codes in the user's terms ---------------------------------------------------

@pytest.mark.parametrize(("code", "failure"), [
    (10, "expired"),             # X509_V_ERR_CERT_HAS_EXPIRED
    (62, "hostname_mismatch"),   # X509_V_ERR_HOSTNAME_MISMATCH
    (64, "hostname_mismatch"),   # X509_V_ERR_IP_ADDRESS_MISMATCH
    (20, "untrusted"),           # X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY: the CA is not given
    (19, "untrusted"),           # X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
    (18, "untrusted"),           # X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: an ingress's default certificate
    (9, "untrusted"),            # X509_V_ERR_CERT_NOT_YET_VALID: no cause of its own; the chain's message says it
    (0, "untrusted"),
])
def test_verify_codes_map_to_the_causes_a_fix_is_written_for(code, failure):
    assert verify_failure(code) == failure


# -- a real handshake with an expired certificate ------------------------------------------------------

_CA_CONFIG = """\
[ca]
default_ca = lab
[lab]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
[any]
commonName = supplied
[server]
subjectAltName = DNS:expired.kprobe.test,IP:{address}
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
"""


def expired_keystore(directory: Path) -> Path:
    """Key + certificate valid in January 2020 only, signed by `lab-ca`: openssl's x509 takes no start date."""
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("01\n")
    (directory / "ca.cnf").write_text(_CA_CONFIG.format(address=ADDRESS))
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                  "expired.key", "-out", "expired.csr", "-subj", "/CN=expired.kprobe.test"],
                 ["ca", "-batch", "-config", "ca.cnf", "-cert", "lab-ca.pem", "-keyfile", "lab-ca.key", "-in",
                  "expired.csr", "-out", "expired.pem", "-notext", "-extensions", "server",
                  "-startdate", "20200101000000Z", "-enddate", "20200201000000Z"]):
        subprocess.run(["openssl", *args], cwd=directory, capture_output=True, check=True, timeout=60)
    keystore = directory / "expired.keystore.pem"
    keystore.write_text((directory / "expired.key").read_text() + (directory / "expired.pem").read_text()
                        + (directory / "lab-ca.pem").read_text())
    return keystore


@contextmanager
def served(keystore: Path) -> Iterator[str]:
    server = LabHttpServer(ADDRESS, {}, tls=tls_context(str(keystore)))
    try:
        yield f"{server.host}:{server.port}"
    finally:
        server.close()


def probe(bootstrap: str, ca: Path) -> tuple[int, dict]:
    done = run_cli(["probe", "-b", f"SSL://{bootstrap}", "-X", f"ssl.ca.location={ca}", "--timeout", "2", "--json"])
    return done.returncode, validate(json.loads(done.stdout))


def test_an_expired_bootstrap_certificate_says_expired(tmp_path):
    ca = make_ca(tmp_path, "lab-ca")
    with served(expired_keystore(tmp_path)) as bootstrap:
        code, data = probe(bootstrap, ca)
    assert code == 3
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["tls_failure"], boot["speaks_tls"]) == ("error", "expired", None), boot
    assert "certificate has expired" in boot["error"]  # OpenSSL's own words, verify code 10
    [finding] = data["findings"]
    assert (finding["code"], finding["severity"], finding["bootstrap"]) == ("BOOTSTRAP_TLS_FAILED", "error",
                                                                            bootstrap)
    assert f"Bootstrap {bootstrap} gave no metadata: its certificate has expired" in finding["message"]
    # The refused certificate is named, so the user knows which one to renew.
    assert f"names expired.kprobe.test, {ADDRESS}" in finding["message"]
    assert finding["fix"].startswith("Renew the broker certificate")


def test_the_same_server_with_a_valid_certificate_passes_the_handshake(tmp_path):
    """The control: same CA, same names, same server, dates that hold: no TLS failure (and no Kafka there)."""
    ca = make_ca(tmp_path, "lab-ca")
    valid = make_cert(tmp_path, "valid", CertSpec(("expired.kprobe.test", ADDRESS)))
    with served(valid.keystore) as bootstrap:
        code, data = probe(bootstrap, ca)
    [boot] = data["bootstraps"]
    assert code == 3 and boot["tls_failure"] is None, boot
    assert "BOOTSTRAP_TLS_FAILED" not in {f["code"] for f in data["findings"]}
