"""Every finding code kprobe can report: its severity, the stage it judges, what a client meets.

The codes are a public contract (docs/findings.md): add codes, never rename them. Each rule
module builds its findings with `finding(code, ...)`, which refuses a code missing here or a
severity the code does not allow, so the catalogue, the rules and the documentation (checked
against this table by tests/findings/test_catalogue.py) cannot drift apart.
"""

from __future__ import annotations

from typing import Literal

from kprobe.models import Finding, Severity
from kprobe.records import record

ERROR: Severity = "error"
WARNING: Severity = "warning"
INFO: Severity = "info"
# Errors first: the order findings are listed in, in every output.
SEVERITY_ORDER: dict[Severity, int] = {ERROR: 0, WARNING: 1, INFO: 2}

Stage = Literal["bootstrap", "advertised", "identity", "consistency", "tls", "dns", "run", "controllers", "shapes",
                "roundtrip", "application", "config"]


@record
class Kind:
    """What one code means, whatever the run that reports it."""

    stage: Stage
    severities: tuple[Severity, ...]
    title: str
    client_sees: str


CATALOGUE: dict[str, Kind] = {
    "BOOTSTRAP_UNREACHABLE": Kind(
        "bootstrap", (ERROR,), "A bootstrap address gave no metadata",
        "Clients cannot start from that address (no resolution, refused, timeout or a failed TLS handshake)."),
    "AUTH_FAILED": Kind(
        "bootstrap", (ERROR,), "The bootstrap refused the credentials",
        "Clients fail at connect with an authentication error."),
    "BOOTSTRAP_TLS_FAILED": Kind(
        "bootstrap", (ERROR,), "The TLS handshake with a bootstrap failed",
        "Clients fail before their first request: the certificate's name, chain or date, or the handshake itself."),
    "SECURITY_PROTOCOL_MISMATCH": Kind(
        "bootstrap", (ERROR,), "The client's security.protocol does not match the listener's",
        "Plaintext to a TLS listener fails as \"ApiVersionRequest failed\"; TLS to a plaintext one as a dropped "
        "handshake; no SASL to a SASL listener as a closed connection; SASL to a listener without it as an illegal "
        "SASL state."),
    "CLIENT_CERTIFICATE_REQUIRED": Kind(
        "bootstrap", (ERROR,), "The listener requires a client certificate and none was sent",
        "Clients without a certificate fail at their first request to that listener, at the bootstrap or at an "
        "advertised endpoint (TLS alert \"bad certificate\" from Kafka, \"certificate required\" from others; often "
        "seen as a closed connection)."),
    "CLIENT_CERTIFICATE_REFUSED": Kind(
        "bootstrap", (ERROR,), "The listener refused the client certificate sent",
        "Clients with that certificate fail at connect (TLS alert \"certificate unknown\", \"unknown ca\", ...)."),
    "OAUTH_TOKEN_UNAVAILABLE": Kind(
        "bootstrap", (ERROR,), "No OAUTHBEARER token could be had from the token endpoint",
        "Clients fail before the broker sees a token: the client id or secret, the endpoint, its certificate."),
    "PATH_MTU_BLACKHOLE": Kind(
        "bootstrap", (ERROR,), "Large answers are lost on the path to the bootstrap (a path-MTU black hole)",
        "Clients connect and move small records; metadata for many topics, kcat -L and large fetches hang until "
        "they time out."),
    "SASL_MECHANISM_MISMATCH": Kind(
        "bootstrap", (ERROR,), "The listener does not take the SASL mechanism sent",
        "Clients fail at connect with an unsupported-mechanism error."),
    "BOOTSTRAP_IS_CONTROLLER": Kind(
        "bootstrap", (ERROR,), "A bootstrap address is a KRaft controller listener",
        "Clients fail at their first metadata request: \"The node does not support METADATA\" "
        "(UnsupportedVersionException); librdkafka retries until it times out."),
    "ADVERTISED_UNRESOLVABLE": Kind(
        "advertised", (ERROR,), "An advertised host does not resolve from here",
        "Clients bootstrap, then fail every request (`Failed to resolve ...`)."),
    "ADVERTISED_LOOPBACK": Kind(
        "advertised", (ERROR,), "A broker advertises a loopback address to a remote client",
        "Every client connects to its own machine instead of the broker."),
    "ADVERTISED_REFUSED": Kind(
        "advertised", (ERROR,), "Nothing accepts connections at an advertised address",
        "Requests for partitions that broker leads fail."),
    "ADVERTISED_TIMEOUT": Kind(
        "advertised", (ERROR,), "Connections to an advertised address time out",
        "Clients wait for their timeouts, then fail."),
    "ADVERTISED_UNREACHABLE": Kind(
        "advertised", (ERROR,), "No route to an advertised address, or the connect fails otherwise",
        "Clients bootstrap, then fail every request to that broker."),
    "ADVERTISED_PARTIAL": Kind(
        "advertised", (WARNING,), "Only some addresses of an advertised name connect",
        "Clients that try a failing address first are slow to connect or fail."),
    "ADVERTISED_ONE_FAMILY_FAILS": Kind(
        "advertised", (WARNING, ERROR),
        "An advertised name's IPv4 addresses connect and its IPv6 ones fail, or the reverse",
        "IPv6 failing: clients with default settings work (librdkafka retries the next address, slowed by its "
        "connection set-up timeout where IPv6 drops packets); clients pinned to IPv6 fail. IPv4 failing: the Java "
        "client with default settings fails."),
    "INVALID_ADVERTISED_HOST": Kind(
        "advertised", (ERROR,), "An advertised host is not a usable name or address",
        "Clients bootstrap, then fail every request to that broker."),
    "INVALID_ADVERTISED_PORT": Kind(
        "advertised", (ERROR,), "An advertised port is outside 1-65535",
        "Clients bootstrap, then fail every request to that broker."),
    "RESOLVED_ONLY_VIA_HOSTS_FILE": Kind(
        "advertised", (WARNING,), "An advertised name resolves only through the hosts file",
        "It works on this machine and on no other."),
    "PORT_DIFFERS_FROM_BOOTSTRAP": Kind(
        "advertised", (INFO, WARNING), "The bootstrap's address is advertised with another port",
        "Nothing, for a second listener; a failing endpoint when a NAT or port mapping is unknown to the broker."),
    "PORT_FORWARD_INCOMPLETE": Kind(
        "shapes", (ERROR,), "A bootstrap through a port-forward, to brokers that advertise cluster-internal names",
        "Clients bootstrap through the forward, then fail: every later request goes to a name only the Kubernetes "
        "cluster resolves."),
    "ADVERTISED_SHARED_ADDRESS": Kind(
        "shapes", (INFO, WARNING), "Several brokers advertise one host, each with its own port (node ports)",
        "Nothing while the address is reachable, one point of failure for all of them; failing connects when it is a "
        "node's internal address or the node ports are closed."),
    "ADVERTISED_PRIVATE_ADDRESS": Kind(
        "shapes", (WARNING,),
        "An advertised address in a private, CGNAT or link-local range does not connect from here",
        "Clients bootstrap, then fail or wait for their timeouts: the address belongs to another network."),
    "ENDPOINT_WRONG_BROKER": Kind(
        "identity", (ERROR,), "Another broker answers at an advertised endpoint",
        "Requests go to the wrong node: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION."),
    "ENDPOINT_NOT_KAFKA": Kind(
        "identity", (ERROR,), "Something that does not speak Kafka answers at an advertised endpoint",
        "Clients connect, then fail or hang on their first request."),
    "ENDPOINT_IS_CONTROLLER": Kind(
        "identity", (ERROR,), "A broker advertises to clients an endpoint where a KRaft controller answers",
        "Clients connect, then fail: the controller offers no Metadata or Produce (KAFKA-16612)."),
    "ENDPOINT_NOT_ANSWERING": Kind(
        "identity", (ERROR,), "An advertised endpoint accepts connections and gives no Kafka answer",
        "TCP checks pass; clients connect, then fail or wait for their timeouts."),
    "ENDPOINT_ADVERTISES_DIFFERENTLY": Kind(
        "identity", (WARNING,), "An endpoint belongs to a listener that advertises another set",
        "Clients flip between two sets of endpoints on every metadata refresh."),
    "IDENTITY_NOT_CHECKED": Kind(
        "run", (INFO,), "Which node answers at each endpoint could not be checked",
        "Nothing; a rule that leads to the wrong broker would go unseen."),
    "REMAPPED_ENDPOINTS": Kind(
        "run", (INFO,), "Some endpoints were dialled through a --resolve or --connect-to mapping",
        "The verdict holds only where the network maps those endpoints so; other clients meet the advertised ones."),
    "RUN_INCOMPLETE": Kind(
        "run", (WARNING,), "The run stopped before some checks answered",
        "Nothing is known of those checks yet: the report cannot say they work."),
    "CLUSTER_ID_MISMATCH": Kind(
        "consistency", (ERROR,), "The bootstrap list mixes clusters",
        "A client joins whichever cluster answers first."),
    "BROKER_SET_MISMATCH": Kind(
        "consistency", (WARNING,), "Bootstraps disagree on which brokers exist",
        "Partitions led by a broker missing from a listener are unreachable through it."),
    "NO_ADVERTISED_BROKERS": Kind(
        "consistency", (ERROR,), "A bootstrap's metadata lists no broker",
        "Clients have nowhere to send anything and retry until they time out."),
    "DUPLICATE_NODE_ID": Kind(
        "consistency", (ERROR,), "One node id is listed twice with different endpoints",
        "Clients keep one of them at random and send that node's requests there."),
    "LISTENER_NOT_FOUND": Kind(
        "consistency", (ERROR, WARNING), "Partitions name brokers that lack the listener the client reached",
        "Producers and consumers of a partition whose leader lacks the listener fail (LISTENER_NOT_FOUND); "
        "a follower that lacks it makes the partition fail once it becomes leader."),
    "DUPLICATE_ENDPOINT": Kind(
        "consistency", (ERROR,), "Several brokers advertise one endpoint",
        "Only one broker answers there: the others' requests fail with NOT_LEADER_OR_FOLLOWER."),
    "DNS_VIEWS_DISAGREE": Kind(
        "dns", (WARNING,), "Two resolvers answer differently for an advertised name",
        "A fix that works from one network fails from the other."),
    "TLS_UNTRUSTED": Kind(
        "tls", (ERROR, WARNING), "A broker certificate does not verify against the trusted CAs",
        "Clients that verify certificates (the default) refuse the connection."),
    "TLS_HOSTNAME_MISMATCH": Kind(
        "tls", (ERROR, WARNING), "A broker certificate does not name the advertised host",
        "Bootstrap works; every connection to the advertised endpoint fails the handshake."),
    "TLS_EXPIRING": Kind(
        "tls", (WARNING, ERROR), "A broker certificate expires soon, or has expired",
        "After expiry every client handshake fails."),
    "TLS_HANDSHAKE_FAILED": Kind(
        "tls", (ERROR,), "The TLS handshake at an advertised endpoint fails",
        "Clients connect and fail before their first request."),
    "TLS_INGRESS_DEFAULT_CERTIFICATE": Kind(
        "tls", (ERROR,), "An ingress controller's or router's default certificate answers at an advertised endpoint",
        "The proxy has no route for the advertised name: clients fail the handshake, or reach an HTTP server."),
    "TLS_SAN_TYPE_MISMATCH": Kind(
        "tls", (ERROR, WARNING), "An advertised IP address is in the certificate only as a DNS name (or its CN)",
        "Java and librdkafka match an IP only against IP-type subjectAltName entries: every handshake fails."),
    "CONTROLLER_BOOTSTRAP_FAILED": Kind(
        "controllers", (ERROR,), "A --controllers address gave no controller list",
        "Admin tools with bootstrap.controllers cannot start from that address (no resolution, refused, timeout, "
        "authentication or authorization)."),
    "CONTROLLER_IS_BROKER": Kind(
        "controllers", (ERROR,), "A --controllers address is a broker listener, not a controller's",
        "Admin tools with bootstrap.controllers fail with MismatchedEndpointTypeException."),
    "CONTROLLER_DESCRIBE_UNSUPPORTED": Kind(
        "controllers", (ERROR,), "A controller cannot describe the controller quorum (Kafka before 3.7)",
        "Admin tools with bootstrap.controllers fail with UnsupportedVersionException; only bootstrap.servers works."),
    "CONTROLLER_ENDPOINT_UNRESOLVABLE": Kind(
        "controllers", (ERROR,), "An advertised controller endpoint does not resolve from here",
        "Admin tools bootstrap to the controllers, then fail to reach the one they need (the active controller)."),
    "CONTROLLER_ENDPOINT_UNREACHABLE": Kind(
        "controllers", (ERROR, WARNING), "An advertised controller endpoint refuses, times out or has no route",
        "Admin tools bootstrap to the controllers, then fail or wait on requests to that controller."),
    "CONTROLLER_ENDPOINT_WRONG_NODE": Kind(
        "controllers", (ERROR,), "Something other than the advertised controller answers at a controller endpoint",
        "Admin requests meant for that controller go to another node, a broker or no Kafka at all, and fail."),
    "ROUNDTRIP_DISAGREES": Kind(
        "roundtrip", (ERROR, WARNING), "--roundtrip and kprobe's verdict disagree on a broker",
        "Error: clients fail where kprobe said they would work. Warning: a real client worked where kprobe "
        "said it would fail."),
    "ROUNDTRIP_NOT_RUN": Kind(
        "roundtrip", (ERROR,), "--roundtrip was asked for and could not run",
        "Nothing was produced or read: the proof asked for is missing, and the reason is named."),
    "ROUNDTRIP_STEP_FAILED": Kind(
        "roundtrip", (ERROR,), "--roundtrip's group or transaction step failed",
        "The application's group cannot join or commit, or its transactions cannot commit, from here."),
    "ROUNDTRIP_FAILED": Kind(
        "roundtrip", (ERROR,), "A broker answered --roundtrip's produce or fetch with an error",
        "The endpoint works, the request does not: an authorization error, too few in-sync replicas."),
    # The application's view (kprobe/findings/application.py): coordinators, internal topics, the topics it names.
    "OFFSETS_TOPIC_UNCREATABLE": Kind(
        "application", (ERROR,), "__consumer_offsets does not exist and the brokers cannot create it",
        "Consumers in a group find no coordinator and read nothing (\"group coordinator is unavailable\"); producers "
        "work."),
    "OFFSETS_PARTITIONS_OFFLINE": Kind(
        "application", (ERROR,), "Partitions of __consumer_offsets have no leader",
        "Groups whose key hashes to those partitions find no coordinator and hang; other groups work."),
    "TRANSACTION_LOG_UNCREATABLE": Kind(
        "application", (WARNING, ERROR), "__transaction_state does not exist and the brokers cannot create it",
        "Transactional producers time out in initTransactions(); plain producers and consumers work."),
    "TRANSACTION_LOG_OFFLINE": Kind(
        "application", (WARNING, ERROR), "Partitions of __transaction_state have no leader",
        "Transactional ids whose key hashes to those partitions time out in initTransactions()."),
    "TRANSACTION_LOG_UNDER_MIN_ISR": Kind(
        "application", (WARNING, ERROR), "__transaction_state has (or will have) fewer in-sync replicas than its "
        "min.isr", "Transactional writes are refused (NOT_ENOUGH_REPLICAS): initTransactions() or commits fail."),
    "COORDINATOR_NOT_AVAILABLE": Kind(
        "application", (ERROR,), "No coordinator for the named group or transactional id",
        "Consumers of the group cannot join or commit; the transactional producer times out in initTransactions()."),
    "COORDINATOR_UNREACHABLE": Kind(
        "application", (ERROR,), "The coordinator of the named group or transactional id does not work from here",
        "The group cannot consume (or the transactional producer cannot start) from here, although its partition "
        "leaders may work."),
    "TOPIC_NOT_FOUND": Kind(
        "application", (ERROR,), "A topic the application names does not exist",
        "Consumers read nothing; producers fail with \"Topic not present in metadata\" unless topics are created on "
        "first use."),
    "TOPIC_NOT_AUTHORIZED": Kind(
        "application", (ERROR,), "This principal may not describe a topic the application names",
        "TOPIC_AUTHORIZATION_FAILED for that topic: no produce, no consume."),
    "TOPIC_WITHOUT_LEADER": Kind(
        "application", (ERROR,), "A topic the application names has partitions without a leader",
        "Records for those partitions can be neither produced nor consumed."),
    "TOPIC_METADATA_ERROR": Kind(
        "application", (ERROR,), "The metadata for a topic the application names came with an error",
        "Clients cannot use that topic until the error clears."),
    "GROUP_PROTOCOL_UNSUPPORTED": Kind(
        "application", (ERROR,), "The consumer's group.protocol=consumer (KIP-848) is not taken by the brokers",
        "\"The cluster does not support the new CONSUMER group protocol\": the consumer never joins."),
    "SHARE_GROUPS_UNSUPPORTED": Kind(
        "application", (ERROR,), "Share groups (KIP-932) are not enabled on the brokers",
        "A share consumer fails at its first poll."),
    "CLIENT_RACK_MATCHES_NO_BROKER": Kind(
        "application", (WARNING,), "The consumer's client.rack is no broker's rack",
        "Follower fetching does nothing: every partition is read from its leader, across zones."),
    "FOLLOWER_FETCHING_OFF": Kind(
        "application", (INFO,), "client.rack is set and the brokers' replica.selector.class ignores it",
        "Every partition is read from its leader."),
    "FOLLOWER_FETCH_UNREACHABLE": Kind(
        "application", (ERROR,), "The replica a consumer with client.rack reads from does not work from here",
        "The consumer reads nothing from those partitions, although their leaders work."),
    "CLIENT_VERSIONS_REFUSED": Kind(
        "application", (ERROR,), "The client pins request versions the brokers no longer take",
        "librdkafka with api.version.request=false and an old broker.version.fallback times out on every request "
        "the brokers removed (Kafka 4.0, KIP-896)."),
    "NO_TOPICS_VISIBLE": Kind(
        "application", (WARNING,), "A SASL principal sees no topic at all",
        "Its clients get TOPIC_AUTHORIZATION_FAILED for every topic they name."),
    # kprobe check: judged from the listener settings alone, before anything runs (kprobe/findings/check.py).
    "ADVERTISED_WILDCARD": Kind(
        "config", (ERROR,), "A listener advertises 0.0.0.0 or ::",
        "Nothing: Kafka refuses to start (advertised.listeners cannot use the nonroutable meta-address)."),
    "LISTENER_NOT_IN_PROTOCOL_MAP": Kind(
        "config", (ERROR,), "A listener is missing from listener.security.protocol.map",
        "Nothing: Kafka refuses to start (no security protocol defined for the listener)."),
    "ADVERTISED_LISTENER_UNDEFINED": Kind(
        "config", (ERROR,), "advertised.listeners names a listener that listeners does not define",
        "Nothing: Kafka refuses to start."),
    "INTER_BROKER_NOT_ADVERTISED": Kind(
        "config", (ERROR,), "The inter-broker listener is not advertised",
        "Nothing: Kafka refuses to start (brokers reach each other through that listener's advertised endpoint)."),
    "CONTROLLER_LISTENER_ADVERTISED": Kind(
        "config", (ERROR, INFO), "A broker advertises its KRaft controller listener",
        "A broker-only node: Kafka refuses to start. A combined node: the quorum's endpoint from Kafka 3.9 on "
        "(never handed to clients), refused by 3.3 to 3.8."),
    "ADVERTISED_INTERNAL_NAME": Kind(
        "config", (ERROR, WARNING),
        "A listener meant for the Docker host or the outside advertises a name only the container network or the "
        "cluster resolves",
        "Clients there bootstrap through the published port or external address, then fail to resolve the name."),
    "PUBLISHED_PORT_DIFFERS": Kind(
        "config", (ERROR,), "A listener is published on one port of the Docker host and advertised with another",
        "Clients on the host bootstrap through the published port, then dial the advertised one and fail."),
    "ADVERTISED_AT_DEPLOY": Kind(
        "config", (INFO,), "An advertised address is decided when the platform deploys (a load balancer's, a node's)",
        "Unknown until deployed: probe it then."),
    # kprobe check's internal topics, against the brokers the file runs (kprobe/findings/check_topics.py).
    "INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS": Kind(
        "config", (ERROR, WARNING),
        "An internal topic's replication factor exceeds the brokers the configuration runs",
        "__consumer_offsets: consumers in a group find no coordinator and read nothing; producers work. "
        "__transaction_state: transactional producers time out in initTransactions()."),
    "TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION": Kind(
        "config", (WARNING,),
        "transaction.state.log.min.isr exceeds the replication factor __transaction_state will be created with",
        "Transactional writes are refused (NOT_ENOUGH_REPLICAS): initTransactions() fails or times out; plain "
        "producers and consumers work."),
}


def finding(
    code: str, severity: Severity, message: str, fix: str, *, node_id: int | None = None,
    endpoint: str | None = None, bootstrap: str | None = None, endpoints: tuple[str, ...] = (),
    node_ids: tuple[int, ...] = (),
) -> Finding:
    """A Finding whose code and severity the catalogue allows; anything else is a bug in a rule.

    `endpoints` and `node_ids` list everything the finding concerns when that is more than its one
    `endpoint` and `node_id` (a finding merged over several brokers).
    """
    kind = CATALOGUE.get(code)
    if kind is None:
        raise ValueError(f"finding code {code} is not in the catalogue")
    if severity not in kind.severities:
        raise ValueError(f"{code} is never {severity} (the catalogue allows {', '.join(kind.severities)})")
    return Finding(code=code, severity=severity, message=message, fix=fix, node_id=node_id, endpoint=endpoint,
                   bootstrap=bootstrap, endpoints=endpoints, node_ids=node_ids)
