"""OAUTHBEARER tokens for kprobe's own connections, from librdkafka's property names.

Why kprobe gets tokens itself rather than through librdkafka: the OAUTHBEARER exchange happens on
the bootstrap connection, and librdkafka drops that connection's broker once the advertised
endpoints fail (design notes, section 7). So kprobe reads the same properties a librdkafka client
reads and gets the token the same way, each source in a module of its own:

- the settings, from librdkafka's properties (and kprobe's for Amazon MSK IAM):
  `kprobe.kafka.oauth_settings`;
- `sasl.oauthbearer.method=default` with `enable.sasl.oauthbearer.unsecure.jwt=true`: an unsecured
  JWS, `kprobe.kafka.jws`;
- `sasl.oauthbearer.method=oidc`: the client credentials grant, `kprobe.kafka.oauth_http`;
- Amazon MSK IAM: AWS's signer, `kprobe.kafka.msk`.

This module gives the token to send now (`token_for`) and keeps it.

A fetched token is kept per process, keyed by endpoint, client and a digest of the secret (for MSK
IAM: region, profile and role), until
80% of its lifetime has passed (librdkafka refreshes at the same point), so every identity check
of a run reuses the bootstrap's token; a failure is kept until the run's deadline, so parallel
bootstraps do not each wait on a dead endpoint. Neither the client secret nor a token ever goes
into a message, a log line or a repr: what the endpoint says is scrubbed of the secret before it
is quoted.
"""

from __future__ import annotations

import threading
import time

from kprobe.kafka.jws import unsecured_jws
from kprobe.kafka.oauth_http import fetch_token
from kprobe.kafka.oauth_settings import OAuthSettings, display_url
from kprobe.kafka.oauth_token import Token, TokenError
from kprobe.records import record

REFRESH_AT = 0.8  # of a token's lifetime, as librdkafka refreshes


@record(frozen=False)
class _Entry:
    token: Token | None = None
    refresh_after: float = 0.0  # wall clock: a token is reused until then
    error: TokenError | None = None
    error_until: float = 0.0  # monotonic: a failure is reported again until then


_CACHE: dict[tuple[str, ...], _Entry] = {}
_LOCKS: dict[tuple[str, ...], threading.Lock] = {}
_GUARD = threading.Lock()


def token_for(settings: OAuthSettings, *, timeout: float, deadline: float) -> Token:
    """The token to send now: built (unsecured) or fetched once and reused (oidc, aws_msk_iam).

    `timeout` bounds the connection to the token endpoint and, separately, its answer (for MSK IAM:
    the signer's search for credentials); `deadline` (a `time.monotonic()` value) bounds
    everything, waiting for another thread's request included.
    """
    if settings.method == "unsecured":
        assert settings.unsecured is not None
        now = time.time()
        config = settings.unsecured
        return Token(unsecured_jws(config, now), config.principal, now + config.life_seconds, settings.extensions)
    key = settings.cache_key
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
        source = "AWS's signer" if settings.msk is not None else display_url(settings.token_url)
        raise TokenError(f"stopped at the run's deadline waiting for the token from {source}", deadline=True)
    try:
        entry = _CACHE.setdefault(key, _Entry())
        if entry.token is not None and time.time() < entry.refresh_after:
            return entry.token
        if entry.error is not None and time.monotonic() < entry.error_until:
            raise TokenError(str(entry.error))  # a fresh one: threads must not share a traceback
        try:
            if settings.msk is not None:
                from kprobe.kafka.msk import msk_token  # Amazon's signer: only for a run that signs for MSK

                token = msk_token(settings.msk, timeout=timeout, deadline=deadline)
            else:
                token = fetch_token(settings, timeout=timeout, deadline=deadline)
        except TokenError as exc:
            if not exc.deadline:  # a cut request says nothing; the next caller may have time left
                entry.error, entry.error_until = exc, deadline
            raise
        entry.token, entry.error = token, None
        now = time.time()
        entry.refresh_after = now + REFRESH_AT * (token.expires_at - now)
        return token
    finally:
        lock.release()


def forget_tokens() -> None:
    """Drop every kept token and failure (tests; a long-running caller whose credentials changed)."""
    with _GUARD:
        _CACHE.clear()
