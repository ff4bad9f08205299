"""SASL/OAUTHBEARER spoken by kprobe: the message formats, the token endpoint client, and real brokers.

Three layers, each proving what the one above cannot:

- the formats, on plain values: librdkafka's unsecured JWS byte for byte (its own unit-test vectors
  from rdkafka_sasl_oauthbearer.c), RFC 7628's client message with KIP-342 extensions, KIP-255's
  server error, and the settings librdkafka would refuse;
- the token endpoint client against loopback HTTP(S) servers started here, well-behaved and not:
  what each failure says, that it never quotes the client secret, that it stays within its timeout
  and the run's deadline, and that a token is fetched once and reused until 80% of its lifetime;
- whole CLI runs against the lab's `oauth` scenario (a Kafka 4.1.1 broker validating JWTs against
  the JWKS of the lab's OAuth server, plus a listener taking unsigned tokens): success with the
  identity check over its own OAUTHBEARER connection, the token endpoint refusing the client, the
  broker refusing the token in its own (KIP-255) words, an endpoint where nothing listens, and no
  secret or token in any output.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.errors import UsageError
from kprobe.kafka import oauth
from kprobe.kafka.connection import KafkaConnection
from kprobe.kafka.oauth import token_for
from kprobe.kafka.oauth_settings import OAuthSettings, parse_unsecured_config
from kprobe.kafka.oauth_token import TokenError
from kprobe.kafka.sasl import MECHANISMS, OAuthBearer, SaslError, client_first_message, describe_oauth_error
from kprobe.kafka.security import security_from
from kprobe.kafka.wire import WireError
from kprobe.lab.certs import CertSpec, make_cert
from kprobe.lab.http_server import HttpRequest, HttpResponse, LabHttpServer
from kprobe.lab.idp import IdentityProvider, IdpSpec
from kprobe.lab.native import NativeLab

# base64url of '{"alg":': every JWS header here starts with it (the lab's RS256 ones, librdkafka's
# unsecured one). Long enough that no random identifier in a report (a cluster id) holds it by chance.
JWT_PREFIX = b"eyJhbGciOi"


# == the formats ==================================================================================

# librdkafka's own vectors (rdkafka_sasl_oauthbearer.c, do_unittest_config_*), at now = 1000 ms.
LIBRDKAFKA_VECTORS = [
    ("principal=fubar scopeClaimName=whatever",
     "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmdWJhciIsImlhdCI6MS4wMDAsImV4cCI6MzYwMS4wMDB9."),
    ("principal=fubar scope=role1,role2 lifeSeconds=60",
     "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmdWJhciIsImlhdCI6MS4wMDAsImV4cCI6NjEuMDAwLCJzY29wZSI6WyJyb2xlMSIsInJvbGUyIl19."),
    ("principal=fubar principalClaimName=azp scope=role1,role2 scopeClaimName=roles lifeSeconds=60",
     "eyJhbGciOiJub25lIn0.eyJhenAiOiJmdWJhciIsImlhdCI6MS4wMDAsImV4cCI6NjEuMDAwLCJyb2xlcyI6WyJyb2xlMSIsInJvbGUyIl19."),
]


@pytest.mark.parametrize(("config", "expected"), LIBRDKAFKA_VECTORS)
def test_unsecured_token_is_librdkafkas_byte_for_byte(config, expected):
    assert oauth.unsecured_jws(parse_unsecured_config(config), now=1.0) == expected


def test_unsecured_config_scopes_and_extensions():
    config = parse_unsecured_config("principal=alice scope=a,,b,a extension_traceId=123 extension_tenant=x")
    assert config.scopes == ("a", "b")  # empty elements skipped, duplicates dropped, order kept
    assert config.extensions == (("traceId", "123"), ("tenant", "x"))
    token = oauth.unsecured_jws(config, now=10.0)
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims == {"sub": "alice", "iat": 10.0, "exp": 3610.0, "scope": ["a", "b"]}
    assert token.endswith(".")  # RFC 7515 A.5: an unsecured JWS has an empty signature


@pytest.mark.parametrize(("config", "why"), [
    ("", "must not be empty"),
    ("scope=a", "no principal"),
    ("principal=a principal=b", "multiple 'principal'"),
    ("principal=", "empty 'principal'"),
    ('principal=a"b', "cannot appear"),
    ("principal=a lifeSeconds=1.5", "non-integral"),
    ("principal=a lifeSeconds=0", "out of range"),
    ("principal=a lifeSeconds=99999999999", "out of range"),
    ("principal=a extension_auth=x", "token's own key"),
    ("principal=a extension_trace-id=x", "letters A-Z"),
    ("principal=a princpal=b", r"unrecognized sasl.oauthbearer.config entry \(did you mean principal=\?\)"),
    ("principal=a b", "values cannot hold spaces"),
])
def test_unsecured_config_refused_as_librdkafka_refuses_it(config, why):
    with pytest.raises(UsageError, match=why):
        parse_unsecured_config(config)


def test_unsecured_config_errors_never_quote_a_value():
    """sasl.oauthbearer.config is a secret property (librdkafka marks it sensitive): errors name, never quote."""
    for config in ("principal=a hunter", "principal=a pw:hunter2=x", "principal=a extension_x y=hunter2",
                   "principal=a hunter2=x"):
        with pytest.raises(UsageError) as caught:
            parse_unsecured_config(config)
        assert "hunter" not in str(caught.value), config


def test_client_message_is_rfc7628_with_kip342_extensions():
    assert client_first_message("abc.def.") == b"n,,\x01auth=Bearer abc.def.\x01\x01"
    assert client_first_message("t", (("traceId", "123"), ("logicalCluster", "lkc-1"))) == (
        b"n,,\x01auth=Bearer t\x01traceId=123\x01logicalCluster=lkc-1\x01\x01")


def test_a_broker_that_takes_the_token_ends_the_exchange():
    client = OAuthBearer("t")
    assert client.start() == b"n,,\x01auth=Bearer t\x01\x01"
    assert client.step(b"") is None and client.refusal() is None


def test_kip255_refusal_is_kept_and_answered_with_kvsep():
    """The JSON error comes as a successful step; the client must answer %x01 and keep the JSON."""
    client = OAuthBearer("a-token-of-some-length")
    client.start()
    assert client.step(b'{"status":"invalid_token"}') == b"\x01"
    assert client.refusal() is not None and client.refusal().startswith("the broker refused the token: invalid_token")
    with pytest.raises(SaslError, match="invalid_token"):
        client.step(b"")  # a broker that carried on after its own error


def test_a_broker_quoting_the_token_back_does_not_get_it_printed():
    client = OAuthBearer("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
    client.start()
    client.step(b'{"status":"invalid_token: eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."}')
    assert client.refusal() is not None and "eyJhbGciOi" not in client.refusal()
    assert client.redact("echo eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0. back") == "echo [redacted] back"


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"status":"invalid_token"}', "the broker refused the token: invalid_token (the token is expired"),
    (b'{"status":"insufficient_scope", "scope":"kafka.write"}',
     "the broker refused the token: insufficient_scope (scope required: kafka.write) (the token lacks"),
    (b'{"status":"invalid_token", "openid-configuration":"https://idp/.well-known/openid-configuration"}',
     "; its OpenID configuration: https://idp/.well-known/openid-configuration"),
    # Kafka formats the JSON with String.format, unescaped: a quote in a value breaks it.
    (b'{"status":"invalid_token", "scope":"a"b"}', "the broker refused the token: invalid_token"),
    (b"not json at all", "the broker refused the token: not json at all"),
])
def test_kip255_error_in_the_brokers_words(raw, expected):
    assert expected in describe_oauth_error(raw)


OIDC = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "s3cr3t-value",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example:8443/oauth2/token"}
UNSECURED = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
             "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=alice"}


@pytest.mark.parametrize(("change", "why"), [
    ({"enable.sasl.oauthbearer.unsecure.jwt": "false"}, "needs a token source"),
    ({"sasl.oauthbearer.method": "magic"}, "bad sasl.oauthbearer.method"),
])
def test_unsecured_needs_librdkafkas_flag(change, why):
    """Without enable.sasl.oauthbearer.unsecure.jwt librdkafka has no token: kprobe must not succeed instead."""
    with pytest.raises(UsageError, match=why):
        security_from({**UNSECURED, **change})


@pytest.mark.parametrize(("change", "why"), [
    ({"sasl.oauthbearer.client.secret": ""}, "client.secret is mandatory"),
    ({"sasl.oauthbearer.client.id": ""}, "client.id is mandatory"),
    ({"sasl.oauthbearer.token.endpoint.url": ""}, "token.endpoint.url is mandatory"),
    ({"sasl.oauthbearer.token.endpoint.url": "file:///etc/token"}, "https:// .or http://. URL"),
    ({"sasl.oauthbearer.token.endpoint.url": "https://idp:99999/t"}, "port"),
    ({"enable.sasl.oauthbearer.unsecure.jwt": "true"}, "mutually exclusive"),
    ({"https.ca.location": "/nonexistent/ca.pem"}, "must be an existing file"),
    ({"https.ca.location": "probe", "https.ca.pem": "x"}, "mutually exclusive"),
    ({"sasl.oauthbearer.extensions": "a=1,b"}, "key=value pairs"),
    ({"sasl.oauthbearer.extensions": "auth=x"}, "token's own key"),
    ({"sasl.oauthbearer.sub.claim.name": "  "}, "non-empty"),
])
def test_oidc_settings_refused_where_librdkafka_refuses_them(change, why):
    with pytest.raises(UsageError, match=why) as caught:
        security_from({**OIDC, **change})
    assert "s3cr3t-value" not in str(caught.value)


def test_oidc_settings_and_aliases():
    props = {k: v for k, v in OIDC.items() if not k.startswith("sasl.oauthbearer.client.")}
    props.update({"sasl.oauthbearer.client.credentials.client.id": "app",
                  "sasl.oauthbearer.client.credentials.client.secret": "s3cr3t-value",
                  "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
                  "sasl.oauthbearer.scope": "kafka", "https.ca.location": "probe"})
    sec = security_from(props)
    assert sec.oauth is not None and sec.spoken_by_kprobe
    assert (sec.oauth.client_id, sec.oauth.client_secret, sec.oauth.scope, sec.oauth.ca_location) == (
        "app", "s3cr3t-value", "kafka", None)  # "probe": the system's CAs, as librdkafka probes them
    assert sec.oauth.extensions == (("logicalCluster", "lkc-1"), ("identityPoolId", "pool-2"))
    assert "OAUTHBEARER" in MECHANISMS


def test_no_secret_in_any_repr():
    with_creds = {**OIDC, "sasl.oauthbearer.token.endpoint.url": "https://app:urlpass@idp:8443/t?key=qkey"}
    for props in (with_creds, UNSECURED):
        sec = security_from(props)
        for text in (repr(sec), repr(sec.oauth), str(sec)):
            for secret in ("s3cr3t-value", "urlpass", "qkey", "principal=alice"):
                assert secret not in text, text
    assert "https://idp:8443/t?…" in repr(security_from(with_creds).oauth)


def test_every_oauth_secret_property_is_redacted():
    """The properties librdkafka marks sensitive for OAUTHBEARER, and the URL that may carry credentials."""
    from kprobe.redaction import is_secret

    for key in ("sasl.oauthbearer.client.secret", "sasl.oauthbearer.client.credentials.client.secret",
                "sasl.oauthbearer.config", "sasl.oauthbearer.assertion.private.key.pem",
                "sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.private.key.passphrase",
                "sasl.oauthbearer.token.endpoint.url"):
        assert is_secret(key), key
    for key in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions",
                "sasl.oauthbearer.method", "https.ca.location"):
        assert not is_secret(key), key


@pytest.mark.parametrize("change", [
    {"sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"},
    {"sasl.oauthbearer.metadata.authentication.type": "azure_imds"},
])
def test_variants_kprobe_does_not_speak_go_through_librdkafka(change):
    sec = security_from({**OIDC, **change})
    assert not sec.spoken_by_kprobe and sec.not_spoken_why and "OAUTHBEARER" in sec.not_spoken_why


def test_oauth_settings_only_where_sasl_is_spoken():
    """A PLAINTEXT run with leftover OAuth properties is not refused for their gaps."""
    assert security_from({**OIDC, "security.protocol": "PLAINTEXT", "sasl.oauthbearer.client.secret": ""}).oauth is None


# == the token endpoint client ====================================================================

IDP_ADDRESS = "127.0.0.84"  # not the lab's 127.0.0.82: these servers live in this test process


@pytest.fixture(scope="module")
def idp(tmp_path_factory) -> Iterator[IdentityProvider]:
    """The lab's OAuth server on its own, with a CA made here: a well-behaved token endpoint."""
    directory = tmp_path_factory.mktemp("idp")
    cert = make_cert(directory / "tls", "idp", CertSpec((IDP_ADDRESS,)))
    server = IdentityProvider(IdpSpec(address=IDP_ADDRESS, clients=(("app", "kafka"),), audience="kafka",
                                      certificate="idp", token_seconds=600), directory, cert)
    server.ca_file = str(cert.ca)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh_token_cache() -> Iterator[None]:
    oauth.forget_tokens()
    yield
    oauth.forget_tokens()


