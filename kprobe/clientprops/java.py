"""A Java client's properties, turned into the settings kprobe's clients take (librdkafka's names).

kprobe's own wire client and its librdkafka clients (--roundtrip) both take librdkafka's names, so a
Java `client.properties` is translated once, here, into those: `sasl.jaas.config`'s login module
into `sasl.username`/`sasl.password`, an OIDC or unsecured OAUTHBEARER set-up or Amazon MSK IAM; a
trust or key store (JKS, PKCS12, PEM) into PEM text in memory (`ssl.ca.pem`, `ssl.certificate.pem`,
`ssl.key.pem`); an empty `ssl.endpoint.identification.algorithm` into librdkafka's `none`. What the
Java client would refuse is refused here, in one line; what it would ignore is named in a warning.
"""

from __future__ import annotations

from collections.abc import Mapping

from kprobe.clientprops.jaas import LoginModule, parse_jaas
from kprobe.clientprops.keys import APPLICATION
from kprobe.errors import UsageError
from kprobe.records import field, record

_DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
# The OIDC handler's class, under its Kafka 3.1-3.3 (`...secured.`) and 3.4+ packages.
_OIDC_HANDLER = "OAuthBearerLoginCallbackHandler"
_MSK_HANDLERS = ("IAMOAuthBearerLoginCallbackHandler", "IAMClientCallbackHandler")
# Options each login module takes that kprobe does not need to judge a connection.
_QUIET_OPTIONS = {"awsDebugCreds", "awsMaxRetries", "awsMaxBackOffTimeMs", "useKeyTab", "storeKey", "debug",
                  "useTicketCache", "doNotPrompt"}


@record(frozen=False)
class Translated:
    """Librdkafka-named settings from one Java file, and what the user must hear about it."""

    props: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def translate(java: Mapping[str, str], *, source: str) -> Translated:
    """The settings a Java client would use, under librdkafka's names.

    `source` names the file in messages. Keys outside kprobe.clientprops.keys.JAVA_USED are the
    caller's to warn about; this covers the ones it knows.
    """
    out = Translated()
    props = out.props
    for key in ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.oauthbearer.token.endpoint.url",
                "sasl.kerberos.service.name", *sorted(APPLICATION)):
        if java.get(key, "").strip():
            props[key] = java[key].strip()
    lookup = java.get("client.dns.lookup", "").strip()
    if lookup:
        if lookup not in _DNS_LOOKUPS:
            raise UsageError(f"bad client.dns.lookup {lookup!r} in {source}: a Java client (3.0+) takes "
                             f"{' or '.join(_DNS_LOOKUPS)} (`default` was removed in Kafka 3.0)")
        props["client.dns.lookup"] = lookup
    if "ssl.endpoint.identification.algorithm" in java:
        algorithm = java["ssl.endpoint.identification.algorithm"].strip()
        # Empty turns the host name check off in the Java client; librdkafka says `none`.
        props["ssl.endpoint.identification.algorithm"] = algorithm.lower() if algorithm else "none"
    _trust(java, props, source)
    _keys(java, props, source)
    jaas = java.get("sasl.jaas.config", "")
    protocol = java.get("security.protocol", "PLAINTEXT").strip().upper()
    if jaas.strip():
        _login(parse_jaas(jaas, source=source), java, out, source)
    elif protocol.startswith("SASL_"):
        mechanism = java.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise UsageError(f"{source} sets security.protocol={protocol} and sasl.mechanism={mechanism} but no "
                             "sasl.jaas.config, so a Java client has no credentials (\"Could not find a 'KafkaClient' "
                             "entry in the JAAS configuration\"): add sasl.jaas.config with the user and password")
    if protocol.startswith("SASL_") and not java.get("sasl.mechanism", "").strip():
        # Java's default mechanism is GSSAPI; a login module for another one is the common slip.
        module = parse_jaas(jaas, source=source).simple_name if jaas.strip() else None
        wants = {"PlainLoginModule": "PLAIN", "ScramLoginModule": "SCRAM-SHA-512",
                 "OAuthBearerLoginModule": "OAUTHBEARER", "IAMLoginModule": "AWS_MSK_IAM"}.get(module or "")
        if wants:
            raise UsageError(f"{source} sets no sasl.mechanism, so a Java client uses GSSAPI (Kerberos), while its "
                             f"sasl.jaas.config holds {module}: set sasl.mechanism={wants}"
                             + (" (or SCRAM-SHA-256, as the listener takes)" if module == "ScramLoginModule" else ""))
        props["sasl.mechanism"] = "GSSAPI"
    return out


