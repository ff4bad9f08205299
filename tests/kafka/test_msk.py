"""Amazon MSK IAM (`kprobe[aws]`): AWS's own signer makes the token, kprobe sends it as OAUTHBEARER.

No AWS account is reachable from here, and none may be: every test in this module runs with fake
static credentials in the environment (botocore's environment provider answers first), instance
metadata disabled and empty AWS config files; the session's audit hook (tests/fence/loopback_fence.py)
refuses any socket to an address outside loopback, and the tests that call the signer have it refuse,
and record, lookups of names outside loopback too. So what is proven here
stops where AWS begins:

- the settings, pure: the region (aws.region, an MSK broker name, AWS_REGION, AWS_DEFAULT_REGION,
  the AWS config file, in that order), profile and role, both spellings (AWS_MSK_IAM, OAUTHBEARER
  with sasl.oauthbearer.method=aws_msk_iam), a Java client's JAAS line, and every usage error;
- the token the real signer makes from the fake credentials: a base64url presigned URL for
  `kafka.<region>.amazonaws.com` with `Action=kafka-cluster%3AConnect`, signed with those
  credentials for that region; made once per run; the role path against an STS stand-in on
  loopback; a signer that finds no credentials, or hangs, is a missing token, said plainly;
- whole CLI runs against the lab's `oauth` broker (Kafka 4.1.1): the token reaches the broker's
  SASL exchange and the broker refuses it in its own words (KIP-255 invalid_token; its log says
  it is not a JWT), exit 3, AUTH_FAILED, via kprobe; and no token, key or signature in any output.

Whether real MSK accepts the token is AWS's signer's business and is not tested here (docs/managed.md
says so).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from cli_runner import run_cli_bytes
from fence.loopback_fence import ENV_LOOKUPS, FENCE
from report_check import validate

from kprobe.errors import UsageError
from kprobe.kafka import oauth
from kprobe.kafka.oauth import token_for
from kprobe.kafka.oauth_settings import MskIam, region_from_host
from kprobe.kafka.oauth_token import TokenError
from kprobe.kafka.sasl import MSK_IAM_STATUS_HINTS, OAuthBearer
from kprobe.kafka.security import Security, security_from
from kprobe.lab.http_server import HttpRequest, HttpResponse, LabHttpServer
from kprobe.lab.native import NativeLab
from kprobe.models import BootstrapAddress
from kprobe.redaction import is_secret

FAKE_KEY_ID = "AKIAKPROBEFAKE000042"
FAKE_SECRET = "kprobeFakeSecretAccessKey/NotReal+0000000042"
FAKE_SESSION = "kprobeFakeSessionToken/With+Chars=42"
PROFILE_KEY_ID = "AKIAKPROBEPROFILE007"
PROFILE_SECRET = "kprobeFakeProfileSecret/NotReal+007"
ASSUMED_KEY_ID = "ASIAKPROBEASSUMED099"
ASSUMED_SECRET = "kprobeFakeAssumedSecret/NotReal+099"
ASSUMED_SESSION = "kprobeFakeAssumedSession/Token+099"
ROLE_ARN = "arn:aws:iam::123456789012:role/kprobe-reader"
MSK_NAME = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
STS_ADDRESS = "127.0.0.87"  # the STS stand-in; not a lab address
# base64url of "https://kafka.": every MSK IAM token starts with it, whatever its region or keys.
TOKEN_PREFIX = base64.urlsafe_b64encode(b"https://kafka.").decode().rstrip("=")[:18]

# Variables that would let botocore find other credentials, another region, or another endpoint.
_AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                  "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN",
                  "AWS_ROLE_SESSION_NAME", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                  "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ENDPOINT_URL",
                  "AWS_ENDPOINT_URL_STS", "AWS_CA_BUNDLE", "AWS_STS_REGIONAL_ENDPOINTS")


@pytest.fixture(autouse=True)
def aws_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Fake static credentials, no metadata service, empty AWS files, and a dead proxy: nothing reaches AWS.

    The proxy is a second fence: a request that escaped the settings would go to a closed loopback port.
    """
    for name in _AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_SESSION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("BOTO_CONFIG", str(empty))
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    for no_proxy in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(no_proxy, STS_ADDRESS)
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # the signer's STS client would keep its credentials
    oauth.forget_tokens()
    yield tmp_path
    oauth.forget_tokens()


