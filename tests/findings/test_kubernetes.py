"""What a name or an address says before anything is sent to it (kprobe/findings/kubernetes.py, kprobe/hostport.py).

Every name is one the operators' own documentation prints:
- Strimzi (strimzi-kafka-operator, `useServiceDnsDomain` in the API reference; the advertised.listeners examples in
  its documentation): `my-cluster-kafka-0.my-cluster-kafka-brokers.myproject.svc` and, with the service DNS domain,
  `...svc.cluster.local`; with node pools, `my-cluster-controller-3.my-cluster-kafka-brokers.myproject.svc.cluster.
  local` (its KRaft proposal's `initialControllers`); the bootstrap service `my-cluster-kafka-bootstrap`.
- Bitnami's chart (bitnami/charts, bitnami/kafka NOTES.txt): `my-release-kafka-controller-0.my-release-kafka-
  controller-headless.default.svc.cluster.local`, `...-kafka-broker-0.my-release-kafka-broker-headless...` for
  dedicated brokers, `kafka-controller-0.kafka-controller-headless...` for a release named kafka, and before KRaft
  `my-release-kafka-0.my-release-kafka-headless.udaconnect.svc.cluster.local`.
Addresses are only classified here, never dialled.
"""

from __future__ import annotations

import pytest

from kprobe.findings.kubernetes import ClusterName, cluster_name
from kprobe.hostport import address_class

NAMES = [
    # (host, operator, cluster, pool, namespace, pod, index, kubectl target)
    ("my-cluster-kafka-0.my-cluster-kafka-brokers.myproject.svc", "strimzi", "my-cluster", "kafka", "myproject",
     "my-cluster-kafka-0", 0, "pod/my-cluster-kafka-0"),
    ("my-cluster-kafka-2.my-cluster-kafka-brokers.myproject.svc.cluster.local", "strimzi", "my-cluster", "kafka",
     "myproject", "my-cluster-kafka-2", 2, "pod/my-cluster-kafka-2"),
    ("my-cluster-controller-3.my-cluster-kafka-brokers.myproject.svc.cluster.local", "strimzi", "my-cluster",
     "controller", "myproject", "my-cluster-controller-3", 3, "pod/my-cluster-controller-3"),
    ("my-cluster-pool-a-10.my-cluster-kafka-brokers.kafka.svc", "strimzi", "my-cluster", "pool-a", "kafka",
     "my-cluster-pool-a-10", 10, "pod/my-cluster-pool-a-10"),
    ("My-Cluster-Kafka-1.my-cluster-kafka-brokers.kafka.svc.", "strimzi", "my-cluster", "kafka", "kafka",
     "my-cluster-kafka-1", 1, "pod/my-cluster-kafka-1"),  # DNS is case-blind; a trailing dot is the root
    ("my-cluster-kafka-bootstrap.myproject.svc", "strimzi", "my-cluster", None, "myproject", None, None,
     "svc/my-cluster-kafka-bootstrap"),
    ("my-release-kafka-controller-0.my-release-kafka-controller-headless.default.svc.cluster.local", "bitnami",
     "my-release-kafka", "controller", "default", "my-release-kafka-controller-0", 0,
     "pod/my-release-kafka-controller-0"),
    ("my-release-kafka-broker-1.my-release-kafka-broker-headless.default.svc.cluster.local", "bitnami",
     "my-release-kafka", "broker", "default", "my-release-kafka-broker-1", 1, "pod/my-release-kafka-broker-1"),
    ("kafka-controller-2.kafka-controller-headless.default.svc.cluster.local", "bitnami", "kafka", "controller",
     "default", "kafka-controller-2", 2, "pod/kafka-controller-2"),
    ("my-release-kafka-0.my-release-kafka-headless.udaconnect.svc.cluster.local", "bitnami", "my-release-kafka", None,
     "udaconnect", "my-release-kafka-0", 0, "pod/my-release-kafka-0"),
    # Cluster-internal, operator unknown: a StatefulSet of one's own (the `-hs` headless service of Kubernetes'
    # StatefulSet tutorial), a plain service, a pod's address name.
    ("kafka-0.kafka-hs.streaming.svc.cluster.local", None, None, None, "streaming", "kafka-0", 0,
     "pod/kafka-0"),
    ("kafka.kafka.svc.cluster.local", None, None, None, "kafka", None, None, "svc/kafka"),
    ("10-244-1-7.kafka.pod.cluster.local", None, None, None, "kafka", None, None, "pod/<the pod at 10.244.1.7>"),
    # Strimzi's headless service, but a pod name that is not the cluster's: no operator claimed.
    ("debug-0.my-cluster-kafka-brokers.kafka.svc", None, None, None, "kafka", "debug-0", 0, "pod/debug-0"),
]


@pytest.mark.parametrize(("host", "operator", "cluster", "pool", "namespace", "pod", "index", "target"), NAMES,
                         ids=[n[0] for n in NAMES])
def test_cluster_internal_names(host, operator, cluster, pool, namespace, pod, index, target):
    name = cluster_name(host)
    assert isinstance(name, ClusterName)
    assert (name.operator, name.cluster, name.pool, name.namespace, name.pod, name.index, name.kubectl_target) == (
        operator, cluster, pool, namespace, pod, index, target)
    assert name.host == host


@pytest.mark.parametrize("host", [
    "ip-172-31-18-160.us-west-2.compute.internal",  # a cloud-private name: unresolvable outside, not Kubernetes
    "b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com",  # Amazon MSK
    "broker-0.kafka.apps.example.com",  # an ingress or route name: outside clients resolve it
    "api.svc.example.com",  # a public name with a `svc` label
    "kafka.svc.cluster.local.example.com",
    "node-a.k8s.internal",
    "my-cluster-kafka-0.my-cluster-kafka-brokers.kafka",  # no .svc: a search-path short name, not recognisable
    "a.b.c.d.svc",  # too many labels for any Kubernetes record
    "10.0.1.12", "::1", "localhost", "", "kafka_0.svc",
])
def test_other_names_are_not_cluster_internal(host):
    assert cluster_name(host) is None


ADDRESSES = [
    ("10.0.1.12", "private"), ("172.16.0.1", "private"), ("172.31.18.160", "private"), ("192.168.49.2", "private"),
    ("fd12:3456:789a::1", "private"),
    ("100.64.0.1", "cgnat"), ("100.127.255.254", "cgnat"),
    ("169.254.169.254", "link-local"), ("169.254.20.5", "link-local"), ("fe80::1", "link-local"),
    ("127.0.0.1", "loopback"), ("127.0.0.115", "loopback"), ("::1", "loopback"), ("[::1]", "loopback"),
    ("34.211.52.10", "public"), ("8.8.8.8", "public"), ("2001:4860:4860::8888", "public"),
    # The edges of each range, one address beyond.
    ("172.32.0.1", "public"), ("100.128.0.1", "public"), ("100.63.255.255", "public"), ("11.0.0.1", "public"),
    # Documentation, unspecified, multicast: no working set-up advertises them.
    ("192.0.2.10", "special"), ("198.51.100.7", "special"), ("0.0.0.0", "special"), ("224.0.0.1", "special"),
    ("::", "special"),
    ("::ffff:10.0.0.1", "private"),  # an IPv4-mapped address is its IPv4 address
    ("node-a.k8s.internal", None), ("", None), ("10.0.0.256", None),
]


@pytest.mark.parametrize(("text", "kind"), ADDRESSES, ids=[a[0] or "empty" for a in ADDRESSES])
def test_address_classes(text, kind):
    assert address_class(text) == kind
