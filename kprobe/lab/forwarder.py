"""TCP forwards in front of the brokers, as `kubectl port-forward` and Kubernetes node ports put them.

A port-forward is a relay on the user's loopback to one pod; a NodePort service is a port on a node's
address that kube-proxy relays to one pod. Either way the client dials one address and port, and bytes
arrive at a broker listening elsewhere, while the broker keeps advertising its own name. The lab stages
both with real relays, so a probe meets exactly what a client meets: a bootstrap that answers through the
relay, and advertised names that the relay does nothing for.

Why HAProxy in TCP mode rather than a Python relay: the lab already runs it for the SNI ingress (Debian's
`haproxy`, kprobe.lab.helpers starts, stops and counts it), it relays every connection for as long as
both ends keep it, and a relay the author of the probe wrote would prove only that the two agree. One
HAProxy serves all of a scenario's forwards. Their ports are bound by the lab first and handed over
(`bind fd@N`), so the ports chosen are the ones served whatever else starts meanwhile; a small HTTP
frontend on a socket of its own answers only once HAProxy runs, which is how the lab knows it is ready
(the handed-over ports accept connections before it does).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kprobe.errors import LabError
from kprobe.lab.helpers import HelperCommand, HelperProcess, listening_socket
from kprobe.records import record


@record
class ForwardSpec:
    """One forward: `address` and the port it prefers (0: any free one), relaying to `targets`.

    `targets` are `{ep[NODE][LISTENER]}` templates; several make a Service in front of several pods (a
    bootstrap node port): HAProxy's `balance first` sends every connection to the first, so a lab run
    always bootstraps at the same broker. `note` says what the forward stands for (`kubectl port-forward
    ... pod/NAME 9092:9092`), for `kprobe lab up`.
    """

    address: str
    targets: tuple[str, ...]
    port: int = 0
    note: str = ""


class Forwarders:
    """A scenario's forwards: ports reserved first (the listeners' templates name them), then one HAProxy."""

    def __init__(self, specs: Mapping[str, ForwardSpec]) -> None:
        self.specs = dict(specs)
        self.ports: dict[str, int] = {}
        self.backends: dict[str, tuple[str, ...]] = {}
        self.process: HelperProcess | None = None
        self._sockets: dict[str, socket.socket] = {}
        self._ready: socket.socket | None = None

    def reserve_ports(self) -> dict[str, int]:
        """Bind every forward's port (the preferred one where free) and hold it; returns name -> port."""
        for name, spec in self.specs.items():
            sock = listening_socket(spec.address, spec.port)
            self._sockets[name] = sock
            self.ports[name] = int(sock.getsockname()[1])
        if self.specs:
            self._ready = listening_socket(next(iter(self.specs.values())).address)
        return dict(self.ports)

    def endpoint(self, name: str) -> str:
        """`address:port` where forward `name` listens."""
        return f"{self.specs[name].address}:{self.ports[name]}"

    def start(self, endpoints: Mapping[int, Mapping[str, str]], directory: Path, lab_id: str) -> None:
        """Render the targets against the brokers' real endpoints and run HAProxy until `stop()`."""
        if not self.specs:
            return
        values: dict[str, Any] = {"ep": endpoints}
        try:
            self.backends = {name: tuple(t.format(**values) for t in spec.targets) for name, spec in self.specs.items()}
        except (KeyError, IndexError) as exc:
            raise LabError(f"a forward names an endpoint the scenario does not have ({exc})") from None
        assert self._ready is not None
        fds = {name: sock.fileno() for name, sock in self._sockets.items()}
        ready_fd = self._ready.fileno()
        address, ready_port = self._ready.getsockname()[:2]
        command = HelperCommand(
            name="forwards", program="haproxy", package="haproxy", args=("-f", "{config}", "-db"),
            config=haproxy_config(fds, self.backends, ready_fd), ready=_answers_http(address, ready_port),
            pass_fds=(*fds.values(), ready_fd),
        )
        try:
            self.process = HelperProcess(command, directory, lab_id).start()
        finally:
            self._close_sockets()  # HAProxy holds its own copies now (or failed, and the ports go free)

    def stop(self) -> None:
        """Stop HAProxy (safe before start and twice)."""
        self._close_sockets()
        if self.process is not None:
            self.process.stop()

    def _close_sockets(self) -> None:
        for sock in [*self._sockets.values(), *([self._ready] if self._ready else [])]:
            sock.close()
        self._sockets, self._ready = {}, None

    def describe(self) -> list[str]:
        """Lines for `kprobe lab up`: each forward, where it relays, and what it stands for."""
        lines = []
        for name, spec in self.specs.items():
            if name not in self.ports:
                continue
            lines.append(f"forward {name} at {self.endpoint(name)} -> {', '.join(self.backends.get(name, ()))}"
                         + (f"  ({spec.note})" if spec.note else ""))
        return lines


def _answers_http(address: str, port: int) -> Callable[[], str | None]:
    """A readiness check: HAProxy's own HTTP frontend answers (the handed-over ports accept before it runs)."""
    def check() -> str | None:
        try:
            with socket.create_connection((address, port), timeout=0.5) as sock:
                sock.settimeout(0.5)
                sock.sendall(b"GET /ready HTTP/1.0\r\n\r\n")
                if b" 200 " in sock.recv(64):
                    return None
        except OSError:
            pass
        return f"an HTTP answer at {address}:{port}"

    return check


def haproxy_config(fds: Mapping[str, int], backends: Mapping[str, tuple[str, ...]], ready_fd: int) -> str:
    """HAProxy's configuration: one TCP frontend per forward on its handed-over socket, and the ready check.

    No health checks: a forward to a stopped broker accepts and then closes, as `kubectl port-forward`
    does when the pod is gone. `noreuseport`: a second HAProxy never shares a port with this one.
    """
    lines = [
        "# kprobe lab: TCP forwards, rendered for this run",
        "global",
        "    maxconn 512",
        "    nbthread 1",
        "    noreuseport",
        "defaults",
        "    mode tcp",
        "    timeout connect 5s",
        "    timeout client 1m",
        "    timeout server 1m",
        "",
        "frontend ready",
        "    mode http",
        f"    bind fd@{ready_fd}",
        '    http-request return status 200 content-type text/plain string "ready"',
    ]
    for i, (name, fd) in enumerate(fds.items()):
        lines += ["", f"frontend forward_{i}", f"    # {name}", f"    bind fd@{fd}", f"    default_backend to_{i}",
                  "", f"backend to_{i}", "    balance first"]
        lines += [f"    server s{j} {target}" for j, target in enumerate(backends[name])]
    return "\n".join(lines) + "\n"