# == a fence around the network ===================================================================
# The session's fence (tests/fence/loopback_fence.py, installed by conftest) already refuses any
# packet off loopback, here and in every child; these tests also refuse lookups of names off
# loopback, so the signer cannot even ask where AWS is.

@contextmanager
def fenced() -> Iterator[list[str]]:
    """Run the block with lookups off loopback refused too, and check that nothing crossed.

    Crossings are collected here rather than failing at the test's end: code under test (the
    signer, botocore) may catch the refusal and carry on, so the list is what proves it held.
    """
    with FENCE.refusing_lookups(), FENCE.expecting() as crossed:
        yield crossed
    assert crossed == [], f"went outside loopback: {crossed}"


def test_the_fence_holds():
    """The fence is what proves the signer tests offline: it stops a connect or a lookup outside loopback."""
    import socket

    with pytest.raises(AssertionError, match="went outside loopback"), fenced() as crossed:
        with socket.socket() as sock, pytest.raises(PermissionError, match="outside loopback"):
            sock.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed, and refused before trying
        with pytest.raises(PermissionError, match="outside loopback"):
            socket.getaddrinfo("sts.eu-west-1.amazonaws.com", 443)
        # Loopback passes the fence (nothing listens there: refused by the kernel, not the fence).
        with socket.socket() as local, pytest.raises(ConnectionRefusedError, match="Connection refused"):
            local.connect(("127.0.0.1", 9))
    assert crossed == ["socket.connect to 192.0.2.1:9", "socket.getaddrinfo sts.eu-west-1.amazonaws.com"]


# == settings =====================================================================================

def sec(props: dict[str, str], host: str = "127.0.0.1", port: int = 9098) -> Security:
    return security_from({"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM", **props},
                         BootstrapAddress(host, port, None))


def msk_of(security: Security) -> MskIam:
    assert security.oauth is not None and security.oauth.msk is not None
    return security.oauth.msk


