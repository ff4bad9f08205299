"""OAUTHBEARER tokens for kprobe's own connections, from librdkafka's property names.

Why kprobe gets tokens itself rather than through librdkafka: the OAUTHBEARER exchange happens on
the bootstrap connection, and librdkafka drops that connection's broker once the advertised
endpoints fail (design notes, section 7). So kprobe reads the same properties a librdkafka client
reads and gets the token the same way:

- `sasl.oauthbearer.method=default` with `enable.sasl.oauthbearer.unsecure.jwt=true`: an unsecured
  JWS (RFC 7515 appendix A.5, `{"alg":"none"}`) built from `sasl.oauthbearer.config`
  (`principal=... scope=... lifeSeconds=... extension_NAME=value`), byte for byte as librdkafka's
  rdkafka_sasl_oauthbearer.c builds it (tests/test_oauth.py checks its unit-test vectors). Without
  that flag librdkafka has no token (only an application callback would give one, and kprobe
  cannot call yours), so kprobe refuses the settings rather than succeed where your client fails.
- `sasl.oauthbearer.method=oidc`: the client credentials grant (RFC 6749 4.4), as
  rdkafka_sasl_oauthbearer_oidc.c sends it: a POST of `grant_type=client_credentials[&scope=...]`
  with HTTP basic authentication of `client.id:client.secret`, the token endpoint's certificate
  checked against `https.ca.location` / `https.ca.pem` (librdkafka's CA for HTTPS endpoints; the
  brokers' `ssl.ca.location` is not used, as librdkafka does not use it) or the system's CAs. The
  `access_token` must be a JWT with `exp` and the `sasl.oauthbearer.sub.claim.name` claim, which
  librdkafka requires too. `sasl.oauthbearer.extensions` (KIP-342) go with it.
- Amazon MSK IAM (`sasl.mechanism=AWS_MSK_IAM`, the Java client's name, or OAUTHBEARER with
  kprobe's `sasl.oauthbearer.method=aws_msk_iam`): the token is what AWS's own
  aws-msk-iam-sasl-signer-python makes (the optional `kprobe[aws]` extra), a SigV4-presigned
  `kafka-cluster:Connect` URL, base64url-encoded, sent as OAUTHBEARER as AWS's Python, Go and
  JavaScript signers send it. The region to sign for is `aws.region`, else the one in an MSK
  broker name (the Java client's aws-msk-iam-auth reads it there first: MSK checks the signature's
  region, so an MSK name is the best witness), else AWS_REGION / AWS_DEFAULT_REGION, else the AWS
  config file's; credentials are the signer's (the default chain, `aws.profile`, or `aws.role.arn`
  assumed through STS). The signer and boto3 are imported only when this method is used.

Differences, said plainly: kprobe sends the scope form-encoded (librdkafka sends it raw, which
servers read the same unless it holds `&` or `+`); it asks once per run and does not retry a
temporary HTTP error (librdkafka retries 408, 425, 429 and 5xx up to four times), because a probe
reports what the endpoint answers now; it uses no HTTP proxy. Variants kprobe does not speak (the
jwt-bearer grant, Azure IMDS or AWS metadata authentication: librdkafka's `aws_iam`, a JWT from
STS for OAuth clusters, which is not MSK IAM) go through librdkafka instead.

A fetched token is kept per process, keyed by endpoint, client and a digest of the secret (for MSK
IAM: region, profile and role), until
80% of its lifetime has passed (librdkafka refreshes at the same point), so every identity check
of a run reuses the bootstrap's token; a failure is kept until the run's deadline, so parallel
bootstraps do not each wait on a dead endpoint. Neither the client secret nor a token ever goes
into a message, a log line or a repr: what the endpoint says is scrubbed of the secret before it
is quoted.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kprobe.errors import UsageError
from kprobe.redaction import REDACTED

_LOG = logging.getLogger("kprobe.kafka.oauth")

Method = Literal["unsecured", "oidc", "aws_msk_iam"]
MSK_IAM = "AWS_MSK_IAM"  # the Java client's mechanism name for Amazon MSK IAM (OAUTHBEARER on the wire)
MAX_ANSWER = 1 << 20  # a token answer is a few kilobytes; a longer one is not a token endpoint
REFRESH_AT = 0.8  # of a token's lifetime, as librdkafka refreshes
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")  # RFC 7628 3.1: VCHAR, SP, HTAB, CR, LF
_TEMPORARY = (408, 425, 429, 500, 502, 503, 504)  # what librdkafka would retry


@dataclass(frozen=True)
class UnsecuredConfig:
    """`sasl.oauthbearer.config` for librdkafka's unsecured token, parsed."""

    principal: str
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    scopes: tuple[str, ...] = ()
    life_seconds: int = 3600
    extensions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MskIam:
    """Amazon MSK IAM: the region the token is signed for (and where that came from), and whose credentials.

    None of it is a secret; the credentials themselves stay inside AWS's signer.
    """

    region: str
    region_from: str  # "aws.region", "the MSK broker name", "AWS_REGION", ...: said when the broker refuses
    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str | None = None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Token:
    """A token to send: its value never in repr; `expires_at` is wall-clock seconds."""

    value: str = field(repr=False)
    principal: str
    expires_at: float
    extensions: tuple[tuple[str, str], ...] = ()
    # What the token is, for a refusal to say (an MSK IAM token: its region and whose credentials).
    about: str = ""


