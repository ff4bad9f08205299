"""Findings on bootstrap addresses that gave no metadata, each cause with its own code.

A script or an alert keyed on the code must be sent to the right place: the network
(BOOTSTRAP_UNREACHABLE), the certificate (BOOTSTRAP_TLS_FAILED), the client's security.protocol
(SECURITY_PROTOCOL_MISMATCH), its sasl.mechanism (SASL_MECHANISM_MISMATCH), its credentials
(AUTH_FAILED) or its own certificate (CLIENT_CERTIFICATE_REQUIRED, CLIENT_CERTIFICATE_REFUSED); the
message says it in the listener's own terms. Where the listener told which security.protocol it
wants (kprobe.probe.bootstrap asks it on a second connection), the message and the fix name it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kprobe.findings.catalogue import ERROR, finding
from kprobe.kafka.mechanisms import MSK_IAM
from kprobe.models import BootstrapResult, Finding

_JAAS = "sasl.jaas.config"
_HEADERS = 52  # an IPv4 packet's IP and TCP headers around an answer's bytes, with TCP timestamps

# Managed-service port conventions worth a hint when the protocol or mechanism is wrong
# (Amazon MSK's documented client ports; other services use 9092 for everything).
PORT_CONVENTIONS = {
    9094: "Amazon MSK's TLS port (security.protocol=SSL)",
    9096: "Amazon MSK's SASL/SCRAM port (SASL_SSL, SCRAM-SHA-512)",
    9098: "Amazon MSK's IAM port (SASL_SSL, AWS_MSK_IAM)",
    9194: "Amazon MSK's public TLS port (SSL)",
    9196: "Amazon MSK's public SASL/SCRAM port (SASL_SSL, SCRAM-SHA-512)",
    9198: "Amazon MSK's public IAM port (SASL_SSL, AWS_MSK_IAM)",
}

_TLS_WHAT = {
    "hostname_mismatch": "its certificate does not name the host you bootstrapped with",
    "untrusted": "its certificate does not verify against the trusted CAs",
    "expired": "its certificate has expired",
    "handshake_failed": "the TLS handshake failed",
}
_TLS_FIX = {
    "hostname_mismatch": "Bootstrap with a name the certificate holds (its names are in the message), or have the "
    "broker present a certificate whose subjectAltName includes the name you use.",
    "untrusted": "Give the client the CA that signed the broker certificate (-X ssl.ca.location=...), or have the "
    "broker present a chain that ends at a CA clients trust.",
    "expired": "Renew the broker certificate and reload it (dynamic ssl.keystore.location update, or a rolling "
    "restart).",
    "handshake_failed": "Check that the port is a TLS listener (security.protocol SSL or SASL_SSL on the client, "
    "SSL or SASL_SSL in the broker's listener.security.protocol.map), and the TLS versions both sides allow.",
}



def _sends(protocol: str) -> str:
    """What a client with this security.protocol sends, in words."""
    tls, sasl = protocol.endswith("SSL"), protocol.startswith("SASL_")
    if sasl:
        return "SASL inside TLS" if tls else "SASL in plaintext"
    return "TLS without SASL" if tls else "plaintext Kafka without SASL"
CLIENT_KEY_FIX = ("Give the client a certificate and key signed by a CA the listener trusts: Java clients "
                   "ssl.keystore.location (with ssl.keystore.password and ssl.key.password, or ssl.keystore.type=PEM), "
                   "librdkafka and kprobe ssl.certificate.location and ssl.key.location (ssl.key.password if the key "
                   "is encrypted).")


# {credentials}: the keys the user gave the username and password under (credentials_named).
_SCRAM_FIX = ("Check {credentials}: a SCRAM user exists per mechanism and per cluster "
              "(kafka-configs --describe --entity-type users), and the listener's protocol must match "
              "security.protocol.")
_AUTH_FIX = {
    "PLAIN": "Check {credentials}, and that the listener's protocol matches security.protocol.",
    "SCRAM-SHA-256": _SCRAM_FIX,
    "SCRAM-SHA-512": _SCRAM_FIX,
    "OAUTHBEARER": "The broker refused the token (its reason is in the message): check the token's audience and "
    "issuer against the listener's sasl.oauthbearer.expected.audience and .expected.issuer, its expiry and the "
    "clocks, and that the broker can fetch the identity provider's JWKS.",
    MSK_IAM: "The cluster refused the signed token: check that the region signed for is the cluster's, that the "
    "IAM policy of those credentials allows kafka-cluster:Connect on the cluster, that IAM authentication is on for "
    "this listener (port 9098, or 9198 for public access), and the clock.",
}


def credentials_named(credentials: Mapping[str, str]) -> str:
    """The username and password by the keys the user gave them under, as a fix names them.

    `credentials`: sasl.username and sasl.password -> the key each came from (itself, or sasl.jaas.config in a
    Java client's file: kprobe.clientprops.load); a key not given keeps librdkafka's name. A Java user is sent
    to sasl.jaas.config, which is where their password is, not to a sasl.username their file never had.
    """
    user = credentials.get("sasl.username", "sasl.username")
    password = credentials.get("sasl.password", "sasl.password")
    if user == password == _JAAS:
        return f"the username and password in {_JAAS}"
    if user == _JAAS:
        return f"{password} and the username in {_JAAS}"
    if password == _JAAS:
        return f"{user} and the password in {_JAAS}"
    return f"{user} and {password}"


def an(word: str) -> str:
    """The article before a protocol's name as it is read aloud: "an SSL listener", "a SASL_SSL listener"."""
    return "an" if word.startswith("SSL") else "a"


def _port_hint(address: str) -> str:
    port = int(address.rsplit(":", 1)[1]) if address.rsplit(":", 1)[-1].isdigit() else 0
    return f" Port {port} is {PORT_CONVENTIONS[port]}." if port in PORT_CONVENTIONS else ""


def _wrong_protocol(b: BootstrapResult, sent: str, wanted: str, consequence: str) -> Finding:
    """SECURITY_PROTOCOL_MISMATCH when the listener said which protocol it wants (and its mechanisms)."""
    takes = ", ".join(b.sasl_mechanisms)
    sasl_wanted, sasl_sent = wanted.startswith("SASL_"), sent.startswith("SASL_")
    tls_wanted, tls_sent = wanted.endswith("SSL"), sent.endswith("SSL")
    if tls_wanted and not tls_sent:
        how = "answered with TLS where a Kafka answer was expected"
        seen = ("Clients fail the same way, often with a misleading error (\"ApiVersionRequest failed\", \"the "
                "broker may be too old\")")
    elif tls_sent and not tls_wanted:
        how = "dropped the TLS handshake, and answers Kafka in plaintext"
        seen = "Clients fail the TLS handshake (an unexpected end of the connection)"
    elif sasl_wanted:
        how = ("answered ApiVersions, then closed the connection at the first other request, as a SASL listener "
               "does to a client that skips authentication")
        seen = "Clients see the connection closed, with no authentication error, and retry until they time out"
    else:
        how = "answered SaslHandshake with ILLEGAL_SASL_STATE, as a listener without SASL does"
        seen = "Clients fail at authentication with an illegal SASL state error"
    if sasl_wanted and takes:
        how += f"; asked on a new connection, it listed its SASL mechanisms ({takes})"
    message = (f"Bootstrap {b.address} gave no metadata: you sent {_sends(sent)} (security.protocol="
               f"{sent}) to {an(wanted)} {wanted} listener, which {how}. {seen}. {consequence}"
               + _port_hint(b.address))
    fix = f"Set security.protocol={wanted}"
    if sasl_wanted:
        if len(b.sasl_mechanisms) == 1:
            fix += f" and sasl.mechanism={takes}"
        else:
            fix += f", and sasl.mechanism to {f'one of {takes}' if takes else 'one the listener takes'}"
        fix += ", with that mechanism's credentials (sasl.username and sasl.password; sasl.jaas.config in Java)"
    elif sasl_sent:
        fix += ", without the sasl.* settings: this listener does not authenticate with SASL"
    if tls_wanted and not tls_sent:
        fix += "; trust the CA that signed the broker certificate (ssl.ca.location; ssl.truststore.location in Java)"
    fix += f"; or bootstrap with {wanted}://{b.address}."
    return finding("SECURITY_PROTOCOL_MISMATCH", ERROR, message, fix, bootstrap=b.address)


def _client_certificate(b: BootstrapResult, consequence: str) -> Finding:
    """CLIENT_CERTIFICATE_REQUIRED or CLIENT_CERTIFICATE_REFUSED, from the broker's TLS alert.

    Kafka 4.1.1 on Java 17 answers a missing certificate with "bad certificate" and one from a CA it
    does not trust with "certificate unknown" (measured); with TLS 1.3 the alert comes after the
    client's side of the handshake completed, at its first read, where it looks like a closed connection.
    """
    if b.tls_failure == "client_certificate_required":
        return finding(
            "CLIENT_CERTIFICATE_REQUIRED", ERROR,
            f"Bootstrap {b.address} gave no metadata: the listener requires a client certificate (ssl.client.auth="
            f"required) and the client sent none ({b.error}). Every client without a certificate this listener "
            "trusts fails here; with TLS 1.3 the alert comes after the handshake, at the first request, so clients "
            f"often report a closed connection rather than a TLS error. {consequence}",
            CLIENT_KEY_FIX + " Or, if this listener should not require them, set its ssl.client.auth to none "
            "(listener.name.<listener>.ssl.client.auth).", bootstrap=b.address)
    return finding(
        "CLIENT_CERTIFICATE_REFUSED", ERROR,
        f"Bootstrap {b.address} gave no metadata: the listener refused the client certificate sent ({b.error}): "
        "its CA is not in the listener's truststore, or it has expired or is not meant for clients. Every client "
        f"with this certificate fails here. {consequence}",
        "Use a client certificate (ssl.certificate.location and ssl.key.location; ssl.keystore.location in Java) "
        "signed by a CA the listener trusts, or add its CA to the listener's truststore "
        "(listener.name.<listener>.ssl.truststore.location, or ssl.truststore.location) and reload it; check its "
        "dates and that its extendedKeyUsage allows clientAuth.", bootstrap=b.address)


def path_mtu_finding(b: BootstrapResult) -> Finding:
    """PATH_MTU_BLACKHOLE: small answers arrive from the bootstrap, its full Metadata answer never does.

    Measured in the network-namespace lab (a VPN vantage whose path drops packets over 1,000 bytes,
    no ICMP): the TCP connect, ApiVersions and a brokers-only Metadata answer arrive, a Metadata answer
    for every topic never does, and real clients produce and consume small records (their Metadata
    asks for one topic) while `kcat -L` hangs. Before, this read as BOOTSTRAP_UNREACHABLE, "check the
    address and port", which sent people to the wrong end of the tunnel.
    """
    from kprobe.kafka import pathmtu  # the ladder's steps: only a run that lost its full answer loads it

    size = ""
    if b.largest_answer_bytes and b.largest_answer_bytes + pathmtu.STEP <= pathmtu.TOP:
        # The ladder stopped at a loss: the MTU lies between the packet that arrived and the one that did not.
        low = b.largest_answer_bytes + _HEADERS
        size = (f" (answers of up to {b.largest_answer_bytes} bytes arrived and one about {pathmtu.STEP} bytes "
                f"larger did not: the path MTU is about {low} bytes, between {low} and {low + pathmtu.STEP} with "
                "IPv4 and TCP headers)")
    elif b.largest_answer_bytes:
        size = f" (answers of {b.largest_answer_bytes} bytes, one full packet, arrived)"
    return finding(
        "PATH_MTU_BLACKHOLE", ERROR,
        f"Bootstrap {b.address} answers small requests{size}, but its full Metadata answer (every topic) never "
        "arrived: packets above some size are lost between here and the broker, with no ICMP message to say so "
        "(a path-MTU black hole, common on VPNs and tunnels). Clients connect, and produce and consume small "
        "records, while anything with a large answer hangs until it times out: metadata for many topics, "
        "`kcat -L`, large fetches and large batches. kprobe went on with the brokers-only answer.",
        "Clamp TCP MSS to the path MTU on the tunnel or VPN gateway (nftables: `tcp flags syn tcp option maxseg "
        "size set rt mtu`; iptables: `--clamp-mss-to-pmtu`), lower the tunnel interface's MTU, or let ICMP "
        "fragmentation-needed (IPv4 type 3 code 4) and packet-too-big (ICMPv6 type 2) through every firewall on "
        "the path.", bootstrap=b.address)


def bootstrap_finding(b: BootstrapResult, answered_any: bool, credentials: Mapping[str, str] | None = None) -> Finding:
    """Why one bootstrap address gave no metadata, and whether clients can still start elsewhere.

    `credentials`: where the user gave the username and password (credentials_named), for AUTH_FAILED's fix.
    """
    consequence = (
        "The other bootstrap addresses answered, so clients that try them will still start, but "
        "this one is dead weight in bootstrap.servers."
        if answered_any else "No client can start from here with this bootstrap list."
    )
    sent = b.protocol or "PLAINTEXT"
    if b.kraft_controller:
        node = f" (node {b.node_id})" if b.node_id is not None else ""
        return finding(
            "BOOTSTRAP_IS_CONTROLLER", ERROR,
            f"Bootstrap {b.address} is a KRaft controller listener{node}, not a broker's: it answers ApiVersions with "
            "the controller's requests and offers no Metadata, so producers and consumers fail at their first "
            "request (Java: \"The node does not support METADATA\", UnsupportedVersionException; librdkafka retries "
            f"until it times out). {consequence}",
            f"Bootstrap clients to a broker listener (bootstrap.servers). For admin tools that talk to the "
            f"controllers (bootstrap.controllers, --bootstrap-controller), pass {b.address} with --controllers "
            "instead of -b.", bootstrap=b.address)
    if b.wanted_protocol is not None and b.wanted_protocol != sent:
        return _wrong_protocol(b, sent, b.wanted_protocol, consequence)
    if b.tls_failure in ("client_certificate_required", "client_certificate_refused"):
        return _client_certificate(b, consequence)
    if b.speaks_tls is True:
        return finding(
            "SECURITY_PROTOCOL_MISMATCH", ERROR,
            f"Bootstrap {b.address} gave no metadata: you sent plaintext Kafka (security.protocol={sent}) to a TLS "
            "listener, which answered with TLS where a Kafka answer was expected. Clients fail the same way, often "
            f"with a misleading error (\"ApiVersionRequest failed\", \"the broker may be too old\"). {consequence}"
            + _port_hint(b.address),
            "Set security.protocol=SSL (SASL_SSL if the listener also wants SASL), or bootstrap with "
            f"SSL://{b.address}.", bootstrap=b.address)
    if b.speaks_tls is False:
        return finding(
            "SECURITY_PROTOCOL_MISMATCH", ERROR,
            f"Bootstrap {b.address} gave no metadata: you sent TLS (security.protocol={sent}) to a plaintext "
            f"listener, which dropped the handshake ({b.error}). {consequence}" + _port_hint(b.address),
            "Set security.protocol=PLAINTEXT (SASL_PLAINTEXT if the listener wants SASL), or bootstrap with a "
            "TLS listener's port.", bootstrap=b.address)
    if b.tls_failure is not None:
        return finding(
            "BOOTSTRAP_TLS_FAILED", ERROR,
            f"Bootstrap {b.address} gave no metadata: {_TLS_WHAT[b.tls_failure]} ({b.error}). Every client that "
            f"checks certificates the same way fails here. {consequence}",
            _TLS_FIX[b.tls_failure], bootstrap=b.address)
    if b.token_unavailable:
        fix = ("Give the signer AWS credentials (the default chain, -X aws.profile or -X aws.role.arn) and a region "
               "(-X aws.region), and check that the role may be assumed; the broker is not at fault yet."
               if b.sasl_mechanism == MSK_IAM else
               "Check sasl.oauthbearer.client.id and the client secret, sasl.oauthbearer.token.endpoint.url, the "
               "scope, and that the token endpoint's certificate verifies (https.ca.location); the broker is not at "
               "fault yet.")
        return finding("OAUTH_TOKEN_UNAVAILABLE", ERROR, f"Bootstrap {b.address} gave no metadata: {b.error}. "
                       f"{consequence}", fix, bootstrap=b.address)
    if b.sasl_mechanisms:
        takes = ", ".join(b.sasl_mechanisms)
        return finding(
            "SASL_MECHANISM_MISMATCH", ERROR,
            f"Bootstrap {b.address} gave no metadata: {b.error}. {consequence}" + _port_hint(b.address),
            f"Set sasl.mechanism to one the listener takes ({takes}), with credentials for that mechanism.",
            bootstrap=b.address)
    what = {
        "dns_failed": "its name does not resolve from here",
        "refused": "the connection was refused (nothing listens there)",
        "timeout": "it did not answer in time (a firewall, a wrong address, or an overloaded broker)",
        "auth_failed": "it refused the credentials",
    }.get(b.status, "the request failed")
    fix = {
        "auth_failed": _AUTH_FIX.get(b.sasl_mechanism or "", _AUTH_FIX["PLAIN"]).format(
            credentials=credentials_named(credentials or {})),
        "dns_failed": "Use a name this network resolves, or an IP address, in bootstrap.servers.",
    }.get(
        b.status,
        "Check the address and port against the broker's `listeners`, and that the port is open "
        "between here and the broker.",
    )
    code = "AUTH_FAILED" if b.status == "auth_failed" else "BOOTSTRAP_UNREACHABLE"
    return finding(code, ERROR, f"Bootstrap {b.address} gave no metadata: {what} ({b.error}). {consequence}",
                   fix, bootstrap=b.address)
