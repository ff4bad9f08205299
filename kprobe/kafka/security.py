"""Security settings of a connection, from librdkafka's property names.

A leaf module: the CLI validates `security.protocol` with it before any I/O, the probe derives
each bootstrap's settings once per run with it, and the Kafka connection honours them, so none
of the three has to import another to agree on what `-X security.protocol=SASL_SSL` means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast, get_args

from kprobe.errors import UsageError
from kprobe.kafka.mechanisms import MECHANISMS, MSK_IAM
from kprobe.models import BootstrapAddress, Protocol
from kprobe.records import record

if TYPE_CHECKING:
    from kprobe.kafka.oauth_settings import OAuthSettings

PROTOCOLS: tuple[Protocol, ...] = get_args(Protocol)


@record
class Security:
    """The subset of librdkafka's security properties the wire client can honour."""

    protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    # The same as PEM text in memory (librdkafka's ssl.ca.pem, ssl.certificate.pem, ssl.key.pem): what a
    # Java client's trust and key stores become (kprobe.clientprops), so no key is ever written to disk.
    ssl_ca_pem: str | None = None
    ssl_certificate_pem: str | None = None
    ssl_key_pem: str | None = None
    ssl_verify_hostname: bool = True
    ssl_verify: bool = True
    # OAUTHBEARER only: where the token comes from (the client secret is kept out of its repr too).
    oauth: OAuthSettings | None = None

    @property
    def uses_tls(self) -> bool:
        """Whether the listener expects a TLS handshake first."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether the listener expects SASL before any other request."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def spoken_by_kprobe(self) -> bool:
        """Whether kprobe's own client can authenticate; else librdkafka does, without identity checks."""
        return self.not_spoken_why is None

    @property
    def not_spoken_why(self) -> str | None:
        """What kprobe cannot speak itself on this listener (a SASL mechanism or variant), or None."""
        if not self.uses_sasl:
            return None
        if self.sasl_mechanism not in MECHANISMS:
            return f"SASL {self.sasl_mechanism}"
        if self.oauth is not None and not self.oauth.spoken:
            return self.oauth.why_not or "this OAUTHBEARER variant"
        return None

    def __repr__(self) -> str:  # never let a password reach a log through repr()
        return f"Security(protocol={self.protocol!r}, sasl_mechanism={self.sasl_mechanism!r})"


def security_from(props: Mapping[str, str], address: BootstrapAddress | None = None) -> Security:
    """The wire client's security settings from librdkafka properties and an address prefix."""
    protocol = (props.get("security.protocol") or (address.protocol if address else None) or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise UsageError(f"bad security.protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}")
    verify = props.get("enable.ssl.certificate.verification", "true").lower() != "false"
    algo = props.get("ssl.endpoint.identification.algorithm", "https").lower()
    asked = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "PLAIN").strip().upper()
    # AWS_MSK_IAM (the Java client's name) is OAUTHBEARER on the wire with a token from AWS's signer,
    # as AWS's Python, Go and JavaScript signers send it: the handshake and the report say OAUTHBEARER.
    mechanism = "OAUTHBEARER" if asked == MSK_IAM else asked
    # Only where SASL is spoken: a PLAINTEXT run with leftover OAuth properties is not refused (and the
    # OAuth settings' code, with hashlib and urllib, loads only for a run that takes a token).
    oauth = None
    if mechanism == "OAUTHBEARER" and protocol.startswith("SASL_"):
        from kprobe.kafka.oauth_settings import settings_from

        oauth = settings_from(props, address.host if address else None, mechanism=asked)
    return Security(
        protocol=cast(Protocol, protocol),
        sasl_mechanism=mechanism,
        sasl_username=props.get("sasl.username"),
        sasl_password=props.get("sasl.password"),
        ssl_cafile=props.get("ssl.ca.location"),
        ssl_certfile=props.get("ssl.certificate.location"),
        ssl_keyfile=props.get("ssl.key.location"),
        ssl_key_password=props.get("ssl.key.password"),
        ssl_ca_pem=props.get("ssl.ca.pem"),
        ssl_certificate_pem=props.get("ssl.certificate.pem"),
        ssl_key_pem=props.get("ssl.key.pem"),
        ssl_verify_hostname=verify and algo == "https",
        ssl_verify=verify,
        oauth=oauth,
    )
