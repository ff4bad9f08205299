"""How a client gets its OAUTHBEARER token, from librdkafka's property names (and kprobe's for Amazon MSK IAM).

`settings_from` reads `sasl.oauthbearer.*` (and `aws.*`, `sasl.jaas.config` for MSK IAM) and
refuses, with a UsageError naming the property, what librdkafka would refuse. Nothing here does
I/O beyond looking for files and AWS's signer: the tokens themselves are `kprobe.kafka.oauth`'s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Literal

from kprobe.errors import UsageError
from kprobe.kafka.mechanisms import MSK_IAM
from kprobe.records import field, record

Method = Literal["unsecured", "oidc", "aws_msk_iam"]
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")  # RFC 7628 3.1: VCHAR, SP, HTAB, CR, LF


@record
class UnsecuredConfig:
    """`sasl.oauthbearer.config` for librdkafka's unsecured token, parsed."""

    principal: str
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    scopes: tuple[str, ...] = ()
    life_seconds: int = 3600
    extensions: tuple[tuple[str, str], ...] = ()


@record
class MskIam:
    """Amazon MSK IAM: the region the token is signed for (and where that came from), and whose credentials.

    None of it is a secret; the credentials themselves stay inside AWS's signer.
    """

    region: str
    region_from: str  # "aws.region", "the MSK broker name", "AWS_REGION", ...: said when the broker refuses
    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str | None = None


@record
class OAuthSettings:
    """How this client gets its OAUTHBEARER token; the secret and the unsecured config never in repr.

    `spoken` is False for variants kprobe does not implement (`why_not` says which), which then
    go through librdkafka.
    """

    method: Method
    extensions: tuple[tuple[str, str], ...] = ()
    unsecured: UnsecuredConfig | None = field(default=None, repr=False)
    token_url: str = ""
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    scope: str | None = None
    sub_claim: str = "sub"
    ca_location: str | None = None
    ca_pem: str | None = field(default=None, repr=False)
    spoken: bool = True
    why_not: str | None = None
    msk: MskIam | None = None

    def __repr__(self) -> str:  # never a secret, never a URL's credentials
        where = f", token_url={display_url(self.token_url)!r}, client_id={self.client_id!r}" if self.token_url else ""
        if self.msk is not None:
            where = f", region={self.msk.region!r}"
        return f"OAuthSettings(method={self.method!r}{where})"

    @property
    def cache_key(self) -> tuple[str, ...]:
        """What makes two settings get the same token; the secret only as a digest."""
        if self.msk is not None:
            msk = self.msk
            return ("aws_msk_iam", msk.region, msk.profile or "", msk.role_arn or "", msk.role_session_name or "")
        return (self.token_url, self.client_id, hashlib.sha256(self.client_secret.encode()).hexdigest(),
                self.scope or "", self.sub_claim, self.ca_location or "",
                hashlib.sha256((self.ca_pem or "").encode()).hexdigest(), repr(self.extensions))