def oidc_settings(url: str, *, secret: str = "s3cr3t-value", client: str = "app", ca: str | None = None,
                  **more: str) -> OAuthSettings:
    props = {**OIDC, "sasl.oauthbearer.client.id": client, "sasl.oauthbearer.client.secret": secret,
             "sasl.oauthbearer.token.endpoint.url": url, **more}
    if ca:
        props["https.ca.location"] = ca
    sec = security_from(props)
    assert sec.oauth is not None
    return sec.oauth


def fetch(settings: OAuthSettings, *, timeout: float = 2.0, within: float = 10.0) -> oauth.Token:
    return token_for(settings, timeout=timeout, deadline=time.monotonic() + within)


def token_error(settings: OAuthSettings, **kw: float) -> TokenError:
    with pytest.raises(TokenError) as caught:
        fetch(settings, **kw)
    return caught.value


def test_client_credentials_token_is_fetched_once_and_reused(idp):
    """Identity checks ask from parallel threads at once: one request, one token, shared by all."""
    settings = oidc_settings(idp.token_url, secret=idp.client_secrets["app"], ca=idp.ca_file,
                             **{"sasl.oauthbearer.scope": "kafka read"})
    before = idp.tokens_issued
    got: list[oauth.Token] = []
    threads = [threading.Thread(target=lambda: got.append(fetch(settings))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len({t.value for t in got}) == 1
    assert idp.tokens_issued == before + 1
    token = got[0]
    assert token.principal == "app" and 590 < token.expires_at - time.time() <= 600
    claims = json.loads(base64.urlsafe_b64decode(token.value.split(".")[1] + "=="))
    assert claims["scope"] == "kafka read"  # form-encoded on the way, decoded by the endpoint
    assert fetch(settings).value == token.value and idp.tokens_issued == before + 1


def test_a_token_is_refreshed_after_80_percent_of_its_lifetime(idp, monkeypatch):
    """librdkafka refreshes at 80% of the lifetime; a long `kprobe watch` process must too."""
    settings = oidc_settings(idp.token_url, secret=idp.client_secrets["app"], ca=idp.ca_file)
    first = fetch(settings)
    real = time.time
    with mock.patch.object(oauth, "fetch_token", wraps=oauth.fetch_token) as fetched:
        monkeypatch.setattr(time, "time", lambda: real() + 0.79 * 600)
        assert fetch(settings).value == first.value
        assert fetched.call_count == 0
        monkeypatch.setattr(time, "time", lambda: real() + 0.81 * 600)
        assert fetch(settings).value != first.value
        assert fetched.call_count == 1


def test_wrong_secret_names_endpoint_and_oauth_error_never_the_secret(idp):
    settings = oidc_settings(idp.token_url, secret="wrong-secret-123", ca=idp.ca_file)
    text = str(token_error(settings))
    assert f"token endpoint {idp.token_url} answered HTTP 401" in text
    assert "OAuth error invalid_client (client authentication failed)" in text
    assert "wrong-secret-123" not in text and idp.client_secrets["app"] not in text


def test_a_failure_is_kept_until_the_runs_deadline(idp):
    """Parallel bootstraps of one run get the first answer without asking again; the next run asks anew."""
    settings = oidc_settings(idp.token_url, secret="wrong", ca=idp.ca_file)
    route = ("POST", "/oauth2/token")
    requests = idp.https.requests.get(route, 0)
    deadline = time.monotonic() + 2.0
    for _ in range(3):
        with pytest.raises(TokenError, match="invalid_client"):
            token_for(settings, timeout=1.9, deadline=deadline)
    assert idp.https.requests[route] == requests + 1
    time.sleep(max(0.0, deadline - time.monotonic()) + 0.05)
    with pytest.raises(TokenError, match="invalid_client"):
        token_for(settings, timeout=2, deadline=time.monotonic() + 10)
    assert idp.https.requests[route] == requests + 2


def test_untrusted_certificate_points_at_https_ca_location(idp):
    text = str(token_error(oidc_settings(idp.token_url, secret=idp.client_secrets["app"])))
    assert "TLS certificate not accepted" in text and "https.ca.location" in text and "not ssl.ca.location" in text


def test_nothing_listening(idp):
    with socket.socket() as probe:
        probe.bind((IDP_ADDRESS, 0))
        port = probe.getsockname()[1]
    text = str(token_error(oidc_settings(f"https://{IDP_ADDRESS}:{port}/oauth2/token", ca=idp.ca_file)))
    assert f"token endpoint https://{IDP_ADDRESS}:{port}/oauth2/token: connection refused" in text


def _answer(status: int, body: bytes, content_type: str = "application/json", **headers: str):
    return lambda request: HttpResponse(status, body, {"Content-Type": content_type, **headers})


def _b64json(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _jwt(claims: dict) -> str:
    return f"{_b64json({'alg': 'RS256'})}.{_b64json(claims)}.c2ln"


HOSTILE = {
    "/echo": (_answer(400, json.dumps({"error": "invalid_request",
                                       "error_description": "bad secret s3cr3t-value / czNjcjN0LXZhbHVl / "
                                       + base64.b64encode(b"app:s3cr3t-value").decode()}).encode()),
              "OAuth error invalid_request"),
    "/html": (_answer(200, b"<html>login</html>", "text/html"), "with text/html content type, not JSON"),
    "/moved": (_answer(302, b"", "text/plain", Location="https://elsewhere.example/token?sig=abc"),
               "a redirect to https://elsewhere.example/token?…, which clients do not follow"),
    "/busy": (_answer(503, b"{}"), "HTTP 503 Service Unavailable; librdkafka retries"),
    "/opaque": (_answer(200, json.dumps({"access_token": "opaque-token"}).encode()), "not a JWT"),
    "/no-token": (_answer(200, b'{"token_type":"Bearer"}'), "without an access_token"),
    "/expired": (_answer(200, json.dumps({"access_token": _jwt({"sub": "app", "exp": 1000})}).encode()),
                 "expired at 1970-01-01T00:16:40Z"),
    "/no-sub": (_answer(200, json.dumps({"access_token": _jwt({"exp": 4e9})}).encode()), "without a 'sub' claim"),
    "/framing": (_answer(200, json.dumps({"access_token": "a\x01b.c.d"}).encode()), "characters a bearer token"),
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[LabHttpServer]:
    server = LabHttpServer(IDP_ADDRESS, {("POST", path): handler for path, (handler, _) in HOSTILE.items()})
    yield server
    server.close()


@pytest.mark.parametrize("path", sorted(HOSTILE))
def test_what_each_bad_answer_says(hostile, path):
    text = str(token_error(oidc_settings(hostile.url(path))))
    assert HOSTILE[path][1] in text, text
    assert text.startswith(f"token endpoint {hostile.url(path)}")
    for form in ("s3cr3t-value", "czNjcjN0LXZhbHVl", base64.b64encode(b"app:s3cr3t-value").decode(), "sig=abc"):
        assert form not in text


def test_the_request_is_librdkafkas():
    """POST, HTTP basic of id:secret (not form-encoded first, as librdkafka sends it), the grant in the form."""
    seen: list[HttpRequest] = []

    def record(request: HttpRequest) -> HttpResponse:
        seen.append(request)
        return HttpResponse(200, json.dumps({"access_token": _jwt({"sub": "app", "exp": 4e9})}).encode(),
                            {"Content-Type": "application/json"})

    server = LabHttpServer(IDP_ADDRESS, {("POST", "/t"): record})
    try:
        token = fetch(oidc_settings(server.url("/t") + "?tenant=1", secret="p@ss:w rd",
                                    **{"sasl.oauthbearer.scope": "api://kafka/.default"}))
    finally:
        server.close()
    [request] = seen
    assert request.query == "tenant=1" and token.principal == "app"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"app:p@ss:w rd").decode()
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qs(request.body.decode()) == {"grant_type": ["client_credentials"],
                                                             "scope": ["api://kafka/.default"]}


class _Stalling:
    """A TCP server that accepts and then answers nothing (`trickle`: one byte every 0.2 s, for ever)."""

    def __init__(self, trickle: bool) -> None:
        self.listener = socket.create_server((IDP_ADDRESS, 0))
        self.port = self.listener.getsockname()[1]
        self.trickle = trickle
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            self.conns.append(conn)
            if self.trickle:
                threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            while not self.stop.wait(0.2):
                conn.sendall(b"X-Slow: 1\r\n")
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        for conn in self.conns:
            conn.close()
        self.listener.close()


@pytest.mark.parametrize("trickle", [False, True])
def test_a_silent_or_trickling_endpoint_costs_one_timeout(trickle):
    server = _Stalling(trickle)
    try:
        started = time.monotonic()
        error = token_error(oidc_settings(f"http://{IDP_ADDRESS}:{server.port}/t"), timeout=1.0, within=10)
        took = time.monotonic() - started
    finally:
        server.close()
    assert "accepted the connection but did not answer within 1s" in str(error) and not error.deadline
    assert 0.9 < took < 3.0, took  # unbounded without the cut: the trickle never ends, each read succeeds


def test_the_runs_deadline_cuts_the_request_and_says_so():
    server = _Stalling(trickle=True)
    try:
        started = time.monotonic()
        error = token_error(oidc_settings(f"http://{IDP_ADDRESS}:{server.port}/t"), timeout=5.0, within=0.8)
        took = time.monotonic() - started
    finally:
        server.close()
    assert error.deadline and "run's deadline" in str(error)
    assert 0.7 < took < 3.0, took  # the 5 s timeout did not apply: the deadline came first


# == real brokers: the lab's `oauth` scenario =====================================================

def oidc_props(lab: NativeLab, *, client: str = "kprobe-app", secret: str | None = None,
               **extra: str) -> dict[str, str]:
    """What an OIDC client of the lab sets: its id and secret, the token endpoint and its CA."""
    assert lab.idp is not None
    return {"security.protocol": "SASL_PLAINTEXT", **lab.idp.client_properties(client, secret),
            "https.ca.location": lab.idp_ca_file, **extra}


def oidc_args(lab: NativeLab, listener: str = "OAUTH_OIDC", *, client: str = "kprobe-app",
              secret: str | None = None, **extra: str) -> list[str]:
    """A probe of one listener by an OIDC client, as a client on the `clients` network would run it."""
    props = oidc_props(lab, client=client, secret=secret, **extra)
    return ["-b", lab.bootstrap(listener), "--nameserver", lab.nameserver("clients"),
            *(arg for key, value in props.items() for arg in ("-X", f"{key}={value}"))]


def unsecured_args(lab: NativeLab, listener: str = "OAUTH_UNSECURED", config: str = "principal=alice") -> list[str]:
    return ["-b", lab.bootstrap(listener), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
            "-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", f"sasl.oauthbearer.config={config}"]


def secret_forms(lab: NativeLab, *typed: str) -> list[bytes]:
    """Every client secret of the lab and any typed one: raw, URL-encoded, inside HTTP basic; and any JWT."""
    assert lab.idp is not None
    forms = [JWT_PREFIX]
    for client, secret in [*lab.idp.client_secrets.items(), *(("kprobe-app", t) for t in typed)]:
        forms += [secret.encode(), urllib.parse.quote(secret).encode(),
                  base64.b64encode(f"{client}:{secret}".encode())]
    return forms


def assert_no_secret(blob: bytes, forms: list[bytes], where: object) -> None:
    for form in forms:
        assert form not in blob, f"{form!r} leaked into {where}"


def probe(lab: NativeLab, *args: str, typed: tuple[str, ...] = ()) -> tuple[int, dict, bytes]:
    """A whole `kprobe probe --json` run: its exit code, validated report and stderr, searched for secrets."""
    done = run_cli(["probe", "--json", "--timeout", "2", *args])
    stdout, stderr = done.stdout.encode(), done.stderr.encode()
    forms = secret_forms(lab, *typed)
    assert_no_secret(stdout, forms, "stdout")
    assert_no_secret(stderr, forms, "stderr")
    return done.returncode, validate(json.loads(stdout)), stderr


def codes(data: dict) -> list[str]:
    return [f["code"] for f in data["findings"]]


@pytest.mark.parametrize(("listener", "extra"), [
    ("OAUTH_OIDC", {}),
    ("OAUTH_SSL", {"security.protocol": "SASL_SSL"}),
])
def test_oidc_client_gets_a_token_and_every_endpoint_is_identified(oauth_lab, listener, extra):
    """Exit 0 through kprobe's own client, and the identity check spoke OAUTHBEARER on its own connection.

    A SASL listener closes a connection that asks DescribeConfigs before authenticating, so an
    identity `match` proves the second connection authenticated too; the OAuth server counting one
    token for the run proves it reused the bootstrap's.
    """
    assert oauth_lab.idp is not None
    if extra.get("security.protocol") == "SASL_SSL":
        extra = {**extra, "ssl.ca.location": oauth_lab.ca_file}
    before = oauth_lab.idp.tokens_issued
    code, data, stderr = probe(oauth_lab, *oidc_args(oauth_lab, listener, **extra))
    assert code == 0, data["findings"]
    assert stderr == b""
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["via"], boot["node_id"]) == ("ok", "kprobe", 0)
    assert [(e["status"], e["identity"]["status"], e["identity"]["node_id"]) for e in data["endpoints"]] == [
        ("reachable", "match", 0)]
    assert data["findings"] == [] and data["summary"]["status"] == "ok"
    assert oauth_lab.idp.tokens_issued == before + 1
    shown = data["settings"]["properties"]
    assert shown["sasl.oauthbearer.client.secret"] == "[redacted]"
    assert shown["sasl.oauthbearer.client.id"] == "kprobe-app"


def test_unsecured_token_with_an_extension(oauth_lab):
    """librdkafka's unsigned token and a KIP-342 extension, taken by Kafka's default validator."""
    code, data, _ = probe(oauth_lab, *unsecured_args(oauth_lab, config="principal=alice scope=a,b extension_traceId=42"))
    assert code == 0, data["findings"]
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["via"]) == ("ok", "kprobe")
    assert [e["identity"]["status"] for e in data["endpoints"]] == ["match"]
    assert data["settings"]["properties"]["sasl.oauthbearer.config"] == "[redacted]"


def test_wrong_client_secret_is_one_finding_naming_the_endpoint(oauth_lab):
    assert oauth_lab.idp is not None
    before = oauth_lab.idp.tokens_issued
    code, data, _ = probe(oauth_lab, *oidc_args(oauth_lab, secret="not-the-secret-42"), typed=("not-the-secret-42",))
    assert code == 3
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["via"], boot["token_unavailable"]) == ("auth_failed", "kprobe", True)
    assert codes(data) == ["OAUTH_TOKEN_UNAVAILABLE"]  # not AUTH_FAILED: the broker never saw a token
    assert "client secret" in data["findings"][0]["fix"]
    message = data["findings"][0]["message"]
    assert f"token endpoint {oauth_lab.idp.token_url} answered HTTP 401" in message
    assert "OAuth error invalid_client" in message and "the broker never saw a token" in message
    assert oauth_lab.idp.tokens_issued == before
    # The text report says it in one line too.
    done = run_cli(["probe", "--no-color", "--timeout", "2", *oidc_args(oauth_lab, secret="not-the-secret-42")])
    assert done.returncode == 3
    assert_no_secret((done.stdout + done.stderr).encode(), secret_forms(oauth_lab, "not-the-secret-42"), "text report")
    findings = " ".join(done.stdout.split("Findings:")[1].split())  # the finding, unwrapped
    assert findings.count("ERROR OAUTH_TOKEN_UNAVAILABLE") == 1
    assert f"token endpoint {oauth_lab.idp.token_url} answered HTTP 401 Unauthorized, OAuth error invalid_client" in (
        findings)


