"""The testcontainers lab backend: the same scenarios on the `apache/kafka` image.

For users with a Docker engine and no JDK (laptops, CI runners with Docker): each node is a
container on a private Docker network whose aliases are the node's scenario host names, so
`kafka0` is a real Docker name, as in the seeds' compose set-up. Every listener's port is
published on the node's rendered 127.0.0.x address, so bootstraps, advertised endpoints,
blackholes and DNS views (which still run on the host, in `RunningLab`) are those of the
native backend: a test cannot tell the two apart from the host.

Inside a container 127.0.0.x is the container's own loopback, not the host's, so what brokers
say to each other (the controller quorum, the inter-broker listener) uses the node's Docker
name instead; what clients are told stays as rendered (`container_properties`).

Why testcontainers rather than bare docker-py: its Ryuk reaper removes the containers and the
network if this process dies without `stop()` (the counterpart of the native backend's
PR_SET_PDEATHSIG). Each container and the network also carry the label `kprobe.lab=<lab id>`,
which `stop()` sweeps, so a failed start leaves nothing behind either.

Limits, said plainly: ports are published on this machine's loopback, so the engine must run
here (a remote DOCKER_HOST is refused); a process inside a container reaches those ports only
with host networking; Docker Desktop may publish on 127.0.0.1 only (see `ContainerLab`).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import ipaddress
import math
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from kprobe.errors import LabError
from kprobe.lab.base import RenderedNode, RunningLab, render, server_properties
from kprobe.lab.certs import CertFiles
from kprobe.lab.jars import KAFKA_VERSION
from kprobe.lab.native import HEAP_OPTS, PERFORMANCE_OPTS, new_cluster_id
from kprobe.lab.scenarios import Scenario
from kprobe.logs import logger

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

READY_TIMEOUT = 120.0
DATA_DIR = "/tmp/kraft-combined-logs"
# The image's own place for key material: it exists in the image, so copying files there
# needs no directory to be made first.
SECRETS_DIR = "/etc/kafka/secrets"
LABEL = "kprobe.lab"
STARTED = "Kafka Server started"
# Environment variables the image passes to the JVM instead of turning into properties
# (KafkaDockerWrapper's ExcludeServerPropsEnv): a property spelled like one would be lost.
_NOT_PROPERTIES = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME",
})
_LOG = logger("kprobe.lab")


# -- is there an engine? ------------------------------------------------------------------
def docker_host() -> str | None:
    """The engine address testcontainers will use (tc.host, DOCKER_HOST, docker context).

    Asking testcontainers rather than docker-py alone matters on Docker Desktop for macOS,
    whose engine is often reachable only through the current docker context.
    """
    try:
        from testcontainers.core.docker_client import get_docker_host
    except ImportError:
        return os.environ.get("DOCKER_HOST") or None
    try:
        return get_docker_host()
    except Exception:  # an unreadable context or properties file: fall back to docker-py's default
        return os.environ.get("DOCKER_HOST") or None


def docker_available(timeout: float = 2.0) -> bool:
    """Whether a Docker engine answers a ping now; never raises, never waits much past `timeout`.

    The ping runs in a daemon thread joined with a deadline, because some engine addresses
    (an ssh:// host asking for a password, a firewalled tcp:// one) can stall longer than any
    socket timeout docker-py sets.
    """
    try:
        # By name: for type checkers this repository's docker/ folder would shadow the SDK.
        docker: Any = importlib.import_module("docker")
    except ImportError:
        return False
    host = docker_host()
    answer: list[bool] = []

    def ping() -> None:
        try:
            # A stated API version, so that making the client asks the engine nothing: left to "auto",
            # docker-py first fetches /version, which Podman 4 answers only after querying the package
            # manager for its components (seconds). The ping itself is unversioned, which every engine
            # answers whatever API versions it supports.
            kwargs: dict[str, Any] = {"timeout": max(1, math.ceil(timeout)), "version": "1.41"}
            if host:
                kwargs["environment"] = {**os.environ, "DOCKER_HOST": host}
                if host.startswith("ssh://"):
                    kwargs["use_ssh_client"] = True
            client = docker.from_env(**kwargs)
            try:
                api = client.api
                answer.append(api._result(api._get(api._url("/_ping", versioned_api=False))) == "OK")
            finally:
                client.close()
        except Exception:  # no socket, no engine, refused, timed out: all mean "not available"
            answer.append(False)

    thread = threading.Thread(target=ping, name="kprobe-docker-ping", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(answer) and answer[0]


def engine_is_local(host: str | None) -> bool:
    """Whether ports the engine publishes on 127.0.0.x land on this machine's loopback."""
    if not host:
        return True
    parsed = urlparse(host)
    if "unix" in parsed.scheme or parsed.scheme in ("npipe", ""):
        return True
    name = parsed.hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# -- configuration ------------------------------------------------------------------------
def docker_name(node: RenderedNode) -> str:
    """The name other containers reach this node by: its first scenario host name."""
    return node.spec.hostnames[0] if node.spec.hostnames else f"kafka{node.node_id}"


def container_properties(
    scenario: Scenario,
    nodes: dict[int, RenderedNode],
    node_id: int,
    certs: dict[str, CertFiles] | None = None,
    passwords: dict[str, str] | None = None,
) -> dict[str, str]:
    """The node's broker settings (`server_properties`), adapted to run inside a container.

    - every listener, the controller's too, binds 0.0.0.0 on its rendered port: Docker forwards
      the published host address to the container's own interface, not to a 127.0.0.x one;
    - the controller quorum and the inter-broker listener use the nodes' Docker names, since a
      127.0.0.x address inside a container is that container's own loopback;
    - the controller listener is advertised with the Docker name too: left out, Kafka would
      derive it from `listeners` and refuse the non-routable 0.0.0.0;
    - client listeners keep their rendered advertised endpoints: the scenario's subject;
    - keystores and truststores are read where `ContainerLab` copies them, under SECRETS_DIR.
    """
    props: dict[str, str] = {}
    for line in server_properties(scenario, nodes, node_id, DATA_DIR, certs, passwords).splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    node = nodes[node_id]
    own = docker_name(node)
    props["controller.quorum.voters"] = ",".join(
        f"{n.node_id}@{docker_name(n)}:{n.controller_port}" for n in nodes.values()
    )
    listeners = [f"{name}://0.0.0.0:{rl.port}" for name, rl in node.listeners.items()]
    listeners.append(f"CONTROLLER://0.0.0.0:{node.controller_port}")
    props["listeners"] = ",".join(listeners)
    advertised = [
        f"{name}://{own}:{rl.port}" if rl.spec.inter_broker else f"{name}://{rl.advertised}"
        for name, rl in node.listeners.items()
    ]
    advertised.append(f"CONTROLLER://{own}:{node.controller_port}")
    props["advertised.listeners"] = ",".join(advertised)
    for key, value in props.items():
        if key.endswith(("ssl.keystore.location", "ssl.truststore.location")):
            props[key] = f"{SECRETS_DIR}/{Path(value).name}"
    return props


def property_name(env: str) -> str:
    """The property the apache/kafka image makes of a `KAFKA_*` variable (KafkaDockerWrapper)."""
    return (env.replace("KAFKA_", "", 1).lower()
            .replace("_", ".").replace("...", "-").replace("..", "_"))


def env_name(key: str) -> str:
    """The `KAFKA_*` variable for property `key` (`a.b_c-d` -> `KAFKA_A_B__C___D`).

    Raises ValueError for a key the image would decode into something else, rather than let a
    broker start with a setting silently renamed.
    """
    name = "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()
    if property_name(name) != key or name in _NOT_PROPERTIES:
        raise ValueError(f"property {key!r} cannot be passed to the apache/kafka image as an environment variable")
    return name


def environment(props: dict[str, str], cluster_id: str, lab_id: str = "") -> dict[str, str]:
    """The container's environment: properties as `KAFKA_*`, the cluster id, the native lab's JVM options.

    CLUSTER_ID makes the image format the storage (and accept it as formatted on a restart).
    KAFKA_OPTS carries the lab marker, as `-Dkprobe.lab` does for native JVMs, and is set even
    when empty of meaning because the image's configure script exits when a SASL listener is
    advertised and KAFKA_OPTS is unset (our JAAS settings are per-listener properties instead).
    """
    env = {env_name(key): value for key, value in props.items()}
    env["CLUSTER_ID"] = cluster_id
    env["KAFKA_HEAP_OPTS"] = " ".join(HEAP_OPTS)
    env["KAFKA_JVM_PERFORMANCE_OPTS"] = " ".join(PERFORMANCE_OPTS)  # the image's format and broker JVMs alike
    env["KAFKA_OPTS"] = f"-D{LABEL}={lab_id or 'unknown'}"
    return env


def port_bindings(node: RenderedNode, publish_ip: str | None = None) -> dict[str, tuple[str, int]]:
    """docker-py `ports`: each listener's container port published at `<bind ip>:<port>`.

    The controller port is not published: only the other containers use it.
    """
    return {f"{rl.port}/tcp": (publish_ip or rl.bind_ip, rl.port) for rl in node.listeners.values()}


def address_unavailable(exc: BaseException) -> bool:
    """Whether Docker refused to publish because the host address does not exist for it.

    Docker Desktop (macOS) binds published ports in its own host process, which may have only
    127.0.0.1: it answers "can't assign requested address". "address already in use" is a
    port conflict, not this, and must not be papered over.
    """
    return "assign requested address" in str(exc).lower()


def _last_line(logs: str) -> str:
    lines = [ln.strip() for ln in logs.splitlines() if ln.strip()]
    if not lines:
        return "no output"
    last = lines[-1][:300]
    errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
    if errors and errors[-1] != lines[-1]:
        return f"{last} (last error: {errors[-1][:300]})"
    return last


# -- the backend ----------------------------------------------------------------------------
class ContainerLab(RunningLab):
    """A scenario running as `apache/kafka` containers, one per node.

    If Docker cannot publish on a node's 127.0.0.x address (Docker Desktop for macOS without
    loopback aliases it can use), the lab publishes on 127.0.0.1 instead and warns: the
    listeners then answer on 127.0.0.1:<port> (`real_endpoint` says so) while bootstraps and
    advertised endpoints naming 127.0.0.x do not connect, so it is not the native lab's twin.
    """

    backend = "docker"

    def __init__(self, scenario: Scenario, image: str | None = None) -> None:
        super().__init__(scenario)
        self.lab_id = uuid.uuid4().hex[:12]
        self.image = image or os.environ.get("KPROBE_KAFKA_IMAGE") or f"apache/kafka:{KAFKA_VERSION}"
        self.network: Network | None = None
        self.containers: dict[int, DockerContainer] = {}
        self.workdir: Path | None = None
        self.publish_ip: str | None = None
        self._used_docker = False

    # -- start ----------------------------------------------------------------------------
    def start(self) -> ContainerLab:
        """Start every node's container and wait until each serves clients on the host."""
        try:
            try:
                self._check_engine()
                self._start_host_side()
                self.cluster_id = new_cluster_id()
                self._start_containers()
                self._wait_ready(list(self.nodes))
                self._add_scram_users()
                self._create_topics()
            except LabError:
                raise
            except Exception as exc:
                if type(exc).__module__.split(".")[0] not in ("docker", "testcontainers", "requests"):
                    raise
                lines = str(exc).strip().splitlines() or [type(exc).__name__]
                raise LabError(f"Docker failed while starting the {self.scenario.name} lab "
                               f"(image {self.image}): {lines[-1][:300]}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def _check_engine(self) -> None:
        if any(node.role != "combined" for node in self.scenario.nodes):
            # The container settings wire one combined quorum through Docker names; a separate
            # quorum with its own advertised controller endpoints is the native backend's only.
            raise LabError(f"scenario {self.scenario.name} runs a separate KRaft controller quorum, which only the "
                           "native backend starts: use KPROBE_LAB_BACKEND=native")
        try:
            import testcontainers  # noqa: F401
        except ImportError:
            raise LabError("the docker lab backend needs testcontainers: pip install 'kprobe[docker]', "
                           "or use KPROBE_LAB_BACKEND=native") from None
        if not docker_available():
            raise LabError("the docker lab backend needs a Docker engine and none answers (is Docker running? "
                           "DOCKER_HOST?): start one, or use KPROBE_LAB_BACKEND=native")
        host = docker_host()
        if not engine_is_local(host):
            raise LabError(f"the docker lab publishes ports on this machine's loopback, but DOCKER_HOST={host} is a "
                           "remote engine whose ports this machine cannot reach: use KPROBE_LAB_BACKEND=native")
        from testcontainers.core.utils import inside_container

        if inside_container():
            warnings.warn("kprobe runs inside a container: Docker publishes the lab's ports on the Docker host's "
                          "loopback, which this container reaches only with host networking",
                          RuntimeWarning, stacklevel=3)

    def _start_host_side(self) -> None:
        """DNS views, blackholes, impostors, ports and certificates: on the host, as natively."""
        if self.scenario.idp is not None:
            # Its JWKS is served on this machine's 127.0.0.x, which is a container's own loopback inside it.
            raise LabError(f"the {self.scenario.name} scenario's brokers fetch keys from the lab's OAuth server on "
                           "this machine's loopback, which a container cannot reach: use KPROBE_LAB_BACKEND=native")
        try:
            self._start_network()
            self.nodes = render(self.scenario, self.blackholes, self.impostors, self.proxy_ports,
                                self.forward_ports, self.port_claims)
            self._start_shadows()
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL:
                raise
            raise LabError(f"the lab needs this machine's 127.0.0.x loopback addresses ({exc.strerror}); on macOS "
                           "add them, e.g. `sudo ifconfig lo0 alias 127.0.0.11 up`") from exc
        if self.scenario.certificates or self.scenario.forwards:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"kprobe-lab-{self.scenario.name}-"))
            self._make_certs(self.workdir / "tls")
            self._start_proxies(self.workdir / "proxies", self.lab_id)  # on the host, routing to published ports
            self._start_forwards(self.workdir / "forwards", self.lab_id)  # likewise: kube-proxy on the host

    def _labels(self, node_id: int | None = None) -> dict[str, str]:
        labels = {LABEL: self.lab_id, "kprobe.scenario": self.scenario.name}
        if node_id is not None:
            labels["kprobe.node"] = str(node_id)
        return labels

    def _start_containers(self) -> None:
        from testcontainers.core.network import Network

        self._used_docker = True
        self.network = Network(docker_network_kw={"labels": self._labels()}).create()
        for node_id in self.nodes:
            self._start_container(node_id)

    def _container(self, node_id: int) -> DockerContainer:
        from testcontainers.core.container import DockerContainer

        node = self.nodes[node_id]
        props = container_properties(self.scenario, self.nodes, node_id, self.certs, self.passwords)
        container = DockerContainer(self.image, name=f"kprobe-{self.lab_id}-{node_id}")
        container.with_envs(**environment(props, self.cluster_id, self.lab_id))
        assert self.network is not None
        container.with_network(self.network)
        container.with_network_aliases(*(node.spec.hostnames or (docker_name(node),)))
        # with_bind_ports takes no host address; docker-py's ports mapping does: (ip, port).
        published: dict[str, Any] = container.ports
        published.update(port_bindings(node, self.publish_ip))
        for files in self.certs.values():
            container.with_copy_into_container(files.keystore, f"{SECRETS_DIR}/{files.keystore.name}", 0o644)
            container.with_copy_into_container(files.ca, f"{SECRETS_DIR}/{files.ca.name}", 0o644)  # truststores
        container.with_kwargs(labels=self._labels(node_id))
        return container

    def _start_container(self, node_id: int) -> None:
        container = self._container(node_id)
        self.containers[node_id] = container  # before start: stop() must find it if start fails midway
        try:
            container.start()
        except Exception as exc:
            if self.publish_ip is not None or not address_unavailable(exc):
                raise
            self._remove(container)
            self._publish_on_localhost(node_id, exc)
            container = self._container(node_id)
            self.containers[node_id] = container
            container.start()

    def _publish_on_localhost(self, node_id: int, exc: BaseException) -> None:
        node = self.nodes[node_id]
        addresses = sorted({rl.bind_ip for rl in node.listeners.values()} - {"127.0.0.1"})
        self.publish_ip = "127.0.0.1"
        for later in list(self.nodes)[list(self.nodes).index(node_id):]:
            for rl in self.nodes[later].listeners.values():
                rl.bind_ip = self.publish_ip
        warnings.warn(
            f"Docker cannot publish ports on {', '.join(addresses)} ({str(exc).strip()[-120:]}); as on Docker "
            "Desktop for macOS, the lab publishes them on 127.0.0.1 instead. Listeners answer on 127.0.0.1:<port>, "
            "but bootstraps and advertised endpoints naming 127.0.0.x addresses will not connect from this host: "
            "this lab does not behave like the native one (use KPROBE_LAB_BACKEND=native for that)",
            RuntimeWarning, stacklevel=4,
        )

    # -- readiness ------------------------------------------------------------------------
    def _logs(self, node_id: int) -> tuple[str, str, int]:
        """(status, logs, exit code) of a node's container, fresh from the engine."""
        wrapped = self.containers[node_id].get_wrapped_container()
        wrapped.reload()
        state = wrapped.attrs.get("State", {})
        logs = wrapped.logs().decode(errors="replace")
        return str(wrapped.status), logs, int(state.get("ExitCode") or 0)

    def _refusing(self, node_id: int) -> str | None:
        """The first published listener that does not accept a TCP connection, if any."""
        for rl in self.nodes[node_id].listeners.values():
            try:
                with socket.create_connection((rl.bind_ip, rl.port), timeout=1):
                    pass
            except OSError:
                return f"{rl.bind_ip}:{rl.port}"
        return None

    def _wait_ready(self, node_ids: list[int], seen: dict[int, int] | None = None) -> None:
        """Wait until each broker logs STARTED (once more than `seen`) and its ports accept TCP.

        Counting matters on a restart: the container's log still holds the previous start's line.
        The log line matters because Docker's port proxy accepts connections before Kafka listens.
        """
        seen = seen or {}
        deadline = time.monotonic() + READY_TIMEOUT
        pending = set(node_ids)
        refusing: dict[int, str] = {}
        logs: dict[int, str] = {}
        while pending:
            for node_id in sorted(pending):
                status, logs[node_id], code = self._logs(node_id)
                if status in ("exited", "dead"):
                    raise LabError(f"broker {node_id}'s container exited with {code}: {_last_line(logs[node_id])}")
                if logs[node_id].count(STARTED) <= seen.get(node_id, 0):
                    continue
                endpoint = self._refusing(node_id)
                if endpoint is None:
                    pending.discard(node_id)
                else:
                    refusing[node_id] = endpoint
            if pending and time.monotonic() > deadline:
                first = min(pending)
                if first in refusing:
                    why = (f"broker {first} logged '{STARTED}' but {refusing[first]} does not accept connections "
                           "from this host (does the engine publish ports on this machine?)")
                else:
                    why = f"broker {first}'s last log line: {_last_line(logs.get(first, ''))}"
                raise LabError(f"brokers {sorted(pending)} not ready after {READY_TIMEOUT:.0f}s: {why}")
            if pending:
                time.sleep(0.5)

    def _add_scram_users(self) -> None:
        """Create the scenario's SCRAM users once the cluster runs.

        The native lab adds them when formatting storage; the image formats storage itself and
        has no way to pass `--add-scram`, so they are added through the admin API instead, from
        inside a container, over a PLAINTEXT listener (reachable there by its Docker name).
        """
        for node_id, node in self.nodes.items():
            mechanisms = sorted({rl.spec.mechanism for rl in node.listeners.values()
                                 if rl.spec.mechanism and rl.spec.mechanism.startswith("SCRAM-")})
            if not mechanisms or not self.passwords:
                continue
            plain = next((rl for rl in node.listeners.values() if rl.spec.protocol == "PLAINTEXT"), None)
            if plain is None:
                raise LabError(f"broker {node_id} has SCRAM listeners but no PLAINTEXT one to create users through")
            bootstrap = f"{docker_name(node)}:{plain.port}"
            for user, password in self.passwords.items():
                config = ",".join(f"{mech}=[iterations=4096,password={password}]" for mech in mechanisms)
                self._kafka_configs(node_id, ["--bootstrap-server", bootstrap, "--alter", "--add-config", config,
                                              "--entity-type", "users", "--entity-name", user], password)
                deadline = time.monotonic() + 30
                while True:  # the broker serves the credential once its metadata has it
                    out = self._kafka_configs(node_id, ["--bootstrap-server", bootstrap, "--describe",
                                                        "--entity-type", "users", "--entity-name", user], password)
                    if all(mech in out for mech in mechanisms):
                        break
                    if time.monotonic() > deadline:
                        raise LabError(f"SCRAM user {user} not visible on broker {node_id} after 30s: {out[-200:]}")
                    time.sleep(0.5)
            return  # credentials are cluster-wide: once is enough

    def _create_topics(self, timeout: float = 30.0) -> None:
        """The scenario's topics, made with `kafka-topics.sh` inside a container over a PLAINTEXT listener.

        As the SCRAM users are: the listener is reachable there by its Docker name, whatever the host can reach.
        """
        listener = self._topic_listener()
        if not self.scenario.topics or listener is None:
            super()._create_topics(timeout)  # nothing to make, or the error that says why not
            return
        node = next(n for n in self.nodes.values() if listener in n.listeners.values())
        for name, partitions in self.scenario.topics.items():
            result = self.containers[node.node_id].exec([
                "/opt/kafka/bin/kafka-topics.sh", "--bootstrap-server", f"{docker_name(node)}:{listener.port}",
                "--create", "--if-not-exists", "--topic", name, "--partitions", str(partitions),
                "--replication-factor", str(self.replication)])
            if result.exit_code != 0:
                raise LabError(f"kafka-topics in broker {node.node_id}'s container failed: "
                               f"{_last_line(result.output.decode(errors='replace'))}")

    def _kafka_configs(self, node_id: int, args: list[str], secret: str) -> str:
        result = self.containers[node_id].exec(["/opt/kafka/bin/kafka-configs.sh", *args])
        out = result.output.decode(errors="replace").replace(secret, "***")
        if result.exit_code != 0:
            raise LabError(f"kafka-configs in broker {node_id}'s container failed: {_last_line(out)}")
        return out

    # -- stop -----------------------------------------------------------------------------
    def stop_node(self, node_id: int) -> None:
        """Kill one broker's container, as a crash would: its published ports then refuse.

        The container is kept (with its storage) so `start_node` can start it again.
        """
        container = self.containers.get(node_id)
        if container is None:
            return
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("running", "restarting", "paused"):
            wrapped.kill()
            wrapped.wait(timeout=30)

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start a stopped broker's container again: same ports, names and storage."""
        wrapped = self.containers[node_id].get_wrapped_container()
        wrapped.reload()
        if wrapped.status == "running":
            return
        seen = {node_id: wrapped.logs().decode(errors="replace").count(STARTED)}
        wrapped.start()
        if wait:
            self._wait_ready([node_id], seen)

    def _remove(self, container: DockerContainer) -> None:
        try:
            container.stop()  # testcontainers' stop removes the container and its volumes
        except Exception:  # never created, or already gone
            _LOG.debug("container already removed", exc_info=True)

    def _stop_processes(self) -> None:
        for container in self.containers.values():
            self._remove(container)
        if self._used_docker:
            self._sweep()
        if self.workdir is not None and not os.environ.get("KPROBE_LAB_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove whatever still carries this lab's label: containers first, then the network."""
        try:
            from testcontainers.core.docker_client import DockerClient

            client = DockerClient().client
        except Exception:
            _LOG.debug("no Docker client to sweep the lab's leftovers", exc_info=True)
            return
        selector = {"label": f"{LABEL}={self.lab_id}"}
        try:
            for leftover in client.containers.list(all=True, filters=selector):
                with contextlib.suppress(Exception):
                    leftover.remove(force=True, v=True)
            for net in client.networks.list(filters=selector):
                with contextlib.suppress(Exception):
                    net.remove()
        except Exception:
            _LOG.debug("sweeping the lab's leftovers failed", exc_info=True)
        finally:
            client.close()

    def describe(self) -> list[str]:
        """The native description, plus where the containers come from."""
        lines = super().describe()
        network = self.network.name if self.network is not None else "none"
        lines.insert(2, f"image {self.image}, Docker network {network}, containers labelled {LABEL}={self.lab_id}")
        if self.publish_ip:
            lines.insert(3, f"ports published on {self.publish_ip} only: 127.0.0.x endpoints do not connect")
        return lines
