"""A saved JSON report read back into the models, so every format renders it as the live run did.

The other half of `json_report`: `kprobe show` and `kprobe diff` hand what this returns to the same
renderers a probe uses, which is what makes `show` print the live run's text byte for byte. Reports
outlive the kprobe that wrote them, so everything added to `v1` after its first release has a
default here (the value a report from before that field meant), unknown fields are ignored, and a
report of another major version, or anything that is not a report, is one `BadReport` line saying
which field is wrong: a file found in a directory may be anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, Literal, TypeVar, get_args

from kprobe.errors import BadReport
from kprobe.models import (
    AdvertisedBroker,
    Application,
    BootstrapResult,
    BootstrapStatus,
    ClusterMetadata,
    ControllerBootstrapResult,
    ControllerStatus,
    Coordinator,
    CoordinatorKind,
    DnsResult,
    DnsSource,
    DnsStatus,
    Endpoint,
    EndpointResult,
    EndpointStatus,
    Finding,
    Identity,
    IdentityStatus,
    InternalTopic,
    NamedTopic,
    NamedTopicStatus,
    PartitionRoundtrip,
    PartitionRoundtripStatus,
    Protocol,
    RackRead,
    Remap,
    Report,
    ResolverKind,
    Roundtrip,
    RoundtripStatus,
    RoundtripStep,
    RunStatus,
    Severity,
    TcpResult,
    TcpStatus,
    TlsFailure,
    TlsResult,
    TlsStatus,
    Vantage,
    Via,
)

SCHEMA_PREFIX = "kprobe.report/v"
MAJOR = 1

T = TypeVar("T")
_BROKER_FIELDS = itemgetter("node_id", "host", "port", "rack")
_KIND_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
               dict: "an object"}


class _Obj:
    """A JSON object with its path, for messages that name the field a broken report got wrong."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, dict):
            raise BadReport(f"{path or 'the report'} is not a JSON object")
        self.data: dict[str, Any] = data
        self.path = path

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str, kinds: tuple[type, ...], default: object, required: bool) -> Any:
        if key not in self.data or (self.data[key] is None and not required):
            if required:
                raise BadReport(f"{self._at(key)} is missing")
            return default
        value = self.data[key]
        # bool is an int to Python, never to the report: a port of `true` is a broken report.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(_KIND_WORDS[k] for k in kinds)
            raise BadReport(f"{self._at(key)} is not {wanted}")
        return value

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> Any:
        return self._get(key, (str,), default, required)

    def integer(self, key: str, default: int | None = None, *, required: bool = False) -> Any:
        return self._get(key, (int,), default, required)

    def number(self, key: str, default: float | None = None, *, required: bool = False) -> Any:
        value = self._get(key, (int, float), default, required)
        return float(value) if value is not None else None

    def flag(self, key: str, default: bool = False) -> bool:
        return bool(self._get(key, (bool,), default, False))

    def obj(self, key: str, *, required: bool = False) -> _Obj | None:
        value = self._get(key, (dict,), None, required)
        return None if value is None else _Obj(value, self._at(key))

    def items(self, key: str, read: Callable[[_Obj], T], *, required: bool = False) -> tuple[T, ...]:
        values = self._get(key, (list,), [], required)
        return tuple(read(_Obj(v, f"{self._at(key)}[{i}]")) for i, v in enumerate(values))

    def texts(self, key: str) -> tuple[str, ...]:
        values = self._get(key, (list,), [], False)
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise BadReport(f"{self._at(key)}[{i}] is not a string")
        return tuple(values)

    def word(self, key: str, allowed: tuple[str, ...], default: str | None = None, *, required: bool = False) -> Any:
        """A value of one of the report's vocabularies: another word means another kprobe wrote it."""
        value = self.text(key, default, required=required)
        if value is not None and value not in allowed:
            raise BadReport(f"{self._at(key)} is {value!r}, not one of {', '.join(allowed)}")
        return value