@pytest.mark.parametrize("how", ["wrong audience", "unsigned"])
def test_a_token_the_broker_refuses_is_reported_in_its_words(oauth_lab, how):
    """KIP-255: the broker's JSON status, not the generic failure that follows the client's %x01.

    billing-app's token is genuine (the OAuth server issued it) but for the audience billing-api;
    an unsigned token is what a development client sends to a listener that checks signatures.
    """
    assert oauth_lab.idp is not None
    before = oauth_lab.idp.tokens_issued
    args = (oidc_args(oauth_lab, client="billing-app") if how == "wrong audience"
            else unsecured_args(oauth_lab, "OAUTH_OIDC"))
    code, data, _ = probe(oauth_lab, *args)
    assert code == 3
    [boot] = data["bootstraps"]
    assert boot["status"] == "auth_failed"
    assert "SASL authentication failed: the broker refused the token: invalid_token" in boot["error"]
    assert "Received %x01" not in boot["error"]
    assert (boot["sasl_mechanism"], boot["token_unavailable"]) == ("OAUTHBEARER", False)
    assert codes(data) == ["AUTH_FAILED"]
    assert "expected.audience" in data["findings"][0]["fix"]
    assert oauth_lab.idp.tokens_issued == before + (how == "wrong audience")


def test_token_endpoint_where_nothing_listens(oauth_lab):
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.82", 0))
        port = probe_socket.getsockname()[1]
    url = f"https://127.0.0.82:{port}/oauth2/token"
    started = time.monotonic()
    code, data, _ = probe(oauth_lab, *oidc_args(oauth_lab, **{"sasl.oauthbearer.token.endpoint.url": url}))
    assert code == 3 and time.monotonic() - started < 10
    assert codes(data) == ["OAUTH_TOKEN_UNAVAILABLE"]
    assert f"token endpoint {url}: connection refused (nothing listens there)" in data["findings"][0]["message"]


