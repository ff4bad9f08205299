"""Ask each bootstrap address, separately, what the cluster advertises.

Each bootstrap gets its own connection, so every answer is attributable to the address the
user gave. The request goes over that one connection with kprobe's wire client (see
`kprobe.kafka.connection` for why not librdkafka); SASL mechanisms kprobe does not speak itself fall back
to one confluent-kafka client per address, and the result says so (`via: librdkafka`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kprobe.kafka.client_versions import CLIENT_APIS
from kprobe.kafka.connection import KafkaConnection
from kprobe.kafka.exchanges import ListenerAnswer, ask_listener, fetch_and_identify, small_metadata
from kprobe.kafka.mechanisms import MSK_IAM
from kprobe.kafka.security import Security
from kprobe.kafka.wire import WireError
from kprobe.logs import logger
from kprobe.models import (
    AdvertisedBroker,
    ApplicationAnswer,
    ApplicationQuestions,
    BootstrapAddress,
    BootstrapResult,
    BootstrapStatus,
    ClusterMetadata,
    Protocol,
    asks_anything,
)
from kprobe.probe.context import RunContext
from kprobe.probe.pool import run_bounded
from kprobe.records import replace

_WIRE_STATUS: dict[str, BootstrapStatus] = {"refused": "refused", "timeout": "timeout", "auth_failed": "auth_failed"}
_LOG = logger("kprobe.probe.bootstrap")


def fetch_bootstrap(
    address: BootstrapAddress, ctx: RunContext, *, topics: Sequence[str] | None = None, identity: bool = False,
    auto_create: bool = False, application: ApplicationQuestions | None = None,
) -> BootstrapResult:
    """One bootstrap's answer, or why there is none; never raises for network trouble.

    With `identity`, the same connection also asks which node answered (DescribeConfigs), so
    a fix can name the broker the bootstrap address really reaches. `auto_create` asks for `topics`
    as a producer does (only --publish wants that: kprobe.delivery.publish). `application` (a probe's
    run, even with no application named) asks what the application needs after the metadata
    (kprobe.kafka.coordinators): only where there is something to learn.
    """
    started = time.perf_counter()
    hostport = address.hostport
    security = ctx.security_of(address)
    timeout, deadline = ctx.timeout, ctx.deadline
    if not security.spoken_by_kprobe:
        # librdkafka's path cannot say which node answered: identity stays unknown.
        return _via_librdkafka(address, ctx, topics=topics)
    dns = ctx.resolver.resolve(address.host)
    if dns.status != "ok" or not dns.addresses:
        return BootstrapResult(address=hostport, status="dns_failed",
                               error=dns.error or f"{address.host} did not resolve", ms=_ms(started))
    mechanism = security.sasl_mechanism if security.uses_sasl else None
    if mechanism == "OAUTHBEARER" and security.oauth is not None and security.oauth.method == "aws_msk_iam":
        mechanism = MSK_IAM  # sent as OAUTHBEARER; a failure's fix is MSK's, not an identity provider's
    failures: list[WireError] = []
    failed_at = dns.addresses[0]
    answers: list[ApplicationAnswer | None] = []
    client_versions: list[tuple[tuple[str, int, int], ...]] = []
    then = None
    if application is not None:
        def then(conn: KafkaConnection, meta: ClusterMetadata, node_id: int | None) -> None:
            client_versions.append(tuple((CLIENT_APIS[k], *conn.api_versions[k]) for k in sorted(CLIENT_APIS)
                                         if k in conn.api_versions))
            if asks_anything(meta, application):
                from kprobe.kafka.coordinators import ask_application

                answers.append(ask_application(conn, meta, node_id, application))
    for ip in dns.addresses:
        if time.monotonic() >= deadline:
            failures.append(WireError("timeout", "run deadline reached", deadline=True))
            break
        try:
            meta, node_id, note, settings = fetch_and_identify(
                ip, address.port, timeout=timeout, deadline=deadline, security=security,
                server_hostname=address.host, topics=topics, identity=identity, auto_create=auto_create, then=then,
            )
        except WireError as exc:
            if exc.metadata_stalled and topics != []:
                stalled = _small_answer(ip, address, ctx, security, exc, started, mechanism)
                if stalled is not None:
                    return stalled
            failures.append(exc)
            failed_at = ip
            # Only a connection that never opened justifies trying the name's next address;
            # a broker that answered badly has answered.
            if exc.kind in ("refused", "timeout", "unreachable") and not exc.awaiting_response:
                continue
            break
        result = BootstrapResult(address=hostport, status="ok", answered_by_id=-1,
                                 answered_by_name=f"{hostport}/bootstrap", connected_to=ip, metadata=meta,
                                 ms=_ms(started), node_id=node_id, identity_note=note, listener_settings=settings,
                                 protocol=security.protocol,
                                 sasl_mechanism=mechanism, application=answers[-1] if answers else None,
                                 api_versions=client_versions[-1] if client_versions else ())
        _LOG.debug("bootstrap %s: metadata v%s from %s in %.1f ms, %d brokers", hostport, meta.api_version, ip,
                   result.ms or 0, len(meta.brokers))
        return result
    worst = failures[-1]
    status = _WIRE_STATUS.get(worst.kind, "error")
    text = "; ".join(dict.fromkeys(str(f) for f in failures))
    speaks_tls = worst.speaks_tls
    wanted, offered = worst.wanted_protocol, worst.mechanisms
    ask = _ask_how(worst, security)
    if ask is not None:
        answer = _ask(failed_at, address, ctx, ask)
        if answer is not None:
            if worst.tls_failure == "handshake_failed":
                speaks_tls = False  # a plaintext ApiVersions was answered where the TLS handshake failed
            elif worst.speaks_tls is None and answer.protocol is None:
                answer = None  # a Kafka answer, but nothing that tells the protocol
        if answer is not None:
            wanted, offered = answer.protocol, answer.mechanisms or offered
            text += _learnt(answer, speaks_tls)
    _LOG.debug("bootstrap %s: %s (%s)", hostport, status, text)
    controller = worst.kind == "controller"
    return BootstrapResult(address=hostport, status=status, error=text, ms=_ms(started), protocol=security.protocol,
                           tls_failure=worst.tls_failure, speaks_tls=speaks_tls, sasl_mechanisms=offered,
                           sasl_mechanism=mechanism, token_unavailable=worst.token_unavailable,
                           kraft_controller=controller, node_id=worst.node_id if controller else None,
                           connected_to=failed_at if controller else None, wanted_protocol=wanted,
                           tls_alert=worst.tls_alert)


def _small_answer(ip: str, address: BootstrapAddress, ctx: RunContext, security: Security, stalled: WireError,
                  started: float, mechanism: str | None) -> BootstrapResult | None:
    """The bootstrap's brokers from a small answer, when the full Metadata answer stalled; None if that stalls too.

    ApiVersions (and SASL) answered on the connection whose Metadata answer never came: a path that
    drops packets above some size without an ICMP message (a path-MTU black hole on a VPN or tunnel)
    does exactly this, since small answers fit in one packet and a listing of every topic does not.
    A brokers-only Metadata request (a few hundred bytes back) on a fresh connection tells it apart
    from a broker that stopped answering, costs at most one more timeout, and still gives the brokers
    and endpoints clients will connect to, so the run goes on and names the path, not the address.
    """
    if time.monotonic() >= ctx.deadline:
        return None
    try:
        meta, largest = small_metadata(ip, address.port, timeout=ctx.timeout, deadline=ctx.deadline,
                                       security=security, server_hostname=address.host)
    except WireError:
        return None
    _LOG.debug("bootstrap %s: the full metadata stalled (%s); brokers-only metadata of %d bytes arrived",
               address.hostport, stalled, largest)
    return BootstrapResult(address=address.hostport, status="ok", answered_by_id=-1,
                           answered_by_name=f"{address.hostport}/bootstrap", connected_to=ip, metadata=meta,
                           ms=_ms(started), protocol=security.protocol, sasl_mechanism=mechanism,
                           full_metadata_lost=True, largest_answer_bytes=largest)


def _ask_how(worst: WireError, security: Security) -> Security | None:
    """How to ask the listener which security.protocol it wants, when this failure calls for asking.

    Only failures a protocol mismatch explains, so a healthy or plainly unreachable bootstrap costs
    nothing extra: a connection without SASL closed at its first request after ApiVersions (a SASL
    listener does that), a listener that answered in TLS (plaintext was sent), or a TLS handshake
    dropped the way a plaintext listener drops a ClientHello. The answer's TLS is the listener's
    own; its certificate is not what is asked about, so it is not verified here.
    """
    if worst.closed_without_sasl:
        return security
    if worst.speaks_tls:
        return replace(security, protocol="SSL", ssl_verify=False, ssl_verify_hostname=False)
    if worst.tls_failure == "handshake_failed":
        return replace(security, protocol="PLAINTEXT")
    return None


def _ask(ip: str, address: BootstrapAddress, ctx: RunContext, security: Security) -> ListenerAnswer | None:
    """The listener's own answer on a new connection (ask_listener), within the run's timeout and deadline.

    A plaintext listener reads a ClientHello as a huge Kafka frame and drops the connection, which
    TLS reports as an unexpected EOF; a SASL listener drops a client that skips SaslHandshake as a
    broken broker would. Only a second try, in the other protocol, tells these apart from a proxy
    or a broken set-up, and tells the user which `security.protocol` (and mechanisms) to set.
    """
    if time.monotonic() >= ctx.deadline:
        return None
    return ask_listener(ip, address.port, timeout=ctx.timeout, deadline=ctx.deadline, security=security,
                        server_hostname=address.host)


_SPOKEN: dict[Protocol, str] = {"PLAINTEXT": "in plaintext", "SSL": "inside TLS"}


def _learnt(answer: ListenerAnswer, speaks_tls: bool | None) -> str:
    """What the second connection showed, appended to the bootstrap's error."""
    if answer.protocol is None:
        return "; the same port answers Kafka in plaintext" if speaks_tls is False else ""
    if answer.mechanisms:
        return (f"; asked on a new connection, the listener answered SaslHandshake with its mechanisms "
                f"{', '.join(answer.mechanisms)}: it is a {answer.protocol} listener")
    article = "an" if answer.protocol == "SSL" else "a"
    return (f"; the same port answers Kafka {_SPOKEN.get(answer.protocol, '')}, and SaslHandshake with "
            f"ILLEGAL_SASL_STATE: it is {article} {answer.protocol} listener")


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def fetch_all(
    addresses: Iterable[BootstrapAddress],
    ctx: RunContext,
    *,
    topics: Sequence[str] | None = None,
    identity: bool = False,
    on_done: Callable[[BootstrapResult], None] | None = None,
    application: ApplicationQuestions | None = None,
) -> list[BootstrapResult]:
    """Every bootstrap in parallel, each in a daemon thread bounded by the deadline.

    `on_done` hears of each bootstrap's answer or failure as it comes (a progress bar counts them).
    """
    addresses = list(addresses)

    def work(address: BootstrapAddress) -> BootstrapResult:
        result = fetch_bootstrap(address, ctx, topics=topics, identity=identity, application=application)
        if on_done is not None:
            on_done(result)
        return result

    done = run_bounded(addresses, work, workers=64, deadline=ctx.deadline + 0.05)
    return [
        done.get(i) or BootstrapResult(address=a.hostport, status="timeout",
                                       error="no answer before the run's deadline")
        for i, a in enumerate(addresses)
    ]


