"""Bootstrap addresses that gave no metadata (kprobe/findings/bootstrap.py), proven on plain data.

Why pure: the lab stages a refused port and a wrong password, but not a name that resolves for
the broker's network only, nor a mix of a dead and a live bootstrap in every variant; the
message must also say whether clients can still start elsewhere, which depends on the others.
"""

from __future__ import annotations

import pytest
from observations import KAFKA0_DOCKER_IP, Case, boot, case, check, dead_boot, endpoint, params

from kprobe.findings.diagnose import diagnose
from kprobe.records import replace

BOB = "kafka0:29092"  # LISTENER_BOB, for clients inside the Docker network
FRED = "localhost:9092"  # LISTENER_FRED through the port Docker publishes on the host

BOB_HEALTHY = boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka0", 29092)], node_id=0)
BOB_ENDPOINT = endpoint(0, "kafka0", 29092, BOB, dns=[KAFKA0_DOCKER_IP])
FRED_FROM_HOST = boot(FRED, connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)], node_id=0)
FRED_ENDPOINT = endpoint(0, "localhost", 9092, FRED, dns=["127.0.0.1"])

CASES: list[Case] = [
    case(
        "bob-from-the-docker-host-name-does-not-resolve",
        [dead_boot(BOB, "dns_failed", "kafka0: Name or service not known")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "its name does not resolve from here"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "(kafka0: Name or service not known)"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "No client can start from here"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "Use a name this network resolves")],
    ),
    case(
        "one-dead-bootstrap-beside-one-that-answers-is-dead-weight",
        [dead_boot("localhost:9093", "refused", "ECONNREFUSED: Connection refused"), FRED_FROM_HOST],
        [FRED_ENDPOINT],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "the connection was refused"),
              ("BOOTSTRAP_UNREACHABLE", None, "message", "dead weight in bootstrap.servers"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "against the broker's `listeners`")],
        never_says=[("BOOTSTRAP_UNREACHABLE", None, "message", "No client can start")],
    ),
    case(
        "aws-public-name-firewalled-times-out",
        [dead_boot("ec2-34-211-52-10.us-west-2.compute.amazonaws.com:9092", "timeout", "timed out")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "did not answer in time"),
              ("BOOTSTRAP_UNREACHABLE", None, "fix", "that the port is open")],
    ),
    case(
        "tls-bootstrap-without-the-ca",
        [dead_boot("broker.tls.kprobe.test:9093", "error",
                   "TLS certificate not accepted: unable to get local issuer certificate (certificate subject "
                   "broker.tls.kprobe.test, names broker.tls.kprobe.test, issuer kprobe test CA)", protocol="SSL",
                   tls_failure="untrusted")],
        [],
        [("BOOTSTRAP_TLS_FAILED", "error", None, None)],
        says=[("BOOTSTRAP_TLS_FAILED", None, "message", "does not verify against the trusted CAs"),
              ("BOOTSTRAP_TLS_FAILED", None, "message", "names broker.tls.kprobe.test"),
              ("BOOTSTRAP_TLS_FAILED", None, "fix", "ssl.ca.location")],
        never_says=[("BOOTSTRAP_TLS_FAILED", None, "message", "did not answer in time")],
    ),
    case(
        "tls-bootstrap-by-a-name-the-certificate-lacks",
        [dead_boot("kafka-tls.internal.kprobe.test:9093", "error",
                   "TLS certificate not accepted: Hostname mismatch, certificate is not valid for "
                   "'kafka-tls.internal.kprobe.test'. (certificate subject broker.tls.kprobe.test, names "
                   "broker.tls.kprobe.test, 127.0.0.41, issuer kprobe lab lab-ca)", protocol="SSL",
                   tls_failure="hostname_mismatch")],
        [],
        [("BOOTSTRAP_TLS_FAILED", "error", None, None)],
        says=[("BOOTSTRAP_TLS_FAILED", None, "message", "does not name the host you bootstrapped with"),
              ("BOOTSTRAP_TLS_FAILED", None, "fix", "subjectAltName")],
    ),
    case(
        "tls-bootstrap-certificate-expired",
        [dead_boot("broker.tls.kprobe.test:9093", "error", "TLS certificate not accepted: certificate has expired",
                   protocol="SSL", tls_failure="expired")],
        [],
        [("BOOTSTRAP_TLS_FAILED", "error", None, None)],
        says=[("BOOTSTRAP_TLS_FAILED", None, "message", "has expired"),
              ("BOOTSTRAP_TLS_FAILED", None, "fix", "Renew the broker certificate")],
    ),
    case(
        "tls-bootstrap-handshake-refused",
        [dead_boot("broker.tls.kprobe.test:9093", "error",
                   "TLS handshake failed: [SSL: TLSV1_ALERT_PROTOCOL_VERSION] tlsv1 alert protocol version",
                   protocol="SSL", tls_failure="handshake_failed")],
        [],
        [("BOOTSTRAP_TLS_FAILED", "error", None, None)],
        says=[("BOOTSTRAP_TLS_FAILED", None, "message", "the TLS handshake failed"),
              ("BOOTSTRAP_TLS_FAILED", None, "fix", "TLS versions")],
    ),
    case(
        "plaintext-sent-to-an-msk-tls-port",
        [dead_boot("b-1.demo.kafka.us-east-1.amazonaws.com:9094", "error",
                   "the listener answered with TLS: it expects a TLS handshake first", speaks_tls=True)],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "you sent plaintext Kafka (security.protocol=PLAINTEXT)"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "message", "ApiVersionRequest failed"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "message", "Port 9094 is Amazon MSK's TLS port"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "security.protocol=SSL")],
    ),
    case(
        "tls-sent-to-a-plaintext-listener",
        [dead_boot("kafka0:9092", "error", "TLS handshake failed: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred "
                   "in violation of protocol; the same port answers Kafka in plaintext", protocol="SSL",
                   tls_failure="handshake_failed", speaks_tls=False)],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "you sent TLS (security.protocol=SSL) to a plaintext"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "security.protocol=PLAINTEXT")],
        never_says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "Amazon MSK")],
    ),
    # The full Metadata answer lost on the path, a brokers-only one arrived: the path is named, the
    # endpoints judged from the small answer (exit 1, never "no bootstrap answered").
    case(
        "full-metadata-lost-on-the-path",
        [replace(boot("kafka.example.test:9092", connected_to="198.19.0.10", advertises=[(1, "198.19.0.11", 9092)]),
                 full_metadata_lost=True, largest_answer_bytes=412)],
        [endpoint(1, "198.19.0.11", 9092, "kafka.example.test:9092")],
        [("PATH_MTU_BLACKHOLE", "error", None, None)],
        says=[("PATH_MTU_BLACKHOLE", None, "message", "answers of up to 412 bytes arrived"),
              ("PATH_MTU_BLACKHOLE", None, "message", "the path MTU is about 464 bytes"),
              ("PATH_MTU_BLACKHOLE", None, "message", "path-MTU black hole"),
              ("PATH_MTU_BLACKHOLE", None, "fix", "MSS")],
        never_says=[("PATH_MTU_BLACKHOLE", None, "fix", "address and port")],
    ),
    # The listener says which security.protocol it wants (kprobe.probe.bootstrap asks it again);
    # the address and port were right, so nothing may send the user to them.
    case(
        "plaintext-sent-to-a-sasl-plaintext-listener",
        [dead_boot("kafka-sasl:9094", "error", "connection closed by the broker before a full response; asked on a new "
                   "connection, the listener answered SaslHandshake with its mechanisms PLAIN: it is a SASL_PLAINTEXT "
                   "listener", protocol="PLAINTEXT", wanted_protocol="SASL_PLAINTEXT", sasl_mechanisms=["PLAIN"])],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "you sent plaintext Kafka without SASL "
               "(security.protocol=PLAINTEXT) to a SASL_PLAINTEXT listener"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "message", "it listed its SASL mechanisms (PLAIN)"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix",
               "Set security.protocol=SASL_PLAINTEXT and sasl.mechanism=PLAIN"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "SASL_PLAINTEXT://kafka-sasl:9094")],
        never_says=[("SECURITY_PROTOCOL_MISMATCH", None, "fix", "address and port"),
                    ("SECURITY_PROTOCOL_MISMATCH", None, "message", "address and port")],
    ),
    case(
        "ssl-sent-to-an-msk-scram-port-lists-every-mechanism",
        [dead_boot("b-1.demo.kafka.us-east-1.amazonaws.com:9096", "error", "connection closed by the broker before a "
                   "full response", protocol="SSL", wanted_protocol="SASL_SSL",
                   sasl_mechanisms=["SCRAM-SHA-512", "SCRAM-SHA-256"])],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "you sent TLS without SASL (security.protocol=SSL) to a "
               "SASL_SSL listener, which answered ApiVersions, then closed the connection"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "message", "Port 9096 is Amazon MSK's SASL/SCRAM port"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "sasl.mechanism to one of SCRAM-SHA-512, SCRAM-SHA-256")],
        never_says=[("SECURITY_PROTOCOL_MISMATCH", None, "fix", "ssl.ca.location")],
    ),
    case(
        "sasl-sent-to-a-plaintext-listener",
        [dead_boot("kafka0:9092", "error", "the listener answered SaslHandshake with ILLEGAL_SASL_STATE, as a listener "
                   "without SASL does: it is a PLAINTEXT listener, and you sent SASL_PLAINTEXT",
                   protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", wanted_protocol="PLAINTEXT")],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "you sent SASL in plaintext "
               "(security.protocol=SASL_PLAINTEXT) to a PLAINTEXT listener"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "message", "ILLEGAL_SASL_STATE"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix",
               "Set security.protocol=PLAINTEXT, without the sasl.* settings")],
        never_says=[("SECURITY_PROTOCOL_MISMATCH", None, "fix", "address and port"),
                    ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "sasl.mechanism=")],
    ),
    case(
        "sasl-ssl-sent-to-an-ssl-listener",
        [dead_boot("broker.tls.kprobe.test:9093", "error",
                   "the listener answered SaslHandshake with ILLEGAL_SASL_STATE, as a listener without SASL does: "
                   "it is an SSL listener, and you sent SASL_SSL",
                   protocol="SASL_SSL", sasl_mechanism="PLAIN", wanted_protocol="SSL")],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "(security.protocol=SASL_SSL) to an SSL listener"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "Set security.protocol=SSL")],
    ),
    case(
        "plaintext-sent-to-a-sasl-ssl-listener-names-the-ca-too",
        [dead_boot("kafka-sasl:9095", "error", "the listener answered with TLS: it expects a TLS handshake first",
                   speaks_tls=True, wanted_protocol="SASL_SSL", sasl_mechanisms=["PLAIN"])],
        [],
        [("SECURITY_PROTOCOL_MISMATCH", "error", None, None)],
        says=[("SECURITY_PROTOCOL_MISMATCH", None, "message", "to a SASL_SSL listener, which answered with TLS"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "Set security.protocol=SASL_SSL and sasl.mechanism=PLAIN"),
              ("SECURITY_PROTOCOL_MISMATCH", None, "fix", "ssl.ca.location")],
        never_says=[("SECURITY_PROTOCOL_MISMATCH", None, "fix", "SASL_SSL if the listener also wants SASL")],
    ),
    case(
        "tls-without-the-client-certificate-a-listener-requires",
        [dead_boot("broker.tls.kprobe.test:9093", "error", "the broker ended TLS with the alert \"bad certificate\": "
                   "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate (_ssl.c:2580)", protocol="SSL",
                   tls_failure="client_certificate_required", tls_alert="bad certificate")],
        [],
        [("CLIENT_CERTIFICATE_REQUIRED", "error", None, None)],
        says=[("CLIENT_CERTIFICATE_REQUIRED", None, "message", "the listener requires a client certificate"),
              ("CLIENT_CERTIFICATE_REQUIRED", None, "message", "\"bad certificate\""),
              ("CLIENT_CERTIFICATE_REQUIRED", None, "fix", "ssl.keystore.location"),
              ("CLIENT_CERTIFICATE_REQUIRED", None, "fix", "ssl.certificate.location and ssl.key.location")],
        never_says=[("CLIENT_CERTIFICATE_REQUIRED", None, "fix", "address and port"),
                    ("CLIENT_CERTIFICATE_REQUIRED", None, "message", "did not answer in time")],
    ),
    case(
        "tls-with-a-client-certificate-from-a-ca-the-listener-does-not-trust",
        [dead_boot("broker.tls.kprobe.test:9093", "error",
                   "the broker ended TLS with the alert \"certificate unknown\": "
                   "[SSL: SSLV3_ALERT_CERTIFICATE_UNKNOWN] sslv3 alert certificate unknown (_ssl.c:2580)",
                   protocol="SSL", tls_failure="client_certificate_refused", tls_alert="certificate unknown")],
        [],
        [("CLIENT_CERTIFICATE_REFUSED", "error", None, None)],
        says=[("CLIENT_CERTIFICATE_REFUSED", None, "message", "the listener refused the client certificate sent"),
              ("CLIENT_CERTIFICATE_REFUSED", None, "message", "not in the listener's truststore"),
              ("CLIENT_CERTIFICATE_REFUSED", None, "fix", "ssl.truststore.location")],
        never_says=[("CLIENT_CERTIFICATE_REFUSED", None, "fix", "address and port")],
    ),
    case(
        "oidc-token-endpoint-refuses-the-client-secret",
        [dead_boot("kafka.example.com:9093", "auth_failed",
                   "no OAUTHBEARER token, so no client gets past authentication: token endpoint "
                   "https://idp.example.com/oauth2/token answered HTTP 401 Unauthorized, OAuth error invalid_client; "
                   "the broker never saw a token", protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                   token_unavailable=True)],
        [],
        [("OAUTH_TOKEN_UNAVAILABLE", "error", None, None)],
        says=[("OAUTH_TOKEN_UNAVAILABLE", None, "message", "OAuth error invalid_client"),
              ("OAUTH_TOKEN_UNAVAILABLE", None, "fix", "sasl.oauthbearer.client.id and the client secret")],
        never_says=[("OAUTH_TOKEN_UNAVAILABLE", None, "message", "it refused the credentials")],
    ),
    case(
        "broker-refuses-an-oauth-token-for-another-audience",
        [dead_boot("kafka.example.com:9093", "auth_failed",
                   "SASL authentication failed: the broker refused the token: invalid_token", protocol="SASL_SSL",
                   sasl_mechanism="OAUTHBEARER")],
        [],
        [("AUTH_FAILED", "error", None, None)],
        says=[("AUTH_FAILED", None, "message", "invalid_token"),
              ("AUTH_FAILED", None, "fix", "sasl.oauthbearer.expected.audience")],
        never_says=[("AUTH_FAILED", None, "fix", "password")],
    ),
    case(
        "scram-wrong-password-names-the-per-mechanism-user",
        [dead_boot("b-1.demo.kafka.us-east-1.amazonaws.com:9096", "auth_failed",
                   "SASL authentication failed: Authentication failed during authentication due to invalid "
                   "credentials with SASL mechanism SCRAM-SHA-512", protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512")],
        [],
        [("AUTH_FAILED", "error", None, None)],
        says=[("AUTH_FAILED", None, "fix", "a SCRAM user exists per mechanism")],
    ),
    case(
        "plain-sent-to-a-scram-listener",
        [dead_boot("b-1.demo.kafka.us-east-1.amazonaws.com:9096", "auth_failed",
                   "this listener takes SCRAM-SHA-512; you sent PLAIN (set sasl.mechanism to SCRAM-SHA-512)",
                   protocol="SASL_SSL", sasl_mechanisms=["SCRAM-SHA-512"])],
        [],
        [("SASL_MECHANISM_MISMATCH", "error", None, None)],
        says=[("SASL_MECHANISM_MISMATCH", None, "message", "this listener takes SCRAM-SHA-512; you sent PLAIN"),
              ("SASL_MECHANISM_MISMATCH", None, "message", "Port 9096 is Amazon MSK's SASL/SCRAM port"),
              ("SASL_MECHANISM_MISMATCH", None, "fix", "sasl.mechanism to one the listener takes (SCRAM-SHA-512)")],
    ),
    case(
        "an-http-server-answers-on-the-bootstrap-port",
        [dead_boot("kafka0:8080", "error", "response size 1213486160 is not plausible")],
        [],
        [("BOOTSTRAP_UNREACHABLE", "error", None, None)],
        says=[("BOOTSTRAP_UNREACHABLE", None, "message", "the request failed")],
        never_says=[("BOOTSTRAP_UNREACHABLE", None, "fix", "ssl.ca.location")],
    ),
    case(
        "sasl-plain-wrong-password",
        [dead_boot("kafka-sasl:9094", "auth_failed",
                   "SASL authentication failed: Authentication failed: Invalid username or password",
                   protocol="SASL_PLAINTEXT")],
        [],
        [("AUTH_FAILED", "error", None, None)],
        says=[("AUTH_FAILED", None, "message", "it refused the credentials"),
              ("AUTH_FAILED", None, "fix", "Check sasl.username and sasl.password, and")],
    ),
    case(
        "bob-from-inside-the-docker-network-is-healthy",
        [BOB_HEALTHY], [BOB_ENDPOINT], [],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_bootstrap_rules(row: Case):
    check(row)


def test_a_dead_bootstrap_names_itself():
    """The finding's `bootstrap` is what a user edits (bootstrap.servers), so it must be the dead address."""
    [found] = check(CASES[1])
    assert found.bootstrap == "localhost:9093"


JAAS = {"sasl.username": "sasl.jaas.config", "sasl.password": "sasl.jaas.config"}


@pytest.mark.parametrize(("mechanism", "credentials", "fix"), [
    # A Java client's file: its credentials are in sasl.jaas.config, and it has no sasl.username to check.
    ("PLAIN", JAAS, "Check the username and password in sasl.jaas.config, and that the listener's protocol"),
    ("SCRAM-SHA-512", JAAS, "Check the username and password in sasl.jaas.config: a SCRAM user exists"),
    # librdkafka's names, from -X or a librdkafka file, and by default.
    ("SCRAM-SHA-256", {"sasl.username": "sasl.username", "sasl.password": "sasl.password"},
     "Check sasl.username and sasl.password: a SCRAM user exists"),
    ("PLAIN", None, "Check sasl.username and sasl.password, and"),
    # -X sasl.password over a Java file's login: each key where it was given.
    ("PLAIN", {"sasl.username": "sasl.jaas.config", "sasl.password": "sasl.password"},
     "Check sasl.password and the username in sasl.jaas.config, and"),
])
def test_auth_failed_names_the_keys_the_credentials_were_given_under(mechanism, credentials, fix):
    """AUTH_FAILED's fix sends the user to the key they wrote their credentials under, never its value."""
    refused = dead_boot("kafka-sasl:9094", "auth_failed", "SASL authentication failed: Invalid username or password",
                        protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism)
    [found] = diagnose([refused], [], credentials=credentials)
    assert found.code == "AUTH_FAILED" and found.fix.startswith(fix), found.fix
    if credentials == JAAS:
        assert "sasl.username" not in found.fix and "sasl.password" not in found.fix
