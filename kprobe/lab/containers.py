"""The testcontainers lab backend: the same scenarios on the `apache/kafka` image.

For users with a Docker engine (laptops, CI runners with Docker): each node is a container on a
private Docker network, with its scenario host names as network aliases, so `kafka0` is a real
Docker name as in the seeds' set-up. Listener ports are published on the node's 127.0.0.x
address on the host, so bootstraps, advertised endpoints and DNS views are those of the native
backend. DNS views and blackholes still run on the host (`RunningLab`).

Inside a container 127.0.0.x is the container's own loopback, so what brokers use among
themselves (controller quorum, inter-broker listener) is advertised with the node's Docker
name instead; what clients see is unchanged (`container_properties`).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
import uuid
from typing import Any

from kprobe.errors import LabError
from kprobe.lab.base import RenderedNode, RunningLab, render, server_properties
from kprobe.lab.jars import KAFKA_VERSION
from kprobe.lab.scenarios import Scenario

READY_TIMEOUT = 120.0
DATA_DIR = "/tmp/kraft-combined-logs"
_LOG = logging.getLogger("kprobe.lab")


def docker_available(timeout: float = 2.0) -> bool:
    """Whether a Docker engine answers a ping now; never raises, never hangs."""
    try:
        # Imported by name: the repo's docker/ folder would shadow the SDK for type checkers.
        docker_sdk: Any = importlib.import_module("docker")
        client = docker_sdk.from_env(timeout=int(max(1, timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, no engine: all mean "not available"
        return False


def _docker_name(node: RenderedNode) -> str:
    return node.spec.hostnames[0] if node.spec.hostnames else f"kafka{node.node_id}"


def container_properties(scenario: Scenario, nodes: dict[int, RenderedNode], node_id: int) -> dict[str, str]:
    """The node's broker settings, adapted to run inside a container on a Docker network."""
    props: dict[str, str] = {}
    for line in server_properties(scenario, nodes, node_id, DATA_DIR).splitlines():
        key, _, value = line.partition("=")
        props[key] = value
    node = nodes[node_id]
    props["controller.quorum.voters"] = ",".join(
        f"{n.node_id}@{_docker_name(n)}:{n.controller_port}" for n in nodes.values()
    )
    listeners = [f"{name}://0.0.0.0:{rl.port}" for name, rl in node.listeners.items()]
    listeners.append(f"CONTROLLER://0.0.0.0:{node.controller_port}")
    props["listeners"] = ",".join(listeners)
    advertised = []
    for name, rl in node.listeners.items():
        endpoint = f"{_docker_name(node)}:{rl.port}" if rl.spec.inter_broker else rl.advertised
        advertised.append(f"{name}://{endpoint}")
    props["advertised.listeners"] = ",".join(advertised)
    return props


def environment(props: dict[str, str], cluster_id: str) -> dict[str, str]:
    """The apache/kafka image's convention: `a.b.c` is set by `KAFKA_A_B_C`."""
    env = {"KAFKA_" + key.replace(".", "_").upper(): value for key, value in props.items()}
    env["CLUSTER_ID"] = cluster_id
    env["KAFKA_HEAP_OPTS"] = "-Xmx320m -Xms64m"
    return env


class ContainerLab(RunningLab):
    """A scenario running as containers, one per node."""

    backend = "docker"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.lab_id = uuid.uuid4().hex[:12]
        self.image = os.environ.get("KPROBE_KAFKA_IMAGE", f"apache/kafka:{KAFKA_VERSION}")
        self.network: Any = None
        self.containers: dict[int, Any] = {}

    def start(self) -> ContainerLab:
        """Start every node's container and wait until each serves clients."""
        from testcontainers.core.network import Network

        from kprobe.lab.native import new_cluster_id

        if self.scenario.certificates or self.scenario.users:
            raise LabError(f"the docker lab backend does not run the {self.scenario.name} scenario (TLS keystores and "
                           "SCRAM users are made on the host): use KPROBE_LAB_BACKEND=native")
        if not docker_available():
            raise LabError("the docker lab backend needs a Docker engine: start one, or use KPROBE_LAB_BACKEND=native")
        try:
            self._start_network()
            self.nodes = render(self.scenario, self.blackholes, self.impostors)
            self.cluster_id = new_cluster_id()
            self.network = Network().create()
            for node_id in self.nodes:
                self._start_container(node_id)
            for node_id in self.nodes:
                self._wait_ready(node_id)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_container(self, node_id: int) -> None:
        from testcontainers.core.container import DockerContainer

        node = self.nodes[node_id]
        props = container_properties(self.scenario, self.nodes, node_id)
        container = DockerContainer(self.image)
        for key, value in environment(props, self.cluster_id).items():
            container.with_env(key, value)
        container.with_network(self.network).with_network_aliases(*(node.spec.hostnames or (_docker_name(node),)))
        for rl in node.listeners.values():
            # docker-py takes (host ip, host port): publish where the native backend binds.
            container.ports[f"{rl.port}/tcp"] = (rl.bind_ip, rl.port)  # type: ignore[assignment]
        container.with_kwargs(labels={"kprobe.lab": self.lab_id, "kprobe.scenario": self.scenario.name},
                              hostname=_docker_name(node))
        self.containers[node_id] = container.start()

    def _wait_ready(self, node_id: int) -> None:
        import socket

        container = self.containers[node_id]
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            logs = container.get_wrapped_container().logs().decode(errors="replace")
            if "Kafka Server started" in logs:
                try:
                    for rl in self.nodes[node_id].listeners.values():
                        socket.create_connection((rl.bind_ip, rl.port), timeout=1).close()
                    return
                except OSError:
                    pass
            time.sleep(0.5)
        tail = container.get_wrapped_container().logs().decode(errors="replace").strip().splitlines()[-1:]
        raise LabError(f"broker {node_id}'s container not ready after {READY_TIMEOUT:.0f}s: {tail}")

    def stop_node(self, node_id: int) -> None:
        """Kill one node's container (kept, so it can start again)."""
        container = self.containers.get(node_id)
        if container is not None:
            container.get_wrapped_container().kill()

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start a killed node's container again."""
        container = self.containers[node_id]
        container.get_wrapped_container().start()
        if wait:
            self._wait_ready(node_id)

    def _stop_processes(self) -> None:
        for container in self.containers.values():
            try:
                container.stop()
            except Exception:  # already gone: nothing left to stop
                _LOG.debug("container already removed", exc_info=True)
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:
                _LOG.debug("network already removed", exc_info=True)
