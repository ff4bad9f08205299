"""One connection to one broker address, speaking just enough Kafka: the socket, TLS, framing,
ApiVersions, SASL (PLAIN, SCRAM, OAUTHBEARER) and the few requests kprobe sends (Metadata,
DescribeConfigs, DescribeCluster). What the probe asks over it, in which order, and what it makes of
the answers is `kprobe.kafka.exchanges`.

Why not confluent-kafka here: since librdkafka 2.10 a client drops the bootstrap broker once
a Metadata response lists only brokers it cannot reach, so `list_topics()` mostly times out in
exactly the case kprobe exists for (design notes, section 7). kprobe needs the answer of *this*
connection, deterministically and within a timeout, so it speaks the few requests it needs on
the bootstrap socket itself (Amazon MSK IAM included: AWS's signer makes the token, sent as
OAUTHBEARER). Mechanisms it does not speak (GSSAPI, OAUTHBEARER's jwt-bearer grant and metadata
logins) fall back to confluent-kafka in `kprobe.probe.bootstrap`.

The bytes are `kprobe.kafka.codec`'s business; this module only moves them, bounded by a
per-request timeout and the run's deadline, and classifies what goes wrong.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kprobe.kafka import codec
from kprobe.kafka.security import Security
from kprobe.kafka.wire import Reader, WireError
from kprobe.models import ClusterMetadata, Protocol, TlsFailure
from kprobe.net.sockets import classify_os_error, family_of

if TYPE_CHECKING:
    from kprobe.kafka import sasl

# SaslHandshake's answer on a listener without SASL: Kafka's request handler (not the SASL
# authenticator, which only SASL listeners run) answers it with this error and no mechanisms, and
# the connection stays usable (measured on Kafka 4.1.1: the Metadata after it is answered).
ILLEGAL_SASL_STATE = 34
# TLS alerts (OpenSSL's names, after `_ALERT_`) with which a server refuses the client's certificate
# (RFC 8446 section 6.2). Without a certificate sent, only those that can mean "none was sent" count.
_REFUSED_ALERTS = frozenset({"UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "CERTIFICATE_EXPIRED",
                             "CERTIFICATE_REVOKED", "UNSUPPORTED_CERTIFICATE", "ACCESS_DENIED"})
_MISSING_ALERTS = frozenset({"CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN"})


def client_certificate_refusal(reason: str | None, sent_certificate: bool) -> tuple[TlsFailure, str] | None:
    """(failure, alert in words) when an SSL error is the broker refusing the client's certificate side.

    `reason` is the SSL error's OpenSSL reason (`TLSV13_ALERT_CERTIFICATE_REQUIRED`,
    `TLSV1_ALERT_UNKNOWN_CA`). With TLS 1.3 the client's handshake completes before the server has
    judged its certificate, so the alert arrives on the first read and looks like a dropped
    connection unless it is read for what it says; with TLS 1.2 it ends the handshake itself.
    """
    if not reason or "_ALERT_" not in reason:
        return None
    alert = reason.split("_ALERT_", 1)[1]
    words = alert.lower().replace("_", " ")
    if not sent_certificate:
        return ("client_certificate_required", words) if alert in _MISSING_ALERTS else None
    # "certificate required" although one was configured: the broker got none it would take.
    return ("client_certificate_refused", words) if alert in _REFUSED_ALERTS | {"CERTIFICATE_REQUIRED"} else None


def _refusal_error(exc: BaseException, security: Security, *, awaiting_response: bool) -> WireError | None:
    """The WireError for a broker that refused the client's certificate side of TLS, or None."""
    from kprobe.kafka.tlscontext import has_client_certificate

    sent = has_client_certificate(security)
    found = client_certificate_refusal(getattr(exc, "reason", None), sent)
    if found is None:
        return None
    failure, alert = found  # the finding says what it means; the error keeps the broker's word and OpenSSL's
    return WireError("tls", f"the broker ended TLS with the alert \"{alert}\": {exc}", tls_failure=failure,
                     tls_alert=alert, awaiting_response=awaiting_response)


