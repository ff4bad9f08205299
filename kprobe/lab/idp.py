"""An OAuth 2.0 identity provider for the lab: client credentials in, RS256 JWTs out, a JWKS beside.

Why the lab runs one: OAUTHBEARER listeners in production (Confluent Cloud, Strimzi, Azure Event
Hubs' Kafka endpoint, brokers behind Keycloak or Okta) validate JWTs signed by an identity provider
against its published keys (KIP-768). kprobe's side (the client credentials grant over HTTPS, the
token in the SASL exchange, the broker's refusal) can only be proven against a real broker that
fetches real keys, so the lab serves them:

- a token endpoint over HTTPS (certificate from the lab CA) taking the client credentials grant
  (RFC 6749 4.4) with HTTP basic client authentication, as librdkafka sends it, or the client's id
  and secret in the form; a wrong secret gets RFC 6749 5.2's `401 invalid_client`;
- a JWKS (RFC 7517) over plain HTTP, which the brokers' `OAuthBearerValidatorCallbackHandler`
  fetches: plain because a JVM trusts the lab CA only through a truststore, and the broker's side
  of the trust is not what kprobe probes.

Each registered client has its audience: a client registered for another API gets a token that
verifies but is refused by a broker expecting `kafka` (the wrong-audience mistake).

Keys and signatures come from the openssl command, as the lab's certificates do
(kprobe/lab/certs.py says why openssl and not a Python crypto package: `kprobe lab up` must run
with the runtime dependencies alone). Secrets are made fresh at each start.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import shutil
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

from kprobe.errors import LabError
from kprobe.lab.certs import CertFiles
from kprobe.lab.http_server import HttpRequest, HttpResponse, LabHttpServer, tls_context
from kprobe.records import record

TOKEN_PATH = "/oauth2/token"
JWKS_PATH = "/.well-known/jwks.json"
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"  # Kafka 4.x's JVM-wide allow list


@record
class IdpSpec:
    """The identity provider of a scenario.

    `clients` pairs each registered client id with the audience its tokens are for; `audience`
    is what the brokers expect. `certificate` names the scenario certificate the token endpoint
    presents (it must hold `address`).
    """

    address: str
    clients: tuple[tuple[str, str], ...]
    audience: str
    certificate: str
    token_seconds: int = 3600


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _openssl(*args: str, stdin: bytes | None = None) -> bytes:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LabError("the lab's OAuth server needs the openssl command: install it (apt-get install openssl)")
    done = subprocess.run([openssl, *args], input=stdin, capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        raise LabError(f"openssl {args[0]} failed: {done.stderr.decode(errors='replace').strip()[-200:]}")
    return done.stdout


class SigningKey:
    """An RSA key made with openssl: signs RS256 and publishes itself as a JWK."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "idp-signing.key"
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(self.path))
        text = _openssl("rsa", "-in", str(self.path), "-noout", "-text").decode()
        modulus = re.search(r"modulus:\s*\n((?:\s+[0-9a-f:]+\n)+)", text)
        exponent = re.search(r"publicExponent: (\d+)", text)
        if modulus is None or exponent is None:
            raise LabError("openssl rsa -text printed no modulus or exponent for the lab's signing key")
        n = int(re.sub(r"[\s:]", "", modulus.group(1)), 16)
        e = int(exponent.group(1))
        self.n = n.to_bytes((n.bit_length() + 7) // 8, "big")
        self.e = e.to_bytes((e.bit_length() + 7) // 8, "big")
        self.kid = hashlib.sha256(self.n).hexdigest()[:16]

    def jwk(self) -> dict[str, str]:
        """The public key as RFC 7517/7518 write it."""
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid, "n": _b64url(self.n), "e": _b64url(self.e)}

    def sign(self, header: dict[str, object], claims: dict[str, object]) -> str:
        """A compact JWS (RFC 7515) with RS256: RSASSA-PKCS1-v1_5 over SHA-256."""
        signing_input = (_b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
                         + _b64url(json.dumps(claims, separators=(",", ":")).encode()))
        signature = _openssl("dgst", "-sha256", "-sign", str(self.path), stdin=signing_input.encode())
        return signing_input + "." + _b64url(signature)


class IdentityProvider:
    """The running provider: a token endpoint (HTTPS) and a JWKS endpoint (HTTP) on `spec.address`."""

    def __init__(self, spec: IdpSpec, directory: Path, certificate: CertFiles) -> None:
        self.spec = spec
        self.key = SigningKey(directory)
        # Made at each start, so tests can search every output for a secret nobody typed.
        self.client_secrets = {client: f"{client}-secret-{secrets.token_hex(12)}" for client, _ in spec.clients}
        self._audiences = dict(spec.clients)
        self.tokens_issued = 0
        self._lock = threading.Lock()
        self.https = LabHttpServer(spec.address, {("POST", TOKEN_PATH): self._token},
                                   tls=tls_context(str(certificate.keystore)))
        try:
            self.http = LabHttpServer(spec.address, {("GET", JWKS_PATH): self._jwks})
        except BaseException:
            self.https.close()
            raise
        self.issuer = self.https.url("")

    @property
    def token_url(self) -> str:
        """Where clients ask for tokens (`sasl.oauthbearer.token.endpoint.url`)."""
        return self.https.url(TOKEN_PATH)

    @property
    def jwks_url(self) -> str:
        """Where brokers fetch the signing keys (`sasl.oauthbearer.jwks.endpoint.url`)."""
        return self.http.url(JWKS_PATH)

    def broker_settings(self) -> dict[str, str]:
        """What a broker's JWT-validating listener is told (KIP-768), validator class included.

        Measured on Kafka 4.1.1 while building this lab: with the default
        `sasl.oauthbearer.jwt.validator.class` (DefaultJwtValidator), `OAuthBearerValidatorCallbackHandler`
        never fetched the JWKS and took tampered, expired and wrong-audience tokens alike: that
        class, made without a key resolver (as the handler makes it), delegates to the client-side
        ClientJwtValidator, which checks no signature. Naming BrokerJwtValidator makes the broker
        check signatures, audience, issuer and expiry; tests/kafka/test_oauth.py checks that it does.
        """
        return {
            "sasl.oauthbearer.jwt.validator.class": "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
            "sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
            "sasl.oauthbearer.expected.audience": self.spec.audience,
            "sasl.oauthbearer.expected.issuer": self.issuer,
        }

    def jvm_properties(self) -> dict[str, str]:
        """Kafka 4.x fetches a JWKS or token URL only if this JVM system property lists it (empty by default).

        See Kafka 4.1's docs, configuration/system-properties: since 4.0 no URL is allowed unless listed.
        """
        return {ALLOWED_URLS_PROPERTY: self.jwks_url}

    def client_properties(self, client: str, secret: str | None = None) -> dict[str, str]:
        """The librdkafka properties of `client` (its real secret unless another is given), without the CA."""
        return {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client,
            "sasl.oauthbearer.client.secret": self.client_secrets[client] if secret is None else secret,
            "sasl.oauthbearer.token.endpoint.url": self.token_url,
        }

    def mint(self, client: str, scope: str | None = None, *, lifetime: int | None = None) -> str:
        """A token for `client`, as the token endpoint issues it (tests use it for tokens kprobe did not fetch)."""
        now = int(time.time())
        claims: dict[str, object] = {
            "iss": self.issuer, "sub": client, "aud": self._audiences[client], "client_id": client,
            "iat": now, "nbf": now, "exp": now + (lifetime if lifetime is not None else self.spec.token_seconds),
            "jti": secrets.token_hex(8),
        }
        if scope:
            claims["scope"] = scope
        return self.key.sign({"alg": "RS256", "typ": "JWT", "kid": self.key.kid}, claims)

    # -- the endpoints ------------------------------------------------------------------------
    def _jwks(self, request: HttpRequest) -> HttpResponse:
        return _json(200, {"keys": [self.key.jwk()]})

    def _token(self, request: HttpRequest) -> HttpResponse:
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return _json(400, {"error": "invalid_request",
                               "error_description": "the body must be application/x-www-form-urlencoded"})
        try:
            form = {k: v[0] for k, v in urllib.parse.parse_qs(request.body.decode(), keep_blank_values=True).items()}
        except UnicodeDecodeError:
            return _json(400, {"error": "invalid_request", "error_description": "the body is not UTF-8"})
        client, secret = _client_credentials(request.headers.get("authorization", ""), form)
        expected = self.client_secrets.get(client or "")
        if client is None or expected is None or not secrets.compare_digest(expected, secret or ""):
            # RFC 6749 5.2: unknown client or wrong secret, the same answer (no oracle for ids).
            return _json(401, {"error": "invalid_client", "error_description": "client authentication failed"},
                         {"WWW-Authenticate": 'Basic realm="kprobe lab"'})
        if form.get("grant_type") != "client_credentials":
            return _json(400, {"error": "unsupported_grant_type",
                               "error_description": "this server grants client_credentials only"})
        with self._lock:
            self.tokens_issued += 1
        return _json(200, {"access_token": self.mint(client, form.get("scope") or None), "token_type": "Bearer",
                           "expires_in": self.spec.token_seconds})

    def close(self) -> None:
        """Stop both endpoints."""
        self.https.close()
        self.http.close()


def _client_credentials(authorization: str, form: dict[str, str]) -> tuple[str | None, str | None]:
    """RFC 6749 2.3.1: HTTP basic (id and secret form-encoded, then base64), else the form's fields."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except ValueError:  # binascii.Error and UnicodeDecodeError both are
            return None, None
        client, sep, secret = decoded.partition(":")
        if not sep:
            return None, None
        return urllib.parse.unquote_plus(client), urllib.parse.unquote_plus(secret)
    if "client_id" in form:
        return form["client_id"], form.get("client_secret")
    return None, None


def _json(status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(status, json.dumps(body).encode(),
                        {"Content-Type": "application/json", "Cache-Control": "no-store", **(headers or {})})
