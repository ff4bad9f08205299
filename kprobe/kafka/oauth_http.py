"""The OIDC client credentials grant (RFC 6749 4.4): one bounded request to the token endpoint.

`sasl.oauthbearer.method=oidc`: the client credentials grant (RFC 6749 4.4), as
rdkafka_sasl_oauthbearer_oidc.c sends it: a POST of `grant_type=client_credentials[&scope=...]`
with HTTP basic authentication of `client.id:client.secret`, the token endpoint's certificate
checked against `https.ca.location` / `https.ca.pem` (librdkafka's CA for HTTPS endpoints; the
brokers' `ssl.ca.location` is not used, as librdkafka does not use it) or the system's CAs. The
`access_token` must be a JWT with `exp` and the `sasl.oauthbearer.sub.claim.name` claim, which
librdkafka requires too. `sasl.oauthbearer.extensions` (KIP-342) go with it.

Differences, said plainly: kprobe sends the scope form-encoded (librdkafka sends it raw, which
servers read the same unless it holds `&` or `+`); it asks once per run and does not retry a
temporary HTTP error (librdkafka retries 408, 425, 429 and 5xx up to four times), because a probe
reports what the endpoint answers now; it uses no HTTP proxy. Variants kprobe does not speak (the
jwt-bearer grant, Azure IMDS or AWS metadata authentication: librdkafka's `aws_iam`, a JWT from
STS for OAuth clusters, which is not MSK IAM) go through librdkafka instead.

Neither the client secret nor a token ever goes into a message, a log line or a repr: what the
endpoint says is scrubbed of the secret before it is quoted.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.parse

from kprobe.kafka.oauth_settings import EXTENSION_VALUE, OAuthSettings, display_url
from kprobe.kafka.oauth_token import Token, TokenError
from kprobe.logs import logger
from kprobe.redaction import REDACTED

_LOG = logger("kprobe.kafka.oauth")  # one logger for every token source, as before the split

MAX_ANSWER = 1 << 20  # a token answer is a few kilobytes; a longer one is not a token endpoint
_TEMPORARY = (408, 425, 429, 500, 502, 503, 504)  # what librdkafka would retry


def fetch_token(settings: OAuthSettings, *, timeout: float, deadline: float) -> Token:
    """One client credentials request, bounded by `timeout` per phase and by `deadline`; never cached."""
    import http.client  # only runs that use OIDC pay for these imports
    import ssl

    where = display_url(settings.token_url)
    parts = urllib.parse.urlsplit(settings.token_url)
    https = parts.scheme.lower() == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    started = time.monotonic()

    def left(bound: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TokenError(f"token request to {where}: stopped at the run's deadline", deadline=True)
        return min(bound, remaining)

    conn: http.client.HTTPConnection
    if https:
        location = settings.ca_location
        directory = bool(location) and os.path.isdir(location or "")
        try:
            context = ssl.create_default_context(cafile=None if directory else location,
                                                 capath=location if directory else None, cadata=settings.ca_pem)
        except (ssl.SSLError, OSError, ValueError) as exc:
            source = f"https.ca.location {location}" if location else "https.ca.pem"
            raise TokenError(f"cannot use {source} to check the token endpoint {where}: "
                             f"{getattr(exc, 'reason', None) or exc}") from None
        conn = http.client.HTTPSConnection(host, port, timeout=left(timeout), context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=left(timeout))
    try:
        try:
            conn.connect()
        except ssl.SSLCertVerificationError as exc:
            raise TokenError(f"token endpoint {where}: TLS certificate not accepted: {exc.verify_message}; kprobe, "
                             "like librdkafka, checks it against https.ca.location or https.ca.pem (or the system's "
                             "CAs), not ssl.ca.location") from None
        except ssl.SSLError as exc:
            raise TokenError(f"token endpoint {where}: TLS handshake failed: {exc.reason or exc}") from None
        except OSError as exc:
            raise TokenError(f"token endpoint {where}: {_connect_failure(exc, host, timeout, deadline)}",
                             deadline=_cut_by_deadline(exc, deadline)) from None
        return _exchange(conn, settings, where, timeout=left(timeout), deadline=deadline, started=started)
    finally:
        conn.close()


def _cut_by_deadline(exc: OSError, deadline: float) -> bool:
    return isinstance(exc, TimeoutError) and time.monotonic() >= deadline - 0.01


def _connect_failure(exc: OSError, host: str, timeout: float, deadline: float) -> str:
    import socket

    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(exc, TimeoutError):
        if time.monotonic() >= deadline - 0.01:
            return "stopped at the run's deadline while connecting"
        return f"no connection within {timeout:g}s (a firewall, or a wrong address)"
    if isinstance(exc, socket.gaierror):
        return f"{host} does not resolve from here ({exc.strerror})"
    return f"cannot connect: {exc.strerror or exc}"


def _exchange(conn: object, settings: OAuthSettings, where: str, *, timeout: float, deadline: float,
              started: float) -> Token:
    """Send the request and read the answer on an open connection, cut at `timeout` or the deadline.

    A socket timeout bounds each read; a watchdog bounds them all, so an endpoint that trickles
    its answer a byte at a time cannot hold the run past either bound.
    """
    import http.client
    import socket

    assert isinstance(conn, http.client.HTTPConnection) and conn.sock is not None
    sock = conn.sock
    cut = threading.Event()
    finished = threading.Event()
    race = threading.Lock()  # the cut and the end of the answer: exactly one of them comes first
    cut_by_deadline = deadline <= time.monotonic() + timeout

    def stop() -> None:
        with race:
            if finished.is_set():
                return
            cut.set()
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # wakes a blocked read, TLS or not
        except OSError:
            pass

    def timed_out() -> TokenError:
        if cut_by_deadline and time.monotonic() >= deadline - 0.05:
            return TokenError(f"token request to {where}: stopped at the run's deadline waiting for the answer",
                              deadline=True)
        return TokenError(f"token endpoint {where} accepted the connection but did not answer within {timeout:g}s")

    credentials = f"{settings.client_id}:{settings.client_secret}"
    basic = base64.b64encode(credentials.encode()).decode()
    body = "grant_type=client_credentials"
    if settings.scope:
        body += "&scope=" + urllib.parse.quote(settings.scope, safe="")
    parts = urllib.parse.urlsplit(settings.token_url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    watchdog = threading.Timer(timeout, stop)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            conn.request("POST", target, body=body.encode(), headers={
                "Authorization": f"Basic {basic}", "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded", "User-Agent": "kprobe",
            })
            response = conn.getresponse()
            raw = response.read(MAX_ANSWER + 1)
            with race:
                if not cut.is_set():
                    finished.set()
        except (OSError, http.client.HTTPException) as exc:
            if cut.is_set() or isinstance(exc, TimeoutError):
                raise timed_out() from None
            raise TokenError(f"token endpoint {where}: the connection failed mid-answer "
                             f"({_scrub(str(exc), settings)})") from None
    finally:
        watchdog.cancel()
    if cut.is_set():  # the cut can also read as an early end of headers or body: what came is incomplete
        raise timed_out()
    if len(raw) > MAX_ANSWER:
        raise TokenError(f"token endpoint {where} answered more than {MAX_ANSWER} bytes: not a token answer")
    elapsed = (time.monotonic() - started) * 1000
    status = response.status
    content_type = response.getheader("Content-Type") or ""
    if status >= 300:
        raise TokenError(_http_failure(status, response.reason, content_type, raw,
                                       response.getheader("Location"), settings, where))
    if not content_type.lower().startswith("application/json"):
        raise TokenError(f"token endpoint {where} answered HTTP {status} with {_scrub(content_type, settings) or 'no'} "
                         "content type, not JSON: is this URL the token endpoint?")
    try:
        answer = json.loads(raw)
    except ValueError:
        raise TokenError(f"token endpoint {where} answered HTTP {status} with a body that is not JSON") from None
    token = _token_from(answer, settings, where)
    _LOG.debug("OAUTHBEARER token from %s for client %s in %.0f ms, principal %s, expires in %.0f s", where,
               settings.client_id, elapsed, token.principal, token.expires_at - time.time())
    return token


_OAUTH_HINTS = {
    "invalid_client": "the client id or secret is wrong for this endpoint (sasl.oauthbearer.client.id, "
    "sasl.oauthbearer.client.secret)",
    "unauthorized_client": "this client may not use the client credentials grant",
    "invalid_scope": "sasl.oauthbearer.scope asks for a scope this client may not have",
    "unsupported_grant_type": "this endpoint does not grant client credentials",
    "invalid_request": "the endpoint did not take the request as sent",
}


def _http_failure(status: int, reason: str, content_type: str, raw: bytes, location: str | None,
                  settings: OAuthSettings, where: str) -> str:
    """The token endpoint's refusal in its own words (RFC 6749 5.2's `error` and `error_description`)."""
    text = f"token endpoint {where} answered HTTP {status} {_scrub(reason, settings)}".rstrip()
    if 300 <= status < 400:
        moved = f" to {display_url(location)}" if location else ""
        return text + f": a redirect{moved}, which clients do not follow; use the final URL"
    error = description = None
    if "json" in content_type.lower():
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            error = answer.get("error") if isinstance(answer.get("error"), str) else None
            description = answer.get("error_description")
            description = description if isinstance(description, str) else None
    if error:
        text += f", OAuth error {_scrub(error, settings)}"
        if description:
            text += f" ({_scrub(description, settings)})"
        hint = _OAUTH_HINTS.get(error)
        if hint:
            text += f": {hint}"
    elif status == 404:
        text += ": no token endpoint at this path"
    if status in _TEMPORARY:
        text += "; librdkafka retries this status a few times, kprobe reports it as it is now"
    return text


def _token_from(answer: object, settings: OAuthSettings, where: str) -> Token:
    """The access token and what librdkafka reads from it: `exp` and the subject claim of its JWT."""
    value = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(value, str) or not value:
        raise TokenError(f"token endpoint {where} answered without an access_token string")
    if not EXTENSION_VALUE.fullmatch(value):
        raise TokenError(f"token endpoint {where} answered an access_token with characters a bearer token "
                         "cannot have")
    pieces = value.split(".")
    if len(pieces) != 3:
        raise TokenError(f"token endpoint {where} answered an access_token that is not a JWT "
                         f"({len(pieces) - 1} dots where a JWT has 2); librdkafka refuses it too")
    try:
        claims = json.loads(base64.urlsafe_b64decode(pieces[1] + "=" * (-len(pieces[1]) % 4)))
    except ValueError:
        raise TokenError(f"token endpoint {where} answered a JWT whose claims do not decode") from None
    if not isinstance(claims, dict):
        raise TokenError(f"token endpoint {where} answered a JWT whose claims are not a JSON object")
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)) or exp <= 0:
        raise TokenError(f"token endpoint {where} answered a JWT without a valid exp claim")
    subject = claims.get(settings.sub_claim)
    if not isinstance(subject, str) or not subject:
        raise TokenError(f"token endpoint {where} answered a JWT without a {settings.sub_claim!r} claim "
                         "(sasl.oauthbearer.sub.claim.name)")
    if exp <= time.time():
        raise TokenError(f"token endpoint {where} answered a token that expired at "
                         f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(exp))} (is one clock wrong?)")
    return Token(value, subject, float(exp), settings.extensions)


def _scrub(text: str, settings: OAuthSettings) -> str:
    """What an endpoint said, safe to quote: the secret in any form it was sent in is replaced, length bounded."""
    secret = settings.client_secret
    if secret:
        forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
                 base64.b64encode(secret.encode()).decode().rstrip("="),
                 base64.b64encode(f"{settings.client_id}:{secret}".encode()).decode()}
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
    return text[:300]