class TokenError(Exception):
    """No token: the message names the endpoint (without credentials) and what it answered, never a secret.

    `deadline` says the run's own deadline cut the request short, which proves nothing about the
    endpoint.
    """

    def __init__(self, message: str, *, deadline: bool = False) -> None:
        super().__init__(message)
        self.deadline = deadline


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
    if not _EXTENSION_VALUE.fullmatch(value):
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


class _FoundCredentials(logging.Handler):
    """botocore's own word on where the signer's thread found credentials ("Found credentials in environment ...").

    Only those lines, and only from that thread, are kept: they name a place, never a key. botocore
    logs them at INFO, below what its logger passes by default, so its level is lowered while any
    signer runs and put back when the last one ends (a caller's own handlers must not start
    seeing botocore's INFO lines because kprobe once ran).
    """

    _lock = threading.Lock()
    _listening = 0
    _level = logging.NOTSET

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__(logging.INFO)
        self.thread = thread
        self.where: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.thread == self.thread.ident and text.startswith("Found credentials"):
            self.where.append(text.removeprefix("Found credentials").strip().rstrip("."))

    def __enter__(self) -> _FoundCredentials:
        log = logging.getLogger("botocore.credentials")
        with _FoundCredentials._lock:
            if _FoundCredentials._listening == 0:
                _FoundCredentials._level = log.level
                if not log.isEnabledFor(logging.INFO):
                    log.setLevel(logging.INFO)
            _FoundCredentials._listening += 1
            log.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        log = logging.getLogger("botocore.credentials")
        with _FoundCredentials._lock:
            log.removeHandler(self)
            _FoundCredentials._listening -= 1
            if _FoundCredentials._listening == 0:
                log.setLevel(_FoundCredentials._level)


