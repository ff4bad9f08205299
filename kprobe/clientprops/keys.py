"""Which client property names kprobe knows, per dialect, and how a file's dialect is told.

Two families of client configuration exist in the wild: the Java client's (`client.properties`,
Kafka's own `--command-config`) and librdkafka's (kcat's `-F`, confluent-kafka, `~/.config/kcat.conf`).
They share a few names (`bootstrap.servers`, `security.protocol`, `sasl.mechanism`) and differ
where it matters: credentials (`sasl.jaas.config` against `sasl.username`) and trust (key stores
against `ssl.ca.location`). A file is told by the names only one family has, the way a person
reading it would; each client ignores (Java) or refuses (librdkafka) the other family's names,
and kprobe says so instead of judging with settings the user's client never sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Dialect = Literal["java", "librdkafka"]

# What names the application and how it uses the cluster, the same in both families: the group it joins,
# the transactional id it registers, the rack it reads from (kprobe.probe.application judges each).
APPLICATION = frozenset({
    "group.id", "group.instance.id", "group.protocol", "transactional.id", "client.rack", "isolation.level",
    "enable.idempotence",
})

# librdkafka names kprobe reads (its own wire client, the OAuth/MSK token makers, the librdkafka
# fallback for GSSAPI), besides passing every property on to its librdkafka clients (--roundtrip).
LIBRDKAFKA_USED = frozenset({
    "bootstrap.servers", "metadata.broker.list", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
    "sasl.username", "sasl.password", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location",
    "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification", "client.dns.lookup",
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.config", "sasl.oauthbearer.grant.type", "sasl.oauthbearer.metadata.authentication.type",
    "sasl.oauthbearer.sub.claim.name", "enable.sasl.oauthbearer.unsecure.jwt", "https.ca.location", "https.ca.pem",
    "sasl.kerberos.service.name", "sasl.kerberos.principal", "sasl.kerberos.keytab", "sasl.kerberos.kinit.cmd",
    # kprobe's own, for Amazon MSK IAM (kprobe.kafka.oauth).
    "aws.region", "aws.profile", "aws.role.arn", "aws.role.session.name",
}) | APPLICATION

# Java client names kprobe turns into the settings above (kprobe.clientprops.java).
JAVA_USED = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.oauthbearer.token.endpoint.url",
    "sasl.kerberos.service.name", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "client.dns.lookup",
}) | APPLICATION

# Names only one family has: what tells a file's dialect.
JAVA_ONLY = frozenset({
    "sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.client.callback.handler.class",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.protocol", "ssl.enabled.protocols", "key.serializer", "value.serializer",
    "key.deserializer", "value.deserializer", "default.api.timeout.ms", "schema.registry.url",
    "basic.auth.credentials.source", "basic.auth.user.info",
})
LIBRDKAFKA_ONLY = frozenset({
    "metadata.broker.list", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
    "enable.ssl.certificate.verification", "enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "https.ca.location",
    "https.ca.pem", "sasl.kerberos.keytab", "sasl.kerberos.principal", "sasl.kerberos.kinit.cmd",
})


def dialect_of(keys: Iterable[str]) -> Dialect | None:
    """The family whose own names the keys use more; None when they use none (or as many of each).

    `sasl.jaas.config` weighs three: it holds a Java client's credentials, while a stray librdkafka
    `sasl.username` beside it is what a Java client ignores.
    """
    keys = set(keys)
    java = len(keys & JAVA_ONLY) + (2 if "sasl.jaas.config" in keys else 0)
    rd = len(keys & LIBRDKAFKA_ONLY)
    if java == rd:
        return None
    return "java" if java > rd else "librdkafka"


def nearest(key: str, dialect: Dialect) -> str | None:
    """The known name a misspelt key most likely meant (`sasl.mechansim` -> `sasl.mechanism`), or None."""
    import difflib  # only when a key is unknown

    known = JAVA_USED if dialect == "java" else LIBRDKAFKA_USED
    match = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
    return match[0] if match and match[0] != key else None
