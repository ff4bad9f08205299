"""Record real Kafka responses for the codec's tests: `python tests/data/record_kafka.py`.

Starts the lab's `collector` broker (real Apache Kafka, KRaft, on loopback), creates a topic,
sends each request kprobe speaks, built by `kprobe.kafka.codec`, at every version kprobe may
choose, and writes the raw response frames to tests/data/kafka_responses.json with what the
lab knows independently of the decoder (advertised host and port, the topic's partitions).
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
    flexible = api_key == codec.API_METADATA and version >= 9
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


def main() -> None:
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
    out = {"kafka": KAFKA_VERSION, "node_id": 0, "advertised": [advertised_host, int(advertised_port)],
           "topic": TOPIC, "partitions": PARTITIONS, "records": records}
    (HERE / "kafka_responses.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(records)} responses from Kafka {KAFKA_VERSION}")


if __name__ == "__main__":
    main()