def display_url(url: str) -> str:
    """The URL to name in a message: scheme, host, port and path; credentials and query left out."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}" + ("?…" if parts.query else "")


# -- settings -------------------------------------------------------------------------------------

def settings_from(props: Mapping[str, str], host: str | None = None, *,
                  mechanism: str = "OAUTHBEARER") -> OAuthSettings:
    """OAUTHBEARER settings from librdkafka properties; a UsageError where librdkafka would refuse them.

    `mechanism` is what the user set: AWS_MSK_IAM (the Java client's name) means the MSK IAM
    token, as `sasl.oauthbearer.method=aws_msk_iam` does; `host` is the bootstrap host, which
    names the region on an MSK broker name.

    No message quotes a secret property's value: `sasl.oauthbearer.config` is one (librdkafka
    marks it sensitive), so its errors name the entry, not what it holds.
    """
    method = (props.get("sasl.oauthbearer.method") or "default").strip().lower()
    unsecure = _flag(props, "enable.sasl.oauthbearer.unsecure.jwt")
    if mechanism == MSK_IAM or method == "aws_msk_iam":
        if method not in ("default", "aws_msk_iam"):
            raise UsageError(f"sasl.mechanism=AWS_MSK_IAM and sasl.oauthbearer.method={method} contradict each other: "
                             "the MSK IAM token comes from AWS's signer, not a token endpoint; drop one")
        if unsecure:
            raise UsageError("enable.sasl.oauthbearer.unsecure.jwt and Amazon MSK IAM are mutually exclusive: "
                             "MSK takes only IAM tokens; drop enable.sasl.oauthbearer.unsecure.jwt")
        return _msk_settings(props, host)
    if method == "oidc":
        if unsecure:
            raise UsageError("enable.sasl.oauthbearer.unsecure.jwt and sasl.oauthbearer.method=oidc are mutually "
                             "exclusive (as in librdkafka): drop one")
        return _oidc_settings(props)
    if method != "default":
        raise UsageError(f"bad sasl.oauthbearer.method {method!r}: use default or oidc (librdkafka's), or "
                         "aws_msk_iam (kprobe's, for Amazon MSK IAM)")
    if not unsecure:
        raise UsageError(
            "sasl.mechanism=OAUTHBEARER needs a token source: sasl.oauthbearer.method=oidc with "
            "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret and sasl.oauthbearer.token.endpoint.url; "
            "or, for an unsigned development token, enable.sasl.oauthbearer.unsecure.jwt=true with "
            "sasl.oauthbearer.config=principal=NAME (librdkafka has no token otherwise; an application's "
            "oauth_cb cannot be called from here); or, for Amazon MSK IAM, sasl.mechanism=AWS_MSK_IAM")
    config = parse_unsecured_config(props.get("sasl.oauthbearer.config", ""))
    return OAuthSettings(method="unsecured", extensions=config.extensions, unsecured=config)


def _flag(props: Mapping[str, str], key: str) -> bool:
    """A librdkafka boolean: true, t or 1; false, f or 0 (case-insensitive)."""
    value = props.get(key, "false").strip().lower()
    if value not in ("true", "t", "1", "false", "f", "0"):
        raise UsageError(f"bad {key} {value!r}: use true or false")
    return value in ("true", "t", "1")


def _oidc_settings(props: Mapping[str, str]) -> OAuthSettings:
    grant = (props.get("sasl.oauthbearer.grant.type") or "client_credentials").strip()
    metadata = (props.get("sasl.oauthbearer.metadata.authentication.type") or "none").strip().lower()
    if metadata != "none":
        return OAuthSettings(method="oidc", spoken=False,
                             why_not=f"OAUTHBEARER with sasl.oauthbearer.metadata.authentication.type={metadata}")
    if grant != "client_credentials":
        return OAuthSettings(method="oidc", spoken=False, why_not=f"OAUTHBEARER with the {grant} grant")
    url = (props.get("sasl.oauthbearer.token.endpoint.url") or "").strip()
    client_id = props.get("sasl.oauthbearer.client.id") or props.get("sasl.oauthbearer.client.credentials.client.id")
    secret = (props.get("sasl.oauthbearer.client.secret")
              or props.get("sasl.oauthbearer.client.credentials.client.secret"))
    for key, value in (("sasl.oauthbearer.token.endpoint.url", url), ("sasl.oauthbearer.client.id", client_id),
                       ("sasl.oauthbearer.client.secret", secret)):
        if not value:
            raise UsageError(f"{key} is mandatory when sasl.oauthbearer.method=oidc is set (as in librdkafka)")
    assert client_id is not None and secret is not None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UsageError(f"bad sasl.oauthbearer.token.endpoint.url: give an https:// (or http://) URL with a host, "
                         f"not one starting {parts.scheme + '://' if parts.scheme else 'without a scheme'}")
    try:
        parts.port  # noqa: B018 - raises for a port outside 0-65535
    except ValueError:
        raise UsageError("bad sasl.oauthbearer.token.endpoint.url: its port is not a number from 1 to 65535") from None
    ca_location = props.get("https.ca.location") or None
    ca_pem = props.get("https.ca.pem") or None
    if ca_location and ca_pem:
        raise UsageError("https.ca.location and https.ca.pem are mutually exclusive (as in librdkafka): keep one")
    if ca_location and ca_location != "probe" and not os.path.exists(ca_location):
        raise UsageError(f"https.ca.location must be an existing file or directory: {ca_location} does not exist")
    sub_claim = (props.get("sasl.oauthbearer.sub.claim.name") or "sub").strip()
    if not sub_claim:
        raise UsageError("sasl.oauthbearer.sub.claim.name must be non-empty and not only whitespace")
    return OAuthSettings(
        method="oidc", extensions=parse_extensions(props.get("sasl.oauthbearer.extensions", "")),
        token_url=url, client_id=client_id, client_secret=secret,
        scope=(props.get("sasl.oauthbearer.scope") or "").strip() or None, sub_claim=sub_claim,
        ca_location=None if ca_location == "probe" else ca_location, ca_pem=ca_pem,
    )


def parse_extensions(text: str) -> tuple[tuple[str, str], ...]:
    """`sasl.oauthbearer.extensions`: comma-separated key=value pairs (KIP-342), checked as RFC 7628 3.1 says."""
    pairs = []
    for item in (part for part in text.split(",") if part):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"bad sasl.oauthbearer.extensions entry {item.split('=')[0]!r}: write key=value pairs "
                             "separated by commas, e.g. logicalCluster=lkc-123,identityPoolId=pool-1")
        pairs.append(_extension(key, value, "sasl.oauthbearer.extensions"))
    return tuple(pairs)


def _extension(key: str, value: str, where: str) -> tuple[str, str]:
    if key == "auth":
        raise UsageError(f"bad {where}: auth is the token's own key (RFC 7628), not an extension")
    if not _EXTENSION_KEY.fullmatch(key):
        raise UsageError(f"bad {where} key {key!r}: extension keys are letters A-Z and a-z only (RFC 7628)")
    if not EXTENSION_VALUE.fullmatch(value):
        raise UsageError(f"bad {where} value of {key}: extension values are printable ASCII, space, tab, CR or LF "
                         "(RFC 7628)")
    return key, value


_UJWS_KEYS = ("principalClaimName", "principal", "scopeClaimName", "scope", "lifeSeconds")


def parse_unsecured_config(text: str) -> UnsecuredConfig:
    """The unsecured token's settings from librdkafka's `sasl.oauthbearer.config`, with its rules and defaults.

    Space-separated `name=value` entries: principalClaimName (default sub), principal (required),
    scopeClaimName (default scope), scope (comma-separated), lifeSeconds (default 3600) and
    extension_NAME=value. An entry given twice, an empty value or a `"` anywhere is refused, as
    librdkafka refuses it.
    """
    if not text.strip():
        raise UsageError("sasl.oauthbearer.config must not be empty for the unsecured token: give principal=NAME "
                         "(and optionally scope=a,b lifeSeconds=N principalClaimName=... scopeClaimName=...)")
    values: dict[str, str] = {}
    extensions: list[tuple[str, str]] = []
    for entry in (part for part in text.split(" ") if part):
        if entry.startswith("extension_"):
            key, sep, value = entry[len("extension_"):].partition("=")
            if not key or not sep:
                raise UsageError("bad sasl.oauthbearer.config: an extension_ entry needs a name and =value "
                                 "(extension_NAME=value)")
            extensions.append(_extension(key, value, "sasl.oauthbearer.config extension"))
            continue
        name, sep, value = entry.partition("=")
        if not sep or name not in _UJWS_KEYS:
            # Not even the entry's name is quoted: a value with a space in it arrives here as a
            # bare word, which may be half a secret. A near miss of a known name gets a suggestion.
            import difflib  # a typo's suggestion: only on the way to a usage error

            near = difflib.get_close_matches(name, _UJWS_KEYS, n=1, cutoff=0.75) if sep else []
            hint = f" (did you mean {near[0]}=?)" if near else ""
            raise UsageError(f"unrecognized sasl.oauthbearer.config entry{hint}: use principal, principalClaimName, "
                             "scope, scopeClaimName, lifeSeconds or extension_NAME, as name=value separated by "
                             "spaces (values cannot hold spaces)")
        if name in values:
            raise UsageError(f"bad sasl.oauthbearer.config: multiple {name!r} entries")
        if not value:
            raise UsageError(f"bad sasl.oauthbearer.config: empty {name!r}")
        if '"' in value:
            raise UsageError(f"bad sasl.oauthbearer.config: '\"' cannot appear in {name}")
        values[name] = value
    if "principal" not in values:
        raise UsageError("bad sasl.oauthbearer.config: no principal=<value>")
    life = 3600
    if "lifeSeconds" in values:
        if not re.fullmatch(r"[+-]?\d+", values["lifeSeconds"]):
            raise UsageError("bad sasl.oauthbearer.config: non-integral lifeSeconds")
        life = int(values["lifeSeconds"])
        if not 0 < life <= 2**31 - 1:
            raise UsageError("bad sasl.oauthbearer.config: lifeSeconds out of range of a positive int")
    scopes = tuple(dict.fromkeys(s for s in values.get("scope", "").split(",") if s))
    return UnsecuredConfig(principal=values["principal"], principal_claim=values.get("principalClaimName", "sub"),
                           scope_claim=values.get("scopeClaimName", "scope"), scopes=scopes, life_seconds=life,
                           extensions=tuple(extensions))


# -- Amazon MSK IAM -------------------------------------------------------------------------------

SIGNER = "aws_msk_iam_sasl_signer"  # AWS's package, the optional `kprobe[aws]` extra
INSTALL_HINT = "pip install 'kprobe[aws]'"
_AWS_KEYS = ("aws.region", "aws.profile", "aws.role.arn", "aws.role.session.name")
_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d+")
# An MSK broker or bootstrap name ends in `kafka.<region>.amazonaws.com` (provisioned, `b-1.` and
# `b-1-public.`) or `kafka-serverless.<region>.amazonaws.com` (Serverless), `.cn` in China.
_MSK_HOST = re.compile(r"(?:^|\.)kafka(?:-serverless)?\.(" + _REGION.pattern + r")\.amazonaws\.com(?:\.cn)?\Z")
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+")
_SESSION_NAME = re.compile(r"[\w+=,.@-]{2,64}")  # STS's RoleSessionName
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s;"]+))')
# The Java client's IAMLoginModule options that kprobe's settings stand for.
_JAAS_KEYS = {"awsProfileName": "aws.profile", "awsRoleArn": "aws.role.arn",
              "awsRoleSessionName": "aws.role.session.name"}


def region_from_host(host: str | None) -> str | None:
    """The region in an MSK broker name (`b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com`), else None.

    Anchored on the name's end, as the Java client's aws-msk-iam-auth reads it: a cluster named
    `orders-us-east-1` does not make its name say us-east-1.
    """
    match = _MSK_HOST.search(host.lower().rstrip(".")) if host else None
    return match.group(1) if match else None


def _jaas_options(props: Mapping[str, str]) -> dict[str, str]:
    """aws.* settings from a Java client's `sasl.jaas.config` naming IAMLoginModule (its -F file as it is).

    sasl.jaas.config is a secret property (Kafka types it PASSWORD): no message quotes it.
    """
    jaas = props.get("sasl.jaas.config", "")
    if "IAMLoginModule" not in jaas:
        return {}
    return {_JAAS_KEYS[key]: quoted or bare for key, quoted, bare in _JAAS_OPTION.findall(jaas)
            if key in _JAAS_KEYS}


def _msk_settings(props: Mapping[str, str], host: str | None) -> OAuthSettings:
    """MSK IAM settings: the region to sign for and whose credentials; a UsageError naming the property.

    The signer's absence is said first: nothing else can be done about MSK IAM without it.
    """
    if not _signer_installed():
        raise UsageError(f"Amazon MSK IAM needs AWS's signer ({SIGNER.replace('_', '-')}-python), which is not "
                         f"installed: {INSTALL_HINT}")
    for key in props:
        if key.startswith("aws.") and key not in _AWS_KEYS:
            import difflib  # a typo's suggestion: only on the way to a usage error

            near = difflib.get_close_matches(key, _AWS_KEYS, n=1, cutoff=0.75)
            raise UsageError(f"unknown property {key}" + (f" (did you mean {near[0]}?)" if near else "")
                             + f": Amazon MSK IAM takes {', '.join(_AWS_KEYS)}")
    given = {**_jaas_options(props), **{k: v.strip() for k, v in props.items() if k in _AWS_KEYS and v.strip()}}
    profile, role_arn, session = given.get("aws.profile"), given.get("aws.role.arn"), given.get("aws.role.session.name")
    if profile and role_arn:
        raise UsageError("aws.profile and aws.role.arn together: AWS's signer assumes the role with the default "
                         "credentials, not a profile's; keep aws.role.arn and set AWS_PROFILE for the credentials "
                         "that assume it")
    if role_arn and not _ROLE_ARN.fullmatch(role_arn):
        raise UsageError("bad aws.role.arn: an IAM role ARN looks like arn:aws:iam::123456789012:role/NAME")
    if session and not role_arn:
        raise UsageError("aws.role.session.name names the session of an assumed role: set aws.role.arn too")
    if session and not _SESSION_NAME.fullmatch(session):
        raise UsageError("bad aws.role.session.name: 2 to 64 letters, digits and +=,.@_- (as STS takes it)")
    region, region_from = _msk_region(given, host, profile)
    return OAuthSettings(method="aws_msk_iam", msk=MskIam(region=region, region_from=region_from, profile=profile,
                                                          role_arn=role_arn, role_session_name=session))


def _msk_region(given: Mapping[str, str], host: str | None, profile: str | None) -> tuple[str, str]:
    """(region, where it came from): aws.region, an MSK broker name, AWS_REGION, AWS_DEFAULT_REGION, the AWS config.

    The broker name comes before the environment, as in the Java client: MSK checks the region
    the token is signed for, and the name says which region the cluster is in, where a shell's
    AWS_REGION may be left over from another job.
    """
    candidates = [("aws.region", given.get("aws.region")), ("the MSK broker name", region_from_host(host)),
                  ("AWS_REGION", os.environ.get("AWS_REGION", "").strip()),
                  ("AWS_DEFAULT_REGION", os.environ.get("AWS_DEFAULT_REGION", "").strip())]
    for source, value in candidates:
        if value:
            if not _REGION.fullmatch(value):
                raise UsageError(f"bad {source} {value!r}: an AWS region looks like us-east-1 or eu-west-2")
            return value, source
    configured = _configured_region(profile)
    if configured and _REGION.fullmatch(configured):
        return configured, f"the AWS config file (profile {profile or os.environ.get('AWS_PROFILE') or 'default'})"
    where = f"{host} is not an MSK broker name to read it from" if host else "no bootstrap host names it"
    raise UsageError(f"Amazon MSK IAM needs the cluster's AWS region to sign for, and {where}: "
                     "set -X aws.region=REGION (or AWS_REGION), e.g. -X aws.region=us-east-1")


def _configured_region(profile: str | None) -> str | None:
    """The region in the AWS config file for this profile, as the Java client's last fallback; None without botocore.

    Only reached when nothing else names a region, so only then is botocore imported.
    """
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        return None
    try:
        value = botocore.session.Session(profile=profile).get_config_variable("region")
    except botocore.exceptions.BotoCoreError:
        return None  # a missing profile is said when the signer asks for its credentials
    return value.strip() if isinstance(value, str) else None


def _signer_installed() -> bool:
    """Whether AWS's signer can be imported, without importing it (and boto3) on a run that only checks usage."""
    try:
        return importlib.util.find_spec(SIGNER) is not None
    except (ImportError, ValueError):
        return False
