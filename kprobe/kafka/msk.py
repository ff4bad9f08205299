"""Amazon MSK IAM tokens from AWS's own signer, bounded by the run's timeout and deadline.

Amazon MSK IAM (`sasl.mechanism=AWS_MSK_IAM`, the Java client's name, or OAUTHBEARER with
kprobe's `sasl.oauthbearer.method=aws_msk_iam`): the token is what AWS's own
aws-msk-iam-sasl-signer-python makes (the optional `kprobe[aws]` extra), a SigV4-presigned
`kafka-cluster:Connect` URL, base64url-encoded, sent as OAUTHBEARER as AWS's Python, Go and
JavaScript signers send it. The region to sign for is `aws.region`, else the one in an MSK
broker name (the Java client's aws-msk-iam-auth reads it there first: MSK checks the signature's
region, so an MSK name is the best witness), else AWS_REGION / AWS_DEFAULT_REGION, else the AWS
config file's; credentials are the signer's (the default chain, `aws.profile`, or `aws.role.arn`
assumed through STS). The signer and boto3 are imported only when this method is used.
"""

from __future__ import annotations

import logging
import threading
import time

from kprobe.kafka.oauth_settings import INSTALL_HINT, MskIam
from kprobe.kafka.oauth_token import Token, TokenError
from kprobe.logs import logger

_LOG = logger("kprobe.kafka.oauth")  # one logger for every token source, as before the split


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