def check_schema(data: object) -> None:
    """A report of this major version, or BadReport saying what it is instead."""
    if not isinstance(data, dict):
        raise BadReport(f"not a kprobe report (a JSON {type(data).__name__.replace('dict', 'object')}, "
                        f"not an object)")
    schema = data.get("schema")
    if isinstance(schema, str) and schema.startswith("kprobe.") and not schema.startswith(SCHEMA_PREFIX):
        raise BadReport(f"a {schema[:40]} document, not a probe report: show and diff read what kprobe probe and "
                        "kprobe watch write")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise BadReport(f'not a kprobe report (no "schema": "{SCHEMA_PREFIX}{MAJOR}")')
    major = schema[len(SCHEMA_PREFIX):].split(".", 1)[0]
    if major != str(MAJOR):
        raise BadReport(f"a {schema[:40]} report: this kprobe reads {SCHEMA_PREFIX}{MAJOR} reports; "
                        f"read it with the kprobe that wrote it, or a newer one")


def from_dict(data: object) -> Report:
    """The report as models; BadReport (one line naming the field) when it is not a readable v1 report."""
    check_schema(data)
    top = _Obj(data, "")
    vantage = top.obj("vantage", required=True)
    summary = top.obj("summary", required=True)
    assert vantage is not None and summary is not None
    resolver = vantage.obj("resolver")
    controllers = top.obj("controllers")
    roundtrip = top.obj("roundtrip")
    application = top.obj("application")
    settings = top.obj("settings")
    seen: dict[tuple[object, ...], AdvertisedBroker] = {}
    return Report(
        id=top.text("id", required=True),
        started_at=top.text("started_at", required=True),
        finished_at=top.text("finished_at", "") or "",
        vantage=Vantage(
            name=vantage.text("name", required=True),
            hostname=vantage.text("hostname", "") or "",
            resolver_kind=resolver.word("kind", get_args(ResolverKind), "system") if resolver else "system",
            nameservers=resolver.texts("nameservers") if resolver else (),
        ),
        bootstraps=top.items("bootstraps", lambda b: _bootstrap(b, seen), required=True),
        endpoints=top.items("endpoints", lambda e: _endpoint(e, seen), required=True),
        findings=top.items("findings", _finding, required=True),
        status=summary.word("status", get_args(RunStatus), required=True),
        duration_ms=top.number("duration_ms", 0.0) or 0.0,
        settings=dict(settings.data) if settings else {},
        deadline_reached=summary.flag("deadline_reached"),
        controllers=controllers.items("bootstraps", lambda c: _controller(c, seen)) if controllers else None,
        controller_endpoints=controllers.items("endpoints", lambda e: _endpoint(e, seen)) if controllers else (),
        roundtrip=_roundtrip(roundtrip) if roundtrip else None,
        application=_application(application) if application else None,
    )