@pytest.mark.parametrize(("host", "region"), [
    ("b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com", "eu-west-1"),
    ("b-2-public.demo.abc123.c2.kafka.eu-west-1.amazonaws.com", "eu-west-1"),  # public access (9194-9198)
    ("boot-abcd1234.c1.kafka-serverless.us-east-2.amazonaws.com", "us-east-2"),  # MSK Serverless
    ("B-3.Orders.XYZ.C4.KAFKA.AP-SOUTHEAST-2.AMAZONAWS.COM.", "ap-southeast-2"),  # case, a trailing dot
    ("b-1.demo.abc.c1.kafka.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
    ("b-1.demo.abc.c1.kafka.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    # Not MSK broker names: no region is read from them.
    ("orders-us-east-1.kafka.internal", None),
    ("ec2-34-211-52-10.us-west-2.compute.amazonaws.com", None),
    ("b-1.demo.abc.c2.kafka.eu-west-1.amazonaws.com.evil.example", None),
    ("kafka.example.com", None),
    ("10.0.0.5", None),
    (None, None),
])
def test_region_from_an_msk_broker_name(host, region):
    assert region_from_host(host) == region


def test_region_precedence(monkeypatch, aws_env):
    """aws.region, then an MSK broker name (the cluster's own region), then AWS_REGION, AWS_DEFAULT_REGION, the config.

    The name comes before the environment, as in the Java client: a shell's AWS_REGION may be
    another job's, and MSK checks the region the token is signed for.
    """
    config = aws_env / "aws-config"
    config.write_text("[default]\nregion = eu-north-1\n[profile ops]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert (msk_of(sec({})).region, msk_of(sec({})).region_from) == (
        "eu-north-1", "the AWS config file (profile default)")
    assert msk_of(sec({"aws.profile": "ops"})).region == "sa-east-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-1")
    assert (msk_of(sec({})).region, msk_of(sec({})).region_from) == ("us-west-1", "AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert (msk_of(sec({})).region, msk_of(sec({})).region_from) == ("us-west-2", "AWS_REGION")
    from_name = msk_of(sec({}, MSK_NAME))
    assert (from_name.region, from_name.region_from) == ("eu-west-1", "the MSK broker name")
    given = msk_of(sec({"aws.region": "ca-central-1"}, MSK_NAME))
    assert (given.region, given.region_from) == ("ca-central-1", "aws.region")


def test_both_spellings_give_the_same_settings():
    """AWS_MSK_IAM (the Java client's name) and OAUTHBEARER with method aws_msk_iam: OAUTHBEARER on the wire."""
    java = sec({}, MSK_NAME)
    oauthbearer = sec({"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "aws_msk_iam"}, MSK_NAME)
    assert java.oauth == oauthbearer.oauth
    for security in (java, oauthbearer):
        assert security.sasl_mechanism == "OAUTHBEARER" and security.spoken_by_kprobe
        assert security.oauth is not None and security.oauth.method == "aws_msk_iam"
    assert repr(java.oauth) == "OAuthSettings(method='aws_msk_iam', region='eu-west-1')"


def test_no_sasl_no_msk_settings():
    """Like the OAuth properties: a listener without SASL ignores the mechanism, so nothing is required."""
    security = security_from({"security.protocol": "SSL", "sasl.mechanism": "AWS_MSK_IAM"},
                             BootstrapAddress("10.0.0.5", 9094, None))
    assert security.oauth is None


@pytest.mark.parametrize(("props", "env", "why"), [
    ({}, {}, r"needs the cluster's AWS region to sign for, and 127\.0\.0\.1 is not an MSK broker name to read it "
             r"from: set -X aws\.region=REGION"),
    ({"aws.region": "Ireland"}, {}, "bad aws.region 'Ireland': an AWS region looks like us-east-1"),
    ({}, {"AWS_REGION": "EU_WEST_1"}, "bad AWS_REGION 'EU_WEST_1'"),
    ({"aws.regoin": "eu-west-1"}, {}, r"unknown property aws\.regoin \(did you mean aws\.region\?\)"),
    ({"aws.region": "eu-west-1", "aws.profile": "dev", "aws.role.arn": ROLE_ARN}, {},
     "aws.profile and aws.role.arn together"),
    ({"aws.region": "eu-west-1", "aws.role.arn": "kprobe-reader"}, {}, "bad aws.role.arn"),
    ({"aws.region": "eu-west-1", "aws.role.session.name": "probe"}, {}, "set aws.role.arn too"),
    ({"aws.region": "eu-west-1", "aws.role.arn": ROLE_ARN, "aws.role.session.name": "a b"}, {},
     "bad aws.role.session.name"),
    ({"aws.region": "eu-west-1", "sasl.oauthbearer.method": "oidc"}, {}, "contradict each other"),
    ({"aws.region": "eu-west-1", "enable.sasl.oauthbearer.unsecure.jwt": "true"}, {}, "mutually exclusive"),
])
def test_settings_errors_name_the_property(monkeypatch, props, env, why):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=why):
        sec(props)


def test_bad_oauthbearer_method_names_aws_msk_iam():
    with pytest.raises(UsageError, match="aws_msk_iam"):
        security_from({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                       "sasl.oauthbearer.method": "aws"})


def test_a_java_clients_jaas_line_is_read_and_hidden():
    """A Java client's -F file works as it is: IAMLoginModule's options become aws.*; the line is a secret."""
    jaas = ('software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn="' + ROLE_ARN
            + '" awsRoleSessionName="probe-1" awsDebugCreds=true;')
    msk = msk_of(sec({"sasl.jaas.config": jaas}, MSK_NAME))
    assert (msk.role_arn, msk.role_session_name, msk.profile) == (ROLE_ARN, "probe-1", None)
    profile = msk_of(sec({"sasl.jaas.config": 'software.amazon.msk.auth.iam.IAMLoginModule required '
                                              'awsProfileName="dev";'}, MSK_NAME))
    assert profile.profile == "dev"
    assert msk_of(sec({"sasl.jaas.config": jaas, "aws.role.session.name": "given"}, MSK_NAME)).role_session_name == (
        "given")  # an explicit aws.* property wins
    with pytest.raises(UsageError) as caught:
        sec({"sasl.jaas.config": 'software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn="hunter2";'})
    assert "hunter2" not in str(caught.value)
    assert is_secret("sasl.jaas.config")
    assert not any(is_secret(key) for key in ("aws.region", "aws.profile", "aws.role.arn", "aws.role.session.name"))


# == the token, from AWS's own signer =============================================================

def decoded(token: str) -> urllib.parse.SplitResult:
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), "not base64url"
    return urllib.parse.urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())


def make(security: Security, *, timeout: float = 5.0, within: float = 10.0) -> oauth.Token:
    assert security.oauth is not None
    return token_for(security.oauth, timeout=timeout, deadline=time.monotonic() + within)


def test_the_signers_token_is_a_presigned_connect_url_signed_with_these_credentials():
    """The real signer, the fake credentials from the environment, no socket opened anywhere."""
    started = time.time()
    with fenced():
        token = make(sec({}, MSK_NAME))
    url = decoded(token.value)
    assert token.value.startswith(TOKEN_PREFIX)
    assert (url.scheme, url.netloc, url.path) == ("https", "kafka.eu-west-1.amazonaws.com", "/")
    assert "Action=kafka-cluster%3AConnect" in url.query.split("&")
    query = urllib.parse.parse_qs(url.query)
    key_id, day, region, service, kind = query["X-Amz-Credential"][0].split("/")
    assert (key_id, region, service, kind) == (FAKE_KEY_ID, "eu-west-1", "kafka-cluster", "aws4_request")
    assert day in {time.strftime("%Y%m%d", time.gmtime(started)), time.strftime("%Y%m%d", time.gmtime())}
    assert query["X-Amz-Security-Token"] == [FAKE_SESSION] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == ["900"] and len(query["X-Amz-Signature"][0]) == 64
    assert FAKE_SECRET not in url.geturl()  # the secret signs; it never travels
    assert started + 880 < token.expires_at < time.time() + 901
    assert token.extensions == () and "eu-west-1 (from the MSK broker name)" in token.about
    assert "AWS credentials in environment variables" in token.about  # botocore's own word on where
    assert FAKE_KEY_ID not in token.about and FAKE_KEY_ID not in repr(token)


def test_a_profile_signs_with_that_profiles_keys(aws_env, monkeypatch):
    credentials = aws_env / "credentials"
    credentials.write_text(f"[msk-dev]\naws_access_key_id = {PROFILE_KEY_ID}\n"
                           f"aws_secret_access_key = {PROFILE_SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    with fenced():
        token = make(sec({"aws.profile": "msk-dev", "aws.region": "us-east-1"}))
    query = urllib.parse.parse_qs(decoded(token.value).query)
    assert query["X-Amz-Credential"][0].startswith(f"{PROFILE_KEY_ID}/")
    assert "/us-east-1/kafka-cluster/" in query["X-Amz-Credential"][0]
    assert "X-Amz-Security-Token" not in query  # long-term keys: no session token
    assert "profile msk-dev's AWS credentials in shared credentials file" in token.about


def test_one_token_per_run_shared_by_every_connection():
    """Identity checks ask from parallel threads: the signer is called once, and every thread gets its token."""
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    security = sec({}, MSK_NAME)
    got: list[oauth.Token] = []
    with fenced(), mock.patch.object(MSKAuthTokenProvider, "generate_auth_token",
                                     wraps=MSKAuthTokenProvider.generate_auth_token) as signer:
        threads = [threading.Thread(target=lambda: got.append(make(security))) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        again = make(sec({}, MSK_NAME))  # settings derived again (another bootstrap): the same token
        other = make(sec({"aws.region": "us-east-1"}, MSK_NAME))  # another region: another token
    assert signer.call_count == 2 and [c.args for c in signer.call_args_list] == [("eu-west-1",), ("us-east-1",)]
    assert len(got) == 8 and len({t.value for t in got}) == 1 and again.value == got[0].value
    assert decoded(other.value).netloc == "kafka.us-east-1.amazonaws.com"


def test_no_credentials_is_a_missing_token(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with fenced(), pytest.raises(TokenError) as caught:
        make(sec({}, MSK_NAME))
    assert "AWS's signer found no AWS credentials in the default chain" in str(caught.value)
    assert not caught.value.deadline


def test_an_unknown_profile_is_a_missing_token():
    with fenced(), pytest.raises(TokenError, match=r"The config profile \(nobody\) could not be found"):
        make(sec({"aws.profile": "nobody"}, MSK_NAME))


def test_a_signer_that_hangs_costs_one_timeout_and_the_deadline_says_so():
    """Credentials from a metadata service that never answers: the run stops waiting after --timeout."""
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    release = threading.Event()
    with mock.patch.object(MSKAuthTokenProvider, "generate_auth_token", side_effect=lambda region: release.wait(30)):
        try:
            started = time.monotonic()
            with pytest.raises(TokenError) as slow:
                make(sec({}, MSK_NAME), timeout=0.5, within=10)
            took = time.monotonic() - started
            oauth.forget_tokens()
            with pytest.raises(TokenError) as cut:
                make(sec({}, MSK_NAME), timeout=5, within=0.4)
        finally:
            release.set()
    assert "gave no token within 0.5s" in str(slow.value) and not slow.value.deadline
    assert 0.4 < took < 2.0, took
    assert cut.value.deadline and "run's deadline" in str(cut.value)


class _Sts:
    """An STS stand-in on loopback answering AssumeRole (the query protocol's XML), recording each request.

    `deny` answers as STS does when the caller may not assume the role.
    """

    def __init__(self, deny: bool = False) -> None:
        self.requests: list[HttpRequest] = []
        self.deny = deny
        self.server = LabHttpServer(STS_ADDRESS, {("POST", "/"): self._answer})

    def _answer(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        if self.deny:
            return HttpResponse(403, (
                '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
                "<Code>AccessDenied</Code><Message>User: arn:aws:iam::123456789012:user/probe is not authorized to "
                f"perform: sts:AssumeRole on resource: {ROLE_ARN}</Message></Error><RequestId>2</RequestId>"
                "</ErrorResponse>").encode(), {"Content-Type": "text/xml"})
        body = (
            '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials>'
            f"<AccessKeyId>{ASSUMED_KEY_ID}</AccessKeyId><SecretAccessKey>{ASSUMED_SECRET}</SecretAccessKey>"
            f"<SessionToken>{ASSUMED_SESSION}</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>"
            "</Credentials><AssumedRoleUser><AssumedRoleId>AROAKPROBE:probe</AssumedRoleId>"
            "<Arn>arn:aws:sts::123456789012:assumed-role/kprobe-reader/probe</Arn></AssumedRoleUser>"
            "</AssumeRoleResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleResponse>")
        return HttpResponse(200, body.encode(), {"Content-Type": "text/xml"})


def test_a_role_is_assumed_through_sts_and_its_keys_sign(monkeypatch):
    """The signer's role path, with STS on loopback (AWS_ENDPOINT_URL_STS): the assumed keys sign the token."""
    sts = _Sts()
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.server.url("/").rstrip("/"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the signer's STS client reads boto3's region, only that
    try:
        with fenced():
            token = make(sec({"aws.role.arn": ROLE_ARN, "aws.role.session.name": "kprobe-probe"}, MSK_NAME))
    finally:
        sts.server.close()
    [request] = sts.requests
    form = urllib.parse.parse_qs(request.body.decode())
    assert (form["Action"], form["RoleArn"], form["RoleSessionName"]) == (["AssumeRole"], [ROLE_ARN], ["kprobe-probe"])
    assert f"Credential={FAKE_KEY_ID}/" in request.headers["authorization"]  # the caller's keys asked STS
    query = urllib.parse.parse_qs(decoded(token.value).query)
    assert query["X-Amz-Credential"][0].startswith(f"{ASSUMED_KEY_ID}/")
    assert query["X-Amz-Security-Token"] == [ASSUMED_SESSION]
    assert f"role {ROLE_ARN}, assumed with AWS credentials in environment variables" in token.about


def test_a_role_sts_refuses_is_a_missing_token_in_stss_words(monkeypatch):
    sts = _Sts(deny=True)
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.server.url("/").rstrip("/"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    try:
        with fenced(), pytest.raises(TokenError) as caught:
            make(sec({"aws.role.arn": ROLE_ARN}, MSK_NAME))
    finally:
        sts.server.close()
    assert len(sts.requests) == 1  # refused, not retried
    assert str(caught.value).startswith(f"STS refused role {ROLE_ARN}, assumed with AWS credentials in environment "
                                        "variables: AccessDenied (User: arn:aws:iam::123456789012:user/probe is not "
                                        "authorized to perform: sts:AssumeRole")


def test_a_role_without_a_region_for_sts_says_which_one_is_missing(monkeypatch):
    """With its own STS endpoint boto3 needs a region, read from AWS_DEFAULT_REGION, never aws.region: said plainly."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://{STS_ADDRESS}:9")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # boto3 does not read it
    with fenced(), pytest.raises(TokenError, match="has none: set AWS_DEFAULT_REGION"):
        make(sec({"aws.role.arn": ROLE_ARN}, MSK_NAME))


def test_an_msk_refusal_says_what_an_msk_token_depends_on():
    client = OAuthBearer("aHR0cHM6Ly9rYWZrYS5leGFtcGxl", hints=MSK_IAM_STATUS_HINTS,
                         about="the token was signed for region eu-west-1 (from aws.region)")
    client.start()
    assert client.step(b'{"status":"invalid_token"}') == b"\x01"
    refusal = client.refusal()
    assert refusal is not None and refusal.startswith("the broker refused the token: invalid_token (an Amazon MSK IAM")
    assert "kafka-cluster:Connect" in refusal and "audience" not in refusal
    assert refusal.endswith("; the token was signed for region eu-west-1 (from aws.region)")


# == the command line =============================================================================

def kprobe(*args: str, prelude: str = "", env: dict[str, str | None] | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """`kprobe ARGS` in a child process with this module's AWS environment (`env` changes it; None removes).

    The child inherits the session's fence (tests/fence/sitecustomize.py) and, told by
    KPROBE_TEST_FENCE_LOOKUPS, refuses lookups off loopback too, as `fenced()` does: a crossing
    prints a line the caller checks for, and fails. `prelude` runs before kprobe does.
    """
    child = {**os.environ, ENV_LOOKUPS: "1"}
    for name, value in (env or {}).items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    code = (f"import runpy, sys\n{prelude}\nsys.argv = ['kprobe', *sys.argv[1:]]\n"
            "runpy.run_module('kprobe', run_name='__main__', alter_sys=True)\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=timeout, check=False,
                          env=child)
    assert b"kprobe test fence" not in done.stderr, done.stderr
    return done


def test_without_the_extra_one_line_says_how_to_install_it():
    """Both spellings, before any connection: exit 2 and the pip line (the signer hidden as if not installed).

    In this process: a None in sys.modules makes `import aws_msk_iam_sasl_signer` fail as a missing package does.
    """
    for bootstrap, mechanism in ((MSK_NAME, ["-X", "sasl.mechanism=AWS_MSK_IAM"]),
                                 ("10.9.9.9", ["-X", "sasl.mechanism=OAUTHBEARER",
                                               "-X", "sasl.oauthbearer.method=aws_msk_iam"])):
        # The second names no region either: the missing signer is still what is said.
        with mock.patch.dict(sys.modules, {"aws_msk_iam_sasl_signer": None}), fenced():
            done = run_cli_bytes(["probe", "-b", f"SASL_SSL://{bootstrap}:9098", *mechanism])
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.decode().splitlines()
        assert "pip install 'kprobe[aws]'" in line and "aws-msk-iam-sasl-signer-python" in line, line
    with fenced():
        installed = run_cli_bytes(["probe", "-b", "SASL_SSL://127.0.0.1:1", "-X", "sasl.mechanism=AWS_MSK_IAM",
                                   "-X", "aws.region=eu-west-1", "--timeout", "0.5", "--json"])
    assert installed.returncode == 3 and b"pip install" not in installed.stderr  # the same run, with the signer


def test_no_region_is_a_usage_error_naming_the_property():
    with fenced():
        done = run_cli_bytes(["probe", "-b", "SASL_SSL://10.9.9.9:9098", "-X", "sasl.mechanism=AWS_MSK_IAM"])
    assert done.returncode == 2
    assert "set -X aws.region=REGION" in done.stderr.decode() and "10.9.9.9 is not an MSK broker name" in (
        done.stderr.decode())


_LOADED = ("\nimport atexit\natexit.register(lambda: sys.stderr.write('LOADED ' + ','.join(m for m in "
           "('boto3', 'botocore', 'aws_msk_iam_sasl_signer') if m in sys.modules) + '\\n'))")


def test_boto3_is_imported_only_by_a_run_that_signs():
    """A probe that never reaches SASL (here: nothing listens) does not pay for boto3, even with AWS_MSK_IAM set."""
    for args in (["-b", "127.0.0.1:1"], ["-b", "SASL_SSL://127.0.0.1:1", "-X", "sasl.mechanism=AWS_MSK_IAM",
                                         "-X", "aws.region=eu-west-1"]):
        done = kprobe("probe", *args, "--timeout", "0.5", "--no-identity", prelude=_LOADED)
        assert done.returncode == 3
        assert done.stderr.decode().splitlines()[-1].rstrip() == "LOADED", done.stderr


# == real brokers: the lab's `oauth` scenario =====================================================

def secret_forms() -> list[bytes]:
    """What must never be printed: the keys, the session token (raw and URL-encoded), and any token or its parts."""
    forms = [FAKE_KEY_ID, FAKE_SECRET, FAKE_SESSION, urllib.parse.quote(FAKE_SESSION, safe=""), PROFILE_KEY_ID,
             PROFILE_SECRET, TOKEN_PREFIX, "X-Amz-Signature", "X-Amz-Credential", "Amz-Security-Token",
             "kafka-cluster%3AConnect"]
    return [form.encode() for form in forms]


def malformed_jwt_lines(lab: NativeLab) -> int:
    """How often the broker logged why it refused a token that is not a JWT (its JWKS validator's words)."""
    return lab.log_path(0).read_text(errors="replace").count("Malformed JWT provided; expected three sections")


def lab_cases(lab: NativeLab, tmp: Path) -> dict[str, list[str]]:
    """Three listeners, three ways a user writes MSK IAM settings."""
    java = tmp / "client.properties"  # a Java client's file as it is, with its profile
    java.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=AWS_MSK_IAM\n"
                    "sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName=\"msk-dev\";\n"
                    "sasl.client.callback.handler.class=software.amazon.msk.auth.iam.IAMClientCallbackHandler\n")
    return {
        "OAUTH_OIDC": ["-b", lab.bootstrap("OAUTH_OIDC"), "-X", "security.protocol=SASL_PLAINTEXT",
                       "-X", "sasl.mechanism=AWS_MSK_IAM", "-X", "aws.region=eu-west-1"],
        "OAUTH_SSL": ["-b", lab.bootstrap("OAUTH_SSL"), "--nameserver", lab.nameserver("clients"),
                      "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={lab.ca_file}",
                      "-X", "sasl.mechanism=OAUTHBEARER", "-X", "sasl.oauthbearer.method=aws_msk_iam",
                      "-X", "aws.region=eu-west-1"],
        "OAUTH_UNSECURED": ["-b", lab.bootstrap("OAUTH_UNSECURED"), "-F", str(java)],
    }


def profile_env(tmp: Path) -> dict[str, str | None]:
    credentials = tmp / "credentials"
    credentials.write_text(f"[msk-dev]\naws_access_key_id = {PROFILE_KEY_ID}\naws_secret_access_key = {PROFILE_SECRET}\n")
    return {"AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_REGION": "us-west-2"}


@pytest.mark.parametrize("listener", ["OAUTH_OIDC", "OAUTH_SSL", "OAUTH_UNSECURED"])
def test_the_token_reaches_the_brokers_sasl_exchange_and_is_refused_in_its_words(oauth_lab, tmp_path, listener):
    """Exit 3, AUTH_FAILED, via kprobe, OAUTHBEARER: the broker judged the token (KIP-255's invalid_token).

    The JWKS listeners log why: the token is not a JWT, which is all a Kafka broker that is not
    MSK's IAM listener can say of it. Nothing secret in stdout, stderr (--verbose) or the -o file.
    """
    args = lab_cases(oauth_lab, tmp_path)[listener]
    out = tmp_path / "report.json"
    logged = malformed_jwt_lines(oauth_lab)
    done = kprobe("probe", *args, "--json", "--verbose", "--timeout", "5", "-o", str(out), env=profile_env(tmp_path),
                  prelude=_LOADED)
    for blob, where in ((done.stdout, "stdout"), (done.stderr, "stderr"), (out.read_bytes(), "-o")):
        for form in secret_forms():
            assert form not in blob, f"{form!r} in {where}"
    assert done.returncode == 3, done.stderr
    data = validate(json.loads(done.stdout))
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["via"], boot["sasl_mechanism"], boot["token_unavailable"]) == (
        "auth_failed", "kprobe", "AWS_MSK_IAM", False)
    assert boot["error"].startswith("SASL authentication failed: the broker refused the token: invalid_token "
                                    "(an Amazon MSK IAM token is refused when")
    assert [f["code"] for f in data["findings"]] == ["AUTH_FAILED"]
    verbose = done.stderr.decode()
    if listener == "OAUTH_UNSECURED":  # the Java client's file: its profile, the region from AWS_REGION
        assert "signed for region us-west-2 (from AWS_REGION) with profile msk-dev's AWS credentials" in boot["error"]
        assert data["settings"]["properties"]["sasl.jaas.config"] == "[redacted]"
    else:
        assert "signed for region eu-west-1 (from aws.region) with AWS credentials in environment variables" in (
            boot["error"])
        assert data["settings"]["properties"]["aws.region"] == "eu-west-1"
        deadline = time.monotonic() + 5
        while malformed_jwt_lines(oauth_lab) == logged and time.monotonic() < deadline:
            time.sleep(0.1)
        assert malformed_jwt_lines(oauth_lab) > logged  # the broker's validator had the token in hand
    assert "kprobe: MSK IAM token from AWS's signer in" in verbose  # --verbose was on, and says so
    assert verbose.splitlines()[-1] == "LOADED boto3,botocore,aws_msk_iam_sasl_signer"  # a run that signs pays


def test_the_text_report_and_a_missing_token_hold_no_secret(oauth_lab, tmp_path):
    """The text report of a refused token, and a run without credentials (OAUTH_TOKEN_UNAVAILABLE, exit 3)."""
    args = lab_cases(oauth_lab, tmp_path)["OAUTH_OIDC"]
    # In this process (what is imported is not the question here), with lookups off loopback refused as in a child.
    with fenced():
        text = run_cli_bytes(["probe", *args, "--no-color", "--verbose", "--timeout", "5"])
    assert text.returncode == 3
    for form in secret_forms():
        assert form not in text.stdout + text.stderr, form
    assert "ERROR AUTH_FAILED" in text.stdout.decode()
    nothing = {k: v for k, v in os.environ.items()
               if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    import boto3

    boto3.DEFAULT_SESSION = None  # as a fresh process has it: no session holding the first run's credentials
    with fenced():
        done = run_cli_bytes(["probe", *args, "--json", "--timeout", "5"], env=nothing)
    assert done.returncode == 3, done.stderr
    data = validate(json.loads(done.stdout))
    [boot] = data["bootstraps"]
    assert (boot["status"], boot["token_unavailable"]) == ("auth_failed", True)
    assert [f["code"] for f in data["findings"]] == ["OAUTH_TOKEN_UNAVAILABLE"]
    assert ("no Amazon MSK IAM token, so no client gets past authentication: AWS's signer found no AWS credentials"
            in boot["error"]) and "the broker never saw a token" in boot["error"]
