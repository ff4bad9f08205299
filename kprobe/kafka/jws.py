"""The unsecured JWS librdkafka builds for OAUTHBEARER development setups.

`sasl.oauthbearer.method=default` with `enable.sasl.oauthbearer.unsecure.jwt=true`: an unsecured
JWS (RFC 7515 appendix A.5, `{"alg":"none"}`) built from `sasl.oauthbearer.config`
(`principal=... scope=... lifeSeconds=... extension_NAME=value`), byte for byte as librdkafka's
rdkafka_sasl_oauthbearer.c builds it (tests/kafka/test_oauth.py checks its unit-test vectors). Without
that flag librdkafka has no token (only an application callback would give one, and kprobe
cannot call yours), so kprobe refuses the settings rather than succeed where your client fails.
"""

from __future__ import annotations

import base64

from kprobe.kafka.oauth_settings import UnsecuredConfig


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jws(config: UnsecuredConfig, now: float) -> str:
    """The unsecured JWS librdkafka builds: `{"alg":"none"}`, its claims, and an empty signature.

    The claims are written as librdkafka writes them (times with three decimals, scope as a JSON
    array), so a broker sees the same bytes from kprobe as from the user's client.
    """
    scope = ""
    if config.scopes:
        scope = f',"{config.scope_claim}":[' + ",".join(f'"{s}"' for s in config.scopes) + "]"
    claims = (f'{{"{config.principal_claim}":"{config.principal}","iat":{now:.3f},'
              f'"exp":{now + config.life_seconds:.3f}{scope}}}')
    return "eyJhbGciOiJub25lIn0." + _b64url(claims.encode()) + "."