def _via_librdkafka(address: BootstrapAddress, ctx: RunContext, *, topics: Sequence[str] | None) -> BootstrapResult:
    """confluent-kafka's AdminClient for one address, for mechanisms kprobe cannot speak.

    librdkafka's own log lines are captured through a Python logger instead of stderr.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    started = time.perf_counter()
    hostport = address.hostport
    props, timeout = ctx.props, ctx.timeout
    captured: list[str] = []
    librdkafka_log = _capture(captured)
    conf: dict[str, Any] = dict(props)
    conf.update({"bootstrap.servers": hostport, "logger": librdkafka_log, "log_level": 3,
                 "socket.timeout.ms": int(timeout * 1000), "client.id": "kprobe",
                 # Authentication failures arrive as error events, not as list_topics' exception.
                 "error_cb": lambda err: captured.append(str(err.str()))})
    if address.protocol and "security.protocol" not in props:
        conf["security.protocol"] = address.protocol
    wait = ctx.remaining(timeout)
    admin = None
    try:
        admin = AdminClient(conf)
        md = admin.list_topics(topic=topics[0] if topics else None, timeout=wait)
    except KafkaException as exc:
        if admin is not None:
            admin.poll(0.05)  # error and log events are delivered only from poll()
        for line in captured:
            _LOG.debug("librdkafka: %s", line)
        text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
        lowered = (text + " " + " ".join(captured)).lower()
        auth = [line for line in captured if "authentication" in line.lower()]
        status: BootstrapStatus
        if auth:
            status, text = "auth_failed", auth[-1]
        elif "timed out" in lowered:
            status = "timeout"
        else:
            status = "error"
        return BootstrapResult(address=hostport, status=status, error=text, ms=_ms(started), via="librdkafka")
    for line in captured:
        _LOG.debug("librdkafka: %s", line)
    brokers = tuple(
        AdvertisedBroker(b.id, b.host or "", b.port, None) for b in sorted(md.brokers.values(), key=lambda b: b.id)
    )
    meta = ClusterMetadata(brokers=brokers, cluster_id=md.cluster_id, controller_id=md.controller_id)
    return BootstrapResult(address=hostport, status="ok", answered_by_id=md.orig_broker_id,
                           answered_by_name=md.orig_broker_name, metadata=meta, ms=_ms(started), via="librdkafka")


def _capture(sink: list[str]) -> Any:
    """A logger that keeps librdkafka's log lines in `sink` for --verbose instead of letting them hit stderr."""
    import logging

    class _ListHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sink.append(record.getMessage())

    captured = logging.getLogger(f"kprobe.librdkafka.{id(sink)}")
    captured.propagate = False
    captured.addHandler(_ListHandler())
    return captured