def _login(module: LoginModule, java: Mapping[str, str], out: Translated, source: str) -> None:
    """The credentials a login module carries, under librdkafka's names."""
    props, options = out.props, dict(module.options)
    name = module.simple_name
    used: set[str] = set()
    handler = java.get("sasl.login.callback.handler.class", "") + " " + java.get("sasl.client.callback.handler.class",
                                                                                 "")
    if name in ("PlainLoginModule", "ScramLoginModule"):
        for option, key in (("username", "sasl.username"), ("password", "sasl.password")):
            if option in options:
                props[key] = options[option]
                used.add(option)
        if "username" not in options or "password" not in options:
            raise UsageError(f"sasl.jaas.config in {source}: {name} needs username=\"...\" and password=\"...\"")
        if options.get("tokenauth", "").lower() == "true":
            out.warnings.append(f"{source}: sasl.jaas.config's tokenauth=true (a delegation token) is sent as a "
                                "plain SCRAM user by kprobe")
        used.add("tokenauth")
    elif name == "IAMLoginModule" or any(h in handler for h in _MSK_HANDLERS):
        props["sasl.mechanism"] = "AWS_MSK_IAM"
        for option, key in (("awsProfileName", "aws.profile"), ("awsRoleArn", "aws.role.arn"),
                            ("awsRoleSessionName", "aws.role.session.name")):
            if option in options:
                props[key] = options[option]
                used.add(option)
    elif name == "OAuthBearerLoginModule":
        if _OIDC_HANDLER in handler or java.get("sasl.oauthbearer.token.endpoint.url", "").strip():
            used |= _oidc(options, props, source)
        else:
            used |= _unsecured(options, props, source)
    elif name == "Krb5LoginModule":
        for option, key in (("keyTab", "sasl.kerberos.keytab"), ("principal", "sasl.kerberos.principal")):
            if option in options:
                props[key] = options[option]
                used.add(option)
        used.add("serviceName")
        if "serviceName" in options and "sasl.kerberos.service.name" not in props:
            props["sasl.kerberos.service.name"] = options["serviceName"]
    else:
        out.warnings.append(f"{source}: sasl.jaas.config's login module {module.class_name} is not one kprobe reads "
                            "(PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule, IAMLoginModule, "
                            "Krb5LoginModule): it goes without credentials")
        return
    for option in sorted(set(options) - used - _QUIET_OPTIONS):
        out.warnings.append(f"{source}: sasl.jaas.config option {option} of {name} is not used by kprobe")