class KafkaConnection:
    """One connection to one broker address, speaking just enough Kafka.

    Every blocking call is bounded by `timeout` per request and by the absolute `deadline`
    (a `time.monotonic()` value) for the whole conversation.
    """

    def __init__(
        self,
        address: str,
        port: int,
        *,
        timeout: float,
        deadline: float | None = None,
        security: Security | None = None,
        server_hostname: str | None = None,
        client_id: str = "kprobe",
    ) -> None:
        self.address = address
        self.port = port
        self.timeout = timeout
        self.deadline = deadline if deadline is not None else time.monotonic() + 3600
        self.security = security or Security()
        self.server_hostname = server_hostname or address
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.api_versions: dict[int, tuple[int, int]] = {}
        # The largest whole response read on this connection, in bytes (its size field included): what a
        # path that loses large packets still carries.
        self.largest_response = 0
        self.last_response = 0  # the size of the latest answer read (kprobe.kafka.pathmtu sizes its ladder by it)

    def _remaining(self, bound: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WireError("timeout", "run deadline reached", deadline=True)
        return min(bound, left)

    def connect(self) -> None:
        """Open TCP (and TLS); classify failures as refused, timeout, unreachable or tls."""
        sock = socket.socket(family_of(self.address), socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.settimeout(self._remaining(self.timeout))
            sock.connect((self.address, self.port))
        except WireError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            kind = classify_os_error(exc)
            text = "timed out" if kind == "timeout" else (exc.strerror or str(exc))
            raise WireError(kind, f"connect to {self.address}:{self.port}: {text}") from None
        if self.security.uses_tls:
            sock = self._wrap_tls(sock)
        self.sock = sock

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        import ssl  # start-up time a PLAINTEXT run never needs

        from kprobe.kafka.tlscontext import TlsSettingsError, client_context

        sec = self.security
        try:
            ctx = client_context(sec)
            sock.settimeout(self._remaining(self.timeout))
            return ctx.wrap_socket(sock, server_hostname=self.server_hostname)
        except TlsSettingsError as exc:
            sock.close()
            raise WireError("tls", str(exc), tls_failure="handshake_failed") from None
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            from kprobe.kafka.certs import describe_peer, verify_failure

            seen = describe_peer(self.address, self.port, self.server_hostname, self._remaining(self.timeout), sec)
            raise WireError("tls", f"TLS certificate not accepted: {exc.verify_message}"
                            + (f" ({seen})" if seen else ""), tls_failure=verify_failure(exc.verify_code)) from None
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            if isinstance(exc, (TimeoutError, socket.timeout)):
                raise WireError("timeout", f"TLS handshake failed: {exc}") from None
            refused = _refusal_error(exc, sec, awaiting_response=False)
            if refused is not None:  # TLS 1.2: the alert ends the handshake itself
                raise refused from None
            raise WireError("tls", f"TLS handshake failed: {exc}", tls_failure="handshake_failed") from None

    def close(self) -> None:
        """Close quietly; closing is never what a report is about."""
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int, request_deadline: float) -> bytes:
        assert self.sock is not None
        chunks = bytearray()
        # Which bound a wait ends on decides what its end proves: the request's own timeout (the
        # broker did not answer in time) or the run's deadline (nothing about the broker).
        cut_by_deadline = self.deadline < request_deadline
        waited = ("stopped at the run's deadline waiting for the response" if cut_by_deadline
                  else "timed out waiting for the response")
        while len(chunks) < n:
            left = min(request_deadline, self.deadline) - time.monotonic()
            if left <= 0:
                raise WireError("timeout", waited, deadline=cut_by_deadline, awaiting_response=True)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(n - len(chunks), 1 << 20))
            except TimeoutError:
                raise WireError("timeout", waited, deadline=cut_by_deadline, awaiting_response=True) from None
            except OSError as exc:
                refused = _refusal_error(exc, self.security, awaiting_response=True) if self.security.uses_tls else None
                if refused is not None:  # TLS 1.3: the broker's verdict on the client certificate comes now
                    raise refused from None
                raise WireError("closed", f"connection failed mid-response: {exc}", awaiting_response=True) from None
            if not chunk:
                raise WireError("closed", "connection closed by the broker before a full response",
                                awaiting_response=True)
            chunks += chunk
        return bytes(chunks)

    def request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> Reader:
        """Send one request and return a reader positioned after the response header."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self.correlation_id += 1
        frame = codec.request_header(api_key, version, self.correlation_id, self.client_id, flexible) + body
        request_deadline = time.monotonic() + self.timeout
        try:
            self.sock.settimeout(self._remaining(self.timeout))
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        except TimeoutError:
            raise WireError("timeout", "timed out sending the request") from None
        except OSError as exc:
            refused = _refusal_error(exc, self.security, awaiting_response=False) if self.security.uses_tls else None
            if refused is not None:
                raise refused from None
            raise WireError("closed", f"connection failed while sending: {exc}") from None
        size_bytes = self._recv_exact(4, request_deadline)
        size = struct.unpack(">i", size_bytes)[0]
        if not self.security.uses_tls and codec.looks_like_tls(size_bytes):
            raise WireError("protocol", "the listener answered with TLS: it expects a TLS handshake first",
                            speaks_tls=True, awaiting_response=True)
        if size < 4 or size > codec.MAX_FRAME:
            raise WireError("protocol", f"response size {size} is not plausible")
        reader = Reader(self._recv_exact(size, request_deadline))
        self.largest_response = max(self.largest_response, size + 4)
        self.last_response = size + 4
        codec.response_header(reader, api_key, flexible, self.correlation_id)
        return reader

    def open(self) -> dict[int, tuple[int, int]]:
        """Connect, ApiVersions, and SASL where the listener's protocol has it: every conversation's start."""
        self.connect()
        versions = self.negotiate()
        if self.security.uses_sasl:
            self.authenticate()
        return versions

    def local_address(self) -> str | None:
        """The local address of the connection (which of the machine's addresses the route chose), if known."""
        try:
            return str(self.sock.getsockname()[0]) if self.sock is not None else None
        except OSError:
            return None

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0: which request versions this broker speaks."""
        self.api_versions = codec.decode_api_versions(self.request(codec.API_API_VERSIONS, 0, b""))
        return self.api_versions

    def authenticate(self) -> None:
        """SaslHandshake v1, then the mechanism's messages in SaslAuthenticate v0 or v1 (KIP-152).

        The handshake's answer lists the mechanisms the listener enabled, so a refusal says which
        to use; a failed exchange keeps the broker's own words (wrong password, unknown user, or
        KIP-255's JSON for a refused OAUTHBEARER token, which comes before the failure itself).
        """
        from kprobe.kafka import sasl  # hashlib, hmac, secrets: only for a listener that takes SASL

        sec = self.security
        mechanism = (sec.sasl_mechanism or "PLAIN").upper()
        code, offered = self.sasl_handshake(mechanism)
        if code == ILLEGAL_SASL_STATE and not offered:
            plain: Protocol = "SSL" if sec.uses_tls else "PLAINTEXT"
            raise WireError("protocol", f"the listener answered SaslHandshake with ILLEGAL_SASL_STATE, as a listener "
                            f"without SASL does: it is {'an' if sec.uses_tls else 'a'} {plain} listener, and you sent "
                            f"{sec.protocol}",
                            wanted_protocol=plain, awaiting_response=True)
        if code != 0:
            takes = ", ".join(offered) or "no SASL mechanism"
            raise WireError("auth_failed", f"this listener takes {takes}; you sent {mechanism} "
                            f"(set sasl.mechanism to {offered[0] if offered else 'one it takes'})",
                            mechanisms=tuple(offered))
        talk = (self._oauthbearer() if mechanism == "OAUTHBEARER"
                else sasl.conversation(mechanism, sec.sasl_username or "", sec.sasl_password or ""))
        version = 1 if self.api_versions.get(codec.API_SASL_AUTHENTICATE, (0, 0))[1] >= 1 else 0
        message: bytes | None = talk.start()
        while message is not None:
            reader = self.request(codec.API_SASL_AUTHENTICATE, version, codec.encode_sasl_authenticate(message))
            code, text, answer = codec.decode_sasl_authenticate(reader, version)
            if code != 0:
                why = talk.refusal() or text or codec.error_name(code)
                raise WireError("auth_failed", f"SASL authentication failed: {talk.redact(why)}")
            try:
                message = talk.step(answer)
            except sasl.SaslError as exc:
                raise WireError("auth_failed", f"{mechanism} exchange failed: {talk.redact(str(exc))}") from None

    def sasl_handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake v1 for `mechanism`: (error code, the mechanisms the listener enabled)."""
        reader = self.request(codec.API_SASL_HANDSHAKE, 1, codec.encode_sasl_handshake(mechanism))
        return codec.decode_sasl_handshake(reader)

    def _oauthbearer(self) -> sasl.OAuthBearer:
        """The OAUTHBEARER client with this run's token (fetched once, then shared by every connection).

        A token that cannot be had is an authentication failure of this listener for every client
        with these settings; the message says the broker was not the one that refused. Only the
        run's own deadline makes it a timeout, which proves nothing about the endpoint.
        """
        from kprobe.kafka import oauth, sasl  # the token code (HTTP, JWS, MSK's signer): only for OAUTHBEARER

        settings = self.security.oauth
        if settings is None:
            raise WireError("auth_failed", "sasl.mechanism=OAUTHBEARER without token settings")
        msk = settings.method == "aws_msk_iam"
        try:
            token = oauth.token_for(settings, timeout=self.timeout, deadline=self.deadline)
        except oauth.TokenError as exc:
            if exc.deadline:
                raise WireError("timeout", str(exc), deadline=True) from None
            kind = "Amazon MSK IAM" if msk else "OAUTHBEARER"
            raise WireError("auth_failed", f"no {kind} token, so no client gets past authentication: {exc}; "
                            "the broker never saw a token", token_unavailable=True) from None
        return sasl.OAuthBearer(token.value, token.extensions, hints=sasl.MSK_IAM_STATUS_HINTS if msk else None,
                                about=token.about)

    def describe_broker(
        self, node_id: int, keys: tuple[str, ...] = ("node.id",)
    ) -> tuple[int, str | None, dict[str, str | None]]:
        """DescribeConfigs v1 for the BROKER resource `node_id`: (error code, message, configs)."""
        reader = self.request(codec.API_DESCRIBE_CONFIGS, 1, codec.encode_describe_broker(node_id, keys))
        return codec.decode_describe_broker(reader)

    def describe_cluster(self, endpoint_type: int) -> codec.DescribedCluster:
        """DescribeCluster (v1+, at the highest version both sides speak) for brokers or controllers.

        A node without DescribeCluster v1 (a controller before Kafka 3.7, a broker before 3.7) is a
        `protocol` error that says so; the caller decides what that means.
        """
        version = codec.describe_cluster_version(self.api_versions)
        if version is None:
            low, high = self.api_versions.get(codec.API_DESCRIBE_CLUSTER, (0, -1))
            offered = f"DescribeCluster v{low}-v{high}" if high >= 0 else "no DescribeCluster"
            raise WireError("protocol", f"the node offers {offered}; describing controllers needs v1 (Kafka 3.7+)")
        body = codec.encode_describe_cluster(version, endpoint_type)
        reader = self.request(codec.API_DESCRIBE_CLUSTER, version, body, True)
        return codec.decode_describe_cluster(reader, version)

    def metadata(self, topics: Sequence[str] | None = None, auto_create: bool = False) -> ClusterMetadata:
        """Metadata for `topics` ([] = brokers only, None = all topics); `auto_create` as a producer asks."""
        version = codec.metadata_version(self.api_versions)
        reader = self.request(codec.API_METADATA, version,
                              codec.encode_metadata_request(version, topics, auto_create), version >= 9)
        return codec.decode_metadata(reader, version)
