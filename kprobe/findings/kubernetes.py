"""What a Kubernetes cluster-internal name says: namespace, service, pod, and the operator that made it.

Pure text rules, no DNS. Why a module of its own: a broker that advertises
`my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc` tells a client outside the cluster more than
"this does not resolve": the name only resolves through the cluster's DNS, it is pod 0 of Strimzi's
cluster `my-cluster` in namespace `kafka`, and the fix is a Strimzi listener setting, not a line of
server.properties that the operator would overwrite. The findings read these facts to name the right
`kubectl port-forward` target and the operator's own settings.

The shapes recognised are the ones the operators document:
- Strimzi: `<cluster>-kafka-<n>.<cluster>-kafka-brokers.<ns>.svc` (`.svc.cluster.local` with the
  listener's `useServiceDnsDomain: true`), and with node pools `<cluster>-<pool>-<n>.<cluster>-kafka-brokers...`;
  the bootstrap service `<cluster>-kafka-bootstrap.<ns>.svc`.
- Bitnami's chart: `<fullname>-controller-<n>.<fullname>-controller-headless.<ns>.svc.cluster.local` and
  `<fullname>-broker-<n>.<fullname>-broker-headless...` (KRaft, chart 26 and later; `<fullname>` is
  `<release>-kafka`, or the release alone when it contains "kafka"), and before them
  `<fullname>-<n>.<fullname>-headless.<ns>.svc.cluster.local`.
- Any other `<pod>.<service>.<ns>.svc[.cluster.local]`, `<service>.<ns>.svc[.cluster.local]` or
  `<a-b-c-d>.<ns>.pod.cluster.local`: cluster-internal, operator unknown.
"""

from __future__ import annotations

import re
from typing import Literal

from kprobe.findings.common import maybe_cluster_name
from kprobe.records import record

Operator = Literal["strimzi", "bitnami"]

# A DNS label as Kubernetes names objects (RFC 1123): lower case, digits and inner hyphens.
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_INDEXED = re.compile(r"^(?P<base>.+)-(?P<index>\d+)$")


@record(kw_only=True)
class ClusterName:
    """A name only a Kubernetes cluster's DNS resolves, and what it says.

    `pod` is set for a pod's own name under a headless service (what brokers advertise); `service` is
    the service the name belongs to (None for a `.pod.` name); `cluster` is Strimzi's cluster name or
    Bitnami's fullname; `pool` is Strimzi's node pool (`kafka` without node pools) or Bitnami's role
    (`controller`, `broker`, or None for the pre-KRaft chart); `index` is the pod's ordinal.
    """

    host: str
    namespace: str
    service: str | None = None
    pod: str | None = None
    operator: Operator | None = None
    cluster: str | None = None
    pool: str | None = None
    index: int | None = None

    @property
    def kubectl_target(self) -> str:
        """What `kubectl port-forward` takes for this name: the pod, else the service."""
        if self.pod:
            return f"pod/{self.pod}"
        if self.service:
            return f"svc/{self.service}"
        return "pod/<the pod at " + self.host.split(".", 1)[0].replace("-", ".") + ">"


def cluster_name(host: str) -> ClusterName | None:
    """The facts of a cluster-internal name, or None when `host` is not one (an address, a public name).

    Only the documented suffixes count (`.svc`, `.svc.cluster.local`, `.pod.cluster.local`): a
    custom cluster domain is unknowable from the name, and a public name with a `svc` label must not
    be taken for one.
    """
    if not maybe_cluster_name(host):  # the callers' cheap test, so it can never disagree with this one
        return None
    labels = host.lower().rstrip(".").split(".")
    if not all(_LABEL.match(label) for label in labels):
        return None
    if labels[-3:] == ["pod", "cluster", "local"] and len(labels) == 5:
        return ClusterName(host=host, namespace=labels[1])
    if labels[-3:] == ["svc", "cluster", "local"]:
        inner = labels[:-3]
    elif labels[-1] == "svc":
        inner = labels[:-1]
    else:
        return None
    if len(inner) == 2:
        service, namespace = inner
        return _service_name(host, service, namespace)
    if len(inner) == 3:
        pod, service, namespace = inner
        return _pod_name(host, pod, service, namespace)
    return None


def _service_name(host: str, service: str, namespace: str) -> ClusterName:
    """`<service>.<ns>.svc`: Strimzi's bootstrap service is recognisable; others are just services."""
    if service.endswith("-kafka-bootstrap"):
        return ClusterName(host=host, namespace=namespace, service=service, operator="strimzi",
                           cluster=service.removesuffix("-kafka-bootstrap"))
    return ClusterName(host=host, namespace=namespace, service=service)


def _pod_name(host: str, pod: str, service: str, namespace: str) -> ClusterName:
    """`<pod>.<headless service>.<ns>.svc`: the operator from how the two names relate."""
    indexed = _INDEXED.match(pod)
    index = int(indexed.group("index")) if indexed else None
    base = indexed.group("base") if indexed else pod
    plain = ClusterName(host=host, namespace=namespace, service=service, pod=pod, index=index)
    if service.endswith("-kafka-brokers"):
        cluster = service.removesuffix("-kafka-brokers")
        if indexed and base.startswith(cluster + "-") and len(base) > len(cluster) + 1:
            # `<cluster>-kafka-<n>` without node pools; `<cluster>-<pool>-<n>` with them.
            return ClusterName(host=host, namespace=namespace, service=service, pod=pod, operator="strimzi",
                               cluster=cluster, pool=base[len(cluster) + 1:], index=index)
        return plain
    if service.endswith("-headless") and indexed and base == service.removesuffix("-headless"):
        for role in ("controller", "broker"):
            if base.endswith("-" + role):
                return ClusterName(host=host, namespace=namespace, service=service, pod=pod, operator="bitnami",
                                   cluster=base.removesuffix("-" + role), pool=role, index=index)
        if "kafka" in base:  # the chart before KRaft: `<fullname>-<n>.<fullname>-headless`
            return ClusterName(host=host, namespace=namespace, service=service, pod=pod, operator="bitnami",
                               cluster=base, index=index)
    return plain
