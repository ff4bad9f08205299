"""Record real Kafka responses for the codec's tests: `python tests/data/record_kafka.py`.

Starts the lab's `collector` broker (real Apache Kafka, KRaft, on loopback), creates a topic,
sends each request kprobe speaks, built by `kprobe.kafka.codec`, at every version kprobe may
choose, and writes the raw response frames to tests/data/kafka_responses.json with what the
lab knows independently of the decoder (advertised host and port, the topic's partitions). The
`controllers` lab (brokers beside a separate KRaft controller) gives DescribeCluster's answers;
`python tests/data/record_kafka.py controllers` records those alone.
The codec tests then decode recorded bytes with no broker running. Rerun after a Kafka upgrade.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from kprobe.kafka import codec  # noqa: E402
from kprobe.lab import start_lab  # noqa: E402
from kprobe.lab.jars import KAFKA_VERSION  # noqa: E402

TOPIC, PARTITIONS = "orders", 3


def exchange(sock: socket.socket, api_key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    flexible = codec.is_flexible(api_key, version)
    frame = codec.request_header(api_key, version, correlation_id, "kprobe-recorder", flexible) + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise SystemExit("the broker closed the connection: a request the codec built was refused")
        data += chunk
    return data


def record_controllers() -> tuple[dict[str, object], list[dict[str, object]]]:
    """DescribeCluster at every version from a broker and from a KRaft controller (the `controllers` lab).

    The lab's configuration says what each answer must hold: the controller's advertised endpoint
    and id, the brokers' endpoints. A broker asked about controllers, and a controller asked about
    brokers, answer with an error: recorded too.
    """
    broker_requests = [
        (codec.API_DESCRIBE_CLUSTER, 0, codec.encode_describe_cluster(0, codec.ENDPOINT_TYPE_BROKERS),
         "describe_cluster_v0_brokers"),
        *((codec.API_DESCRIBE_CLUSTER, v, codec.encode_describe_cluster(v, codec.ENDPOINT_TYPE_BROKERS),
           f"describe_cluster_v{v}_brokers") for v in (1, 2)),
        (codec.API_DESCRIBE_CLUSTER, 1, codec.encode_describe_cluster(1, codec.ENDPOINT_TYPE_CONTROLLERS),
         "describe_cluster_v1_broker_asked_for_controllers"),
    ]
    controller_requests = [
        (codec.API_API_VERSIONS, 0, b"", "controller_api_versions"),
        *((codec.API_DESCRIBE_CLUSTER, v, codec.encode_describe_cluster(v, codec.ENDPOINT_TYPE_CONTROLLERS),
           f"describe_cluster_v{v}_controllers") for v in (1, 2)),
        (codec.API_DESCRIBE_CLUSTER, 2, codec.encode_describe_cluster(2, codec.ENDPOINT_TYPE_BROKERS),
         "describe_cluster_v2_controller_asked_for_brokers"),
        (codec.API_DESCRIBE_CONFIGS, 1, codec.encode_describe_broker(0, ("node.id",)), "controller_describe_other"),
    ]
    records: list[dict[str, object]] = []
    with start_lab("controllers") as lab:
        controller = next(n for n in lab.nodes.values() if n.spec.role == "controller")
        host, port = controller.controller_advertised.rsplit(":", 1)
        brokers = [[n.node_id, *lab.bootstrap("CLIENT", n.node_id).rsplit(":", 1)] for n in lab.nodes.values()
                   if n.spec.role == "broker"]
        facts: dict[str, object] = {"controller": [controller.node_id, host, int(port)],
                                    "brokers": [[i, h, int(p)] for i, h, p in brokers]}
        for target, requests in ((lab.real_endpoint("CLIENT"), broker_requests),
                                 (controller.controller_endpoint, controller_requests)):
            address, target_port = target.rsplit(":", 1)
            with socket.create_connection((address, int(target_port)), timeout=10) as sock:
                for correlation_id, (api_key, version, body, name) in enumerate(requests, 1):
                    frame = exchange(sock, api_key, version, body, correlation_id)
                    records.append({"name": name, "api_key": api_key, "version": version, "lab": "controllers",
                                    "correlation_id": correlation_id, "response": frame.hex()})
    return facts, records


def main() -> None:
    if sys.argv[1:] == ["controllers"]:
        # Only the controllers lab's answers, the rest kept as recorded.
        path = HERE / "kafka_responses.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        facts, records = record_controllers()
        data["controllers"] = facts
        data["records"] = [r for r in data["records"] if r.get("lab") != "controllers"] + records
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"recorded {len(records)} controller-lab responses from Kafka {KAFKA_VERSION}")
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    records = []
    with start_lab("collector") as lab:
        admin = AdminClient({"bootstrap.servers": lab.bootstrap("CLIENT")})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        del admin
        host, port = lab.real_endpoint("CLIENT").rsplit(":", 1)
        advertised_host, advertised_port = lab.bootstrap("CLIENT").rsplit(":", 1)
        requests = [(codec.API_API_VERSIONS, 0, b"", "api_versions")]
        requests += [(codec.API_METADATA, v, codec.encode_metadata_request(v, None), f"metadata_v{v}")
                     for v in (4, 7, 8, 9, 10, 12)]
        requests += [(codec.API_METADATA, 12, codec.encode_metadata_request(12, []), "metadata_v12_brokers_only")]
        requests += [(codec.API_DESCRIBE_CONFIGS, 1, codec.encode_describe_broker(0, ("node.id",)), "describe_self"),
                     (codec.API_DESCRIBE_CONFIGS, 1, codec.encode_describe_broker(7, ("node.id",)), "describe_other")]
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            for correlation_id, (api_key, version, body, name) in enumerate(requests, 1):
                frame = exchange(sock, api_key, version, body, correlation_id)
                records.append({"name": name, "api_key": api_key, "version": version,
                                "correlation_id": correlation_id, "response": frame.hex()})
    facts, controller_records = record_controllers()
    out = {"kafka": KAFKA_VERSION, "node_id": 0, "advertised": [advertised_host, int(advertised_port)],
           "topic": TOPIC, "partitions": PARTITIONS, "records": records + controller_records, "controllers": facts}
    (HERE / "kafka_responses.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(records)} responses from Kafka {KAFKA_VERSION}")


if __name__ == "__main__":
    main()
