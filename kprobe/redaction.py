"""Which property values are secrets, in a module light enough for every start.

The CLI scrubs secrets from every message before it knows which command runs (a typo in
`-X sasl.password ...` fails in argument parsing), so this rule must load without the probe's
modules: `kprobe --help` pays for a regex, not for the wire client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# `passphrase` and `private.key` cover librdkafka's OAUTHBEARER assertion keys
# (sasl.oauthbearer.assertion.private.key.pem/.file/.passphrase), which it marks sensitive too.
_SECRET_RE = re.compile(r"(password|passphrase|secret|credential|token|private\.key)", re.IGNORECASE)
REDACTED = "[redacted]"
# Secrets whose names do not say so: librdkafka's unsecured-token config, a PEM key, and a Java
# client's JAAS line (Kafka types sasl.jaas.config PASSWORD: a PlainLoginModule line holds one).
# A Java keystore's inline PEM key, and Schema Registry's `user:password` that Confluent Cloud's files carry.
_SECRET_KEYS = ("sasl.oauthbearer.config", "ssl.key.pem", "sasl.jaas.config", "ssl.keystore.key",
                "basic.auth.user.info")


def is_secret(key: str) -> bool:
    """Whether a property's value must never be shown (passwords, secrets, tokens, private keys).

    Generous on purpose: `sasl.oauthbearer.token.endpoint.url` and the client id's long alias
    (`...client.credentials.client.id`) match too. Hiding a URL costs a line of context; showing a
    URL that carries credentials (`https://id:secret@idp/...`) would cost the secret.
    """
    return bool(_SECRET_RE.search(key)) or key in _SECRET_KEYS


def redact(props: Mapping[str, str]) -> dict[str, str]:
    """Properties safe to print or write into a report."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in props.items()}