def _oidc(options: Mapping[str, str], props: dict[str, str], source: str) -> set[str]:
    """KIP-768's client credentials login: the JAAS options hold the client and the scope."""
    props["sasl.oauthbearer.method"] = "oidc"
    if not props.get("sasl.oauthbearer.token.endpoint.url"):
        raise UsageError(f"{source}: an OIDC OAUTHBEARER login needs sasl.oauthbearer.token.endpoint.url")
    used = set()
    for option, key in (("clientId", "sasl.oauthbearer.client.id"), ("clientSecret", "sasl.oauthbearer.client.secret"),
                        ("scope", "sasl.oauthbearer.scope")):
        if option in options:
            props[key] = options[option]
            used.add(option)
    extensions = [(k.removeprefix("extension_"), v) for k, v in options.items() if k.startswith("extension_")]
    if extensions:
        props["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in extensions)
        used |= {f"extension_{k}" for k, _ in extensions}
    # The token endpoint's own trust, which Kafka reads from the JAAS options (JaasOptionsUtils).
    if options.get("ssl.truststore.location") or options.get("ssl.truststore.certificates"):
        from kprobe.clientprops.keystores import StoreError, truststore_pem

        try:
            props["https.ca.pem"] = truststore_pem(options.get("ssl.truststore.location"),
                                                   options.get("ssl.truststore.type"),
                                                   options.get("ssl.truststore.password"),
                                                   certificates=options.get("ssl.truststore.certificates"))
        except StoreError as exc:
            raise UsageError(f"{source}: sasl.jaas.config's token endpoint truststore: {exc}") from None
        used |= {"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
                 "ssl.truststore.certificates"}
    return used


def _unsecured(options: Mapping[str, str], props: dict[str, str], source: str) -> set[str]:
    """Kafka's unsecured (unsigned, development) tokens, as librdkafka's sasl.oauthbearer.config says them."""
    claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
    principal = options.get(f"unsecuredLoginStringClaim_{claim}")
    if not principal:
        raise UsageError(f"sasl.jaas.config in {source}: an unsecured OAUTHBEARER login needs "
                         f"unsecuredLoginStringClaim_{claim}=\"...\" (the principal); for an identity provider, "
                         "set sasl.login.callback.handler.class and sasl.oauthbearer.token.endpoint.url")
    parts = [f"principal={principal}"]
    used = {f"unsecuredLoginStringClaim_{claim}", "unsecuredLoginPrincipalClaimName", "unsecuredLoginScopeClaimName"}
    if claim != "sub":
        parts.append(f"principalClaimName={claim}")
    if scope_claim != "scope":
        parts.append(f"scopeClaimName={scope_claim}")
    scopes = options.get(f"unsecuredLoginListClaim_{scope_claim}")
    if scopes:  # Kafka's list claims start with their own separator: ",a,b"
        parts.append("scope=" + ",".join(s for s in scopes[1:].split(scopes[0]) if s))
        used.add(f"unsecuredLoginListClaim_{scope_claim}")
    if "unsecuredLoginLifetimeSeconds" in options:
        parts.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
        used.add("unsecuredLoginLifetimeSeconds")
    for key, value in options.items():
        if key.startswith("unsecuredLoginExtension_"):
            parts.append(f"extension_{key.removeprefix('unsecuredLoginExtension_')}={value}")
            used.add(key)
    props["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    props["sasl.oauthbearer.config"] = " ".join(parts)
    return used


def _trust(java: Mapping[str, str], props: dict[str, str], source: str) -> None:
    """ssl.truststore.* as PEM text: what both of kprobe's TLS stacks take."""
    location = java.get("ssl.truststore.location", "").strip() or None
    inline = java.get("ssl.truststore.certificates", "").strip() or None
    if not (location or inline):
        return
    from kprobe.clientprops.keystores import StoreError, truststore_pem

    try:
        props["ssl.ca.pem"] = truststore_pem(location, java.get("ssl.truststore.type", "").strip() or None,
                                             java.get("ssl.truststore.password") or None, certificates=inline)
    except StoreError as exc:
        raise UsageError(f"{source}: {exc}") from None


def _keys(java: Mapping[str, str], props: dict[str, str], source: str) -> None:
    """ssl.keystore.* (mutual TLS) as a PEM certificate chain and key, in memory."""
    location = java.get("ssl.keystore.location", "").strip() or None
    chain = java.get("ssl.keystore.certificate.chain", "").strip() or None
    key = java.get("ssl.keystore.key", "").strip() or None
    if not (location or chain or key):
        return
    from kprobe.clientprops.keystores import StoreError, keystore_pair

    try:
        pair = keystore_pair(location, java.get("ssl.keystore.type", "").strip() or None,
                             java.get("ssl.keystore.password") or None, java.get("ssl.key.password") or None,
                             chain=chain, key=key)
    except StoreError as exc:
        raise UsageError(f"{source}: {exc}") from None
    props["ssl.certificate.pem"] = pair.certificate_chain_pem
    props["ssl.key.pem"] = pair.private_key_pem