def test_the_labs_broker_checks_signatures(oauth_lab):
    """The lab is what it claims: a tampered or expired token is refused (not only a wrong audience).

    kprobe's client is driven with a token it did not fetch, on one connection, so the broker's
    judgement of exactly that token is what comes back.
    """
    assert oauth_lab.idp is not None
    host, port = oauth_lab.real_endpoint("OAUTH_OIDC").split(":")
    security = security_from(oidc_props(oauth_lab))

    def authenticate(token: str) -> str:
        with mock.patch.object(oauth, "token_for", return_value=oauth.Token(token, "x", 0)), \
                KafkaConnection(host, int(port), timeout=5, security=security) as conn:
            conn.connect()
            conn.negotiate()
            try:
                conn.authenticate()
            except WireError as exc:
                return str(exc)
            return "ok"

    good = oauth_lab.idp.mint("kprobe-app")
    head, body, signature = good.split(".")
    assert authenticate(good) == "ok"
    assert "invalid_token" in authenticate(f"{head}.{body}.{signature[:-6]}AAAAAA")
    assert "invalid_token" in authenticate(oauth_lab.idp.mint("kprobe-app", lifetime=-120))


def test_no_secret_or_token_in_any_output(oauth_lab, tmp_path: Path):
    """Every kind of OAuth run with --verbose and -o: stdout, stderr and the file, searched for every secret form.

    The client secret (the real ones and a typed wrong one) raw, URL-encoded and inside the HTTP basic
    header, and any JWT at all (the token kprobe fetched is a secret as much as the client's).
    """
    typed = "typed-wrong-secret-77"
    cases = [
        (oidc_args(oauth_lab), 0),
        (oidc_args(oauth_lab, secret=typed), 3),
        (oidc_args(oauth_lab, client="billing-app"), 3),
        (unsecured_args(oauth_lab), 0),
        (unsecured_args(oauth_lab, "OAUTH_OIDC"), 3),
    ]
    forms = secret_forms(oauth_lab, typed)
    verbose = b""
    for index, (args, exit_code) in enumerate(cases):
        for fmt in ("--json", "--no-color"):
            out = tmp_path / f"report-{index}{fmt}.json"
            cmd = ["probe", *args, fmt, "--verbose", "-o", str(out)]
            done = run_cli(cmd)
            stdout, stderr = done.stdout.encode(), done.stderr.encode()
            assert done.returncode == exit_code, (cmd, stderr[-2000:])
            assert_no_secret(stdout, forms, (cmd, "stdout"))
            assert_no_secret(stderr, forms, (cmd, "stderr"))
            assert_no_secret(out.read_bytes(), forms, out)
            verbose += stderr
    assert b"OAUTHBEARER token from" in verbose  # --verbose really logged the token request