def summary_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The few fields `show --summary` and the filters read, without building the models.

    For thousands of reports a second: the full `from_dict` costs about as much as parsing.
    """
    top = _Obj(data, "")
    vantage = top.obj("vantage", required=True)
    summary = top.obj("summary", required=True)
    assert vantage is not None and summary is not None
    clusters = []
    for b in top._get("bootstraps", (list,), [], True):
        cid = b.get("cluster_id") if isinstance(b, dict) else None
        if isinstance(cid, str) and cid not in clusters:
            clusters.append(cid)
    first = None
    for f in top._get("findings", (list,), [], True):
        if isinstance(f, dict) and f.get("severity") in ("error", "warning"):
            first = f
            break
    return {"started_at": top.text("started_at", required=True), "vantage": vantage.text("name", required=True),
            "clusters": clusters, "status": summary.word("status", get_args(RunStatus),
                                                         required=True),
            "first": first}


def _broker(o: _Obj) -> AdvertisedBroker:
    return AdvertisedBroker(o.integer("node_id", required=True), o.text("host", required=True),
                            o.integer("port", required=True), o.text("rack"))


def _brokers(o: _Obj, key: str, seen: dict[tuple[object, ...], AdvertisedBroker]) -> tuple[AdvertisedBroker, ...]:
    """A list of advertised brokers, checked inline and each broker made once per report.

    Every endpoint's identity repeats the whole broker list (20,000 entries in a 200-broker report):
    an object per entry through the general path was most of `show`'s time. `seen` hands back the
    broker already made for the same (node, host, port, rack). An entry that fails the quick check
    goes the general way, for the message naming its field.
    """
    values = o._get(key, (list,), [], False)
    out = []
    for i, b in enumerate(values):
        try:
            ident = _BROKER_FIELDS(b)  # one C call; a non-object or a missing field goes the general way
        except (KeyError, TypeError):
            out.append(_broker(_Obj(b, f"{o._at(key)}[{i}]")))
            continue
        broker = seen.get(ident)
        if broker is None:
            node, host, port, rack = ident
            if not (type(node) is int and type(host) is str and type(port) is int and (rack is None
                                                                                         or type(rack) is str)):
                out.append(_broker(_Obj(b, f"{o._at(key)}[{i}]")))
                continue
            broker = seen[ident] = AdvertisedBroker(node, host, port, rack)
        out.append(broker)
    return tuple(out)


_PROTOCOLS = get_args(Protocol)


def _bootstrap(o: _Obj, seen: dict[tuple[object, ...], AdvertisedBroker]) -> BootstrapResult:
    status = o.word("status", get_args(BootstrapStatus), required=True)
    brokers = _brokers(o, "brokers", seen)
    answered = o.obj("answered_by")
    metadata = None
    if status == "ok":
        metadata = ClusterMetadata(brokers=brokers, cluster_id=o.text("cluster_id"),
                                   controller_id=o.integer("controller_id"), api_version=o.integer("metadata_version"),
                                   local_address=o.text("source"))
    return BootstrapResult(
        address=o.text("address", required=True), status=status, error=o.text("error"),
        answered_by_id=answered.integer("node_id") if answered else None,
        answered_by_name=answered.text("name") if answered else None,
        connected_to=o.text("connected_to"), metadata=metadata, ms=o.number("ms"),
        via=o.word("via", get_args(Via), "kprobe"), node_id=o.integer("node_id"),
        identity_note=o.text("identity_note"), protocol=o.word("protocol", _PROTOCOLS),
        tls_failure=o.word("tls_failure", get_args(TlsFailure)),
        speaks_tls=o._get("speaks_tls", (bool,), None, False), sasl_mechanisms=o.texts("sasl_mechanisms"),
        sasl_mechanism=o.text("sasl_mechanism"), token_unavailable=o.flag("token_unavailable"),
        kraft_controller=o.flag("kraft_controller"), wanted_protocol=o.word("wanted_protocol", _PROTOCOLS),
        tls_alert=o.text("tls_alert"), full_metadata_lost=o.flag("full_metadata_lost"),
        largest_answer_bytes=o.integer("largest_answer_bytes"), api_versions=_api_versions(o),
        listener_settings=_listener_settings(o),
    )


def _listener_settings(o: _Obj) -> tuple[tuple[str, str], ...]:
    settings = o._get("listener_settings", (dict,), {}, False)
    return tuple((str(key), value) for key, value in settings.items() if isinstance(value, str))


def _api_versions(o: _Obj) -> tuple[tuple[str, int, int], ...]:
    versions = o._get("api_versions", (dict,), {}, False)
    return tuple((str(name), pair[0], pair[1]) for name, pair in versions.items()
                 if isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair))


def _dns(o: _Obj, host: str) -> DnsResult:
    detail = o.obj("detail")
    return DnsResult(
        host=host, status=o.word("status", get_args(DnsStatus),
                                 required=True),
        addresses=o.texts("addresses"), ms=o.number("ms"),
        source=o.word("source", get_args(DnsSource), "system"), error=o.text("error"),
        cname_chain=o.texts("cname_chain"), ttl=o.integer("ttl"), in_hosts_file=o.flag("in_hosts_file"),
        detail=_dns(detail, host) if detail else None, server=o.text("server"),
    )


def _endpoint(o: _Obj, seen: dict[tuple[object, ...], AdvertisedBroker]) -> EndpointResult:
    remapped = o.obj("remapped")
    remap = None
    if remapped is not None:
        remap = Remap(host=remapped.text("host", required=True), port=remapped.integer("port", required=True),
                      option=remapped.word("option", ("--resolve", "--connect-to"), required=True))
    endpoint = Endpoint(node_id=o.integer("node_id", required=True), host=o.text("host", required=True),
                        port=o.integer("port", required=True), rack=o.text("rack"),
                        advertised_by=o.texts("advertised_by"), remap=remap)
    dns = o.obj("dns", required=True)
    assert dns is not None
    identity = o.obj("identity")
    tls = o.obj("tls")
    return EndpointResult(
        endpoint=endpoint,
        dns=_dns(dns, endpoint.dial_host),
        tcp=o.items("tcp", lambda t: TcpResult(
            address=t.text("address", required=True), port=endpoint.dial_port,
            status=t.word("status", get_args(TcpStatus), required=True),
            ms=t.number("ms"), error=t.text("error"), source=t.text("source"))),
        status=o.word("status", get_args(EndpointStatus),
                      required=True),
        identity=_identity(identity, seen) if identity else None,
        tls=_tls(tls) if tls else None,
        compared_dns=o.items("compared_dns", lambda d: _dns(d, endpoint.dial_host)),
    )


def _identity(o: _Obj, seen: dict[tuple[object, ...], AdvertisedBroker]) -> Identity:
    advertised = o._get("advertised", (list,), None, False)
    return Identity(
        status=o.word("status", get_args(IdentityStatus), required=True),
        node_id=o.integer("node_id"), detail=o.text("detail"), address=o.text("address"),
        advertised=None if advertised is None else _brokers(o, "advertised", seen), ms=o.number("ms"),
        kraft_controller=o.flag("kraft_controller"), tls_failure=o.word("tls_failure", get_args(TlsFailure)),
    )


def _tls(o: _Obj) -> TlsResult:
    verifies = o.obj("client_verifies")
    return TlsResult(
        status=o.word("status", get_args(TlsStatus), required=True),
        address=o.text("address", "") or "", subject=o.text("subject"), names=o.texts("names"),
        sans=o.texts("sans"), issuer=o.text("issuer"), not_after=o.text("not_after"), days_left=o.number("days_left"),
        trusted=o._get("trusted", (bool,), None, False), hostname_ok=o._get("hostname_ok", (bool,), None, False),
        error=o.text("error"), ms=o.number("ms"),
        client_verifies_chain=verifies.flag("chain", True) if verifies else True,
        client_verifies_name=verifies.flag("name", True) if verifies else True,
    )


def _finding(o: _Obj) -> Finding:
    return Finding(code=o.text("code", required=True), severity=o.word("severity", get_args(Severity),
                                                                        required=True),
                   message=o.text("message", "") or "", fix=o.text("fix", "") or "", node_id=o.integer("node_id"),
                   endpoint=o.text("endpoint"), bootstrap=o.text("bootstrap"), endpoints=o.texts("endpoints"),
                   node_ids=_integers(o, "node_ids"))


def _integers(o: _Obj, key: str) -> tuple[int, ...]:
    values = o._get(key, (list,), [], False)
    for i, v in enumerate(values):
        if type(v) is not int:
            raise BadReport(f"{o._at(key)}[{i}] is not an integer")
    return tuple(values)


def _controller(o: _Obj, seen: dict[tuple[object, ...], AdvertisedBroker]) -> ControllerBootstrapResult:
    return ControllerBootstrapResult(
        address=o.text("address", required=True),
        status=o.word("status", get_args(ControllerStatus), required=True),
        error=o.text("error"), connected_to=o.text("connected_to"), cluster_id=o.text("cluster_id"),
        active_controller_id=o.integer("active_controller_id"), controllers=_brokers(o, "controllers", seen),
        ms=o.number("ms"), node_id=o.integer("node_id"), identity_note=o.text("identity_note"),
        protocol=o.word("protocol", _PROTOCOLS), describe_cluster_version=o.integer("describe_cluster_version"),
    )


def _roundtrip(o: _Obj) -> Roundtrip:
    return Roundtrip(
        topic=o.text("topic", required=True), client=o.text("client", "librdkafka") or "librdkafka",
        status=o.word("status", get_args(RoundtripStatus), required=True),
        partitions=o.items("partitions", lambda p: PartitionRoundtrip(
            partition=p.integer("partition", required=True), leader=p.integer("leader"),
            status=p.word("status", get_args(PartitionRoundtripStatus), required=True),
            offset=p.integer("offset"), produce_ms=p.number("produce_ms"), roundtrip_ms=p.number("roundtrip_ms"),
            error=p.text("error"), broker_error=p.flag("broker_error"))),
        created=o.flag("created"), error=o.text("error"), topic_missing=o.flag("topic_missing"), ms=o.number("ms"),
        group=_step(o.obj("group"), "group"), transaction=_step(o.obj("transaction"), "transaction"),
    )


def _step(o: _Obj | None, kind: Literal["group", "transaction"]) -> RoundtripStep | None:
    if o is None:
        return None
    return RoundtripStep(kind=kind, key=o.text("key", required=True), twin=o.text("twin", "") or "",
                         partition=o.integer("partition"),
                         status=o.word("status", get_args(RoundtripStatus), required=True), error=o.text("error"),
                         ms=o.number("ms"))


def _application(o: _Obj) -> Application:
    return Application(
        group=o.text("group"), transactional_id=o.text("transactional_id"), group_protocol=o.text("group_protocol"),
        share_group=o.text("share_group"), consumer_protocol=o.text("consumer_protocol"),
        share_protocol=o.text("share_protocol"), client_rack=o.text("client_rack"), pinned=o.text("pinned"),
        broker_racks=o.texts("broker_racks"), replica_selector=o.text("replica_selector"),
        rack_reads=o.items("rack_reads", lambda r: RackRead(
            topic=r.text("topic", required=True), partition=r.integer("partition", required=True),
            leader=r.integer("leader", required=True), replica=r.integer("replica", required=True),
            endpoint=r.text("endpoint"), status=r.text("status"))),
        topics=o.items("topics", lambda t: NamedTopic(
            name=t.text("name", required=True), status=t.word("status", get_args(NamedTopicStatus), required=True),
            partitions=t.integer("partitions", 0) or 0, leaderless=_integers(t, "leaderless"), error=t.text("error"))),
        internal_topics=o.items("internal_topics", lambda t: InternalTopic(
            name=t.text("name", required=True), exists=_maybe_flag(t, "exists"),
            partitions=t.integer("partitions", 0) or 0, live_brokers=t.integer("live_brokers", 0) or 0,
            replication_factor=t.integer("replication_factor"), min_isr=t.integer("min_isr"),
            settings_read=t.flag("settings_read"), offline=_integers(t, "offline"),
            under_min_isr=_integers(t, "under_min_isr"))),
        coordinators=o.items("coordinators", lambda c: Coordinator(
            kind=c.word("kind", get_args(CoordinatorKind), required=True), key=c.text("key", required=True),
            partition=c.integer("partition"), partition_leader=c.integer("partition_leader"),
            node_id=c.integer("node_id"), endpoint=c.text("endpoint"), status=c.text("status"),
            error=c.text("error"))),
    )


def _maybe_flag(o: _Obj, key: str) -> bool | None:
    value = o._get(key, (bool, type(None)), None, False)
    return value if isinstance(value, bool) else None


__all__ = ["BadReport", "check_schema", "from_dict", "summary_of"]