def msk_token(msk: MskIam, *, timeout: float, deadline: float) -> Token:
    """One token from AWS's signer, within `timeout` and the run's `deadline`; never cached.

    The signer finds credentials as boto3 does (environment, shared files, SSO, container or
    instance metadata; STS for a role), which can mean waiting on a metadata service that never
    answers. It runs in a daemon thread, and the run stops waiting for it after `timeout`.
    """
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer
    except ImportError as exc:
        raise TokenError(f"AWS's MSK IAM signer cannot be imported ({exc}): {INSTALL_HINT}") from None
    outcome: list[tuple[str, int] | Exception] = []

    def sign() -> None:
        try:
            if msk.role_arn:
                session = (msk.role_session_name,) if msk.role_session_name else ()
                outcome.append(signer.generate_auth_token_from_role_arn(msk.region, msk.role_arn, *session))
            elif msk.profile:
                outcome.append(signer.generate_auth_token_from_profile(msk.region, msk.profile))
            else:
                outcome.append(signer.generate_auth_token(msk.region))
        except Exception as exc:  # whatever the signer raises means no token: said, not a crash
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=sign, name="kprobe-msk-iam-signer", daemon=True)
    with _FoundCredentials(worker) as found:
        worker.start()
        worker.join(max(0.0, min(timeout, deadline - started)))
    whose = _whose(msk, found.where)
    if not outcome:
        if time.monotonic() >= deadline - 0.01:
            raise TokenError("stopped at the run's deadline while AWS's signer looked for credentials", deadline=True)
        raise TokenError(f"AWS's signer gave no token within {timeout:g}s: finding {whose} took longer (a metadata "
                         "service, SSO or credential_process that does not answer, or STS out of reach)")
    result = outcome[0]
    if isinstance(result, Exception):
        raise TokenError(_signer_failure(result, msk, whose)[:400]) from None
    value, expiry_ms = result
    about = f"the token was signed for region {msk.region} (from {msk.region_from}) with {whose}"
    _LOG.debug("MSK IAM token from AWS's signer in %.0f ms, signed for region %s (from %s) with %s, expires in %.0f s",
               (time.monotonic() - started) * 1000, msk.region, msk.region_from, whose, expiry_ms / 1000 - time.time())
    return Token(value, "", expiry_ms / 1000, about=about)


def _whose(msk: MskIam, where: list[str]) -> str:
    """Whose credentials signed: the role, the profile or the default chain, and where botocore found them."""
    credentials = f"AWS credentials {where[-1]}" if where else "AWS credentials"
    if msk.role_arn:
        return f"role {msk.role_arn}, assumed with {credentials}"
    if msk.profile:
        return f"profile {msk.profile}'s {credentials}"
    return credentials if where else "AWS credentials from the default chain"


def _signer_failure(exc: Exception, msk: MskIam, whose: str) -> str:
    """What the signer's exception means for a user, in one sentence; botocore's own text where it is plain."""
    import botocore.exceptions as aws  # the signer imported it already

    if isinstance(exc, aws.NoCredentialsError) or (isinstance(exc, AttributeError) and "access_key" in str(exc)) or (
            isinstance(exc, ValueError) and "Credentials" in str(exc)):  # the signer's words for "none found"
        chain = (f"profile {msk.profile}" if msk.profile else
                 "the default chain (environment, shared credentials and config files, SSO, container and instance "
                 "metadata)")
        return (f"AWS's signer found no AWS credentials in {chain}; a client using AWS's default chain on this host "
                "would find none either")
    if isinstance(exc, aws.ProfileNotFound):
        return f"AWS's signer: {exc} (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE; aws.profile or AWS_PROFILE)"
    if isinstance(exc, aws.NoRegionError):
        return ("AWS's signer asks STS for aws.role.arn through boto3, which needs a region here and has none: set "
                "AWS_DEFAULT_REGION (aws.region and AWS_REGION only choose the region the token is signed for)")
    if isinstance(exc, aws.ClientError):
        error = exc.response.get("Error", {})
        what = f"{error.get('Code', 'an error')} ({error.get('Message', '')})"
        return f"STS refused {whose}: {what}" if msk.role_arn else f"AWS answered {what}"
    if isinstance(exc, (aws.EndpointConnectionError, aws.ConnectTimeoutError, aws.ReadTimeoutError)):
        return f"AWS's signer could not reach AWS while finding {whose}: {exc}"
    if isinstance(exc, aws.BotoCoreError):
        return f"AWS's signer failed finding {whose}: {exc}"
    return f"AWS's signer failed: {type(exc).__name__}: {exc}"


# -- the unsecured token --------------------------------------------------------------------------

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


# -- the OIDC client credentials grant ------------------------------------------------------------

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


@dataclass
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
    if not _EXTENSION_VALUE.fullmatch(value):
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
