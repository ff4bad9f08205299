"""An SNI-routing TLS passthrough proxy in front of the brokers, as Kubernetes ingresses and
OpenShift routes put one.

Behind an ingress every broker is reached at one address and one port (443): each broker
advertises a name of its own (`broker-0.kafka.apps.example.com:443`), every such name resolves to
the ingress, and the ingress reads the server name (SNI) of the TLS ClientHello to pick the
broker, passing the still-encrypted connection through. A client that sends no SNI, or a name
no route has, lands on the ingress's default server, which terminates TLS itself with the
controller's default certificate (ingress-nginx's self-signed "Kubernetes Ingress Controller
Fake Certificate", the OpenShift router's `*.apps` wildcard) and answers HTTP: a Kafka client
fails there. So a probe must send the advertised name as SNI on every connection, and must
recognise that default certificate for what it means: no route for that name.

Why HAProxy (Debian's `haproxy`) rather than nginx's `stream` with `ssl_preread`: the OpenShift
router *is* HAProxy routing passthrough routes on `req.ssl_sni`, so the lab runs the very
mechanism; one HAProxy process also terminates TLS for the default route, as ingress-nginx's
passthrough proxy hands unmatched names to its own HTTPS server; and Debian's package binds
nothing when installed (nginx's default site listens on port 80 of every interface). `-db`
keeps it in the foreground, under the lab's control (`kprobe.lab.helpers`).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kprobe.errors import LabError
from kprobe.lab.helpers import HelperCommand, HelperProcess, listening_socket
from kprobe.records import record

# What an ingress-nginx default backend answers on every path.
DEFAULT_BODY = "default backend - 404"


@record
class ProxySpec:
    """One SNI proxy of a scenario.

    `routes` maps an SNI name to the endpoints its connections go to, as `{ep[NODE][LISTENER]}`
    templates (several for a bootstrap route, as its service lists every broker; HAProxy's
    `balance first`, with no health checks, sends every connection to the first, so a lab run
    always bootstraps at the same broker). A name not in `routes` goes to the default server,
    which presents `default_certificate` (a name in the scenario's `certificates`). `port` is
    the port the proxy prefers (443, as ingresses listen); where it cannot be bound (no root, or
    taken) the proxy gets a free one, and `{px[NAME]}` in a listener's templates is whichever it got.
    """

    address: str
    routes: Mapping[str, tuple[str, ...]]
    default_certificate: str
    port: int = 443
    note: str = ""


class SniProxy:
    """A running proxy: its ports are chosen first (templates need them), then it starts."""

    def __init__(self, name: str, spec: ProxySpec) -> None:
        self.name = name
        self.spec = spec
        self.port = 0
        self.default_port = 0
        self.backends: dict[str, tuple[str, ...]] = {}
        self.process: HelperProcess | None = None
        self._sockets: list[socket.socket] = []

    def reserve_ports(self) -> int:
        """Bind the proxy's port (443 when it can) and its default server's, and hold them; returns the first.

        The sockets are handed to HAProxy at start (`bind fd@N`), so the ports chosen here are the
        ones it serves, whoever else starts a proxy meanwhile.
        """
        self._sockets = [listening_socket(self.spec.address, self.spec.port), listening_socket(self.spec.address)]
        self.port, self.default_port = (int(sock.getsockname()[1]) for sock in self._sockets)
        return self.port

    @property
    def endpoint(self) -> str:
        """`address:port` where clients reach the proxy."""
        return f"{self.spec.address}:{self.port}"

    def start(self, endpoints: Mapping[int, Mapping[str, str]], default_pem: Path, directory: Path,
              lab_id: str) -> None:
        """Render the routes against the brokers' real endpoints and run HAProxy until `stop()`."""
        values: dict[str, Any] = {"ep": endpoints}
        try:
            self.backends = {sni: tuple(t.format(**values) for t in targets)
                             for sni, targets in self.spec.routes.items()}
        except (KeyError, IndexError) as exc:
            raise LabError(f"SNI proxy {self.name}: a route names an endpoint the scenario does not have "
                           f"({exc})") from None
        front, default = (sock.fileno() for sock in self._sockets)
        command = HelperCommand(
            name=f"sni-proxy-{self.name}", program="haproxy", package="haproxy", args=("-f", "{config}", "-db"),
            config=haproxy_config(self.name, f"fd@{front}", f"fd@{default}", f"{self.spec.address}:{self.default_port}",
                                  self.backends, default_pem),
            ready=_answers_tls(self.spec.address, self.port), pass_fds=(front, default),
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
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    def describe(self) -> list[str]:
        """Lines for `kprobe lab up`: where the proxy listens and where each name goes."""
        lines = [f"SNI proxy {self.name} (HAProxy, TLS passthrough) at {self.endpoint}"
                 + (f"  ({self.spec.note})" if self.spec.note else "")]
        lines += [f"  SNI {sni:<36} -> {', '.join(targets)}" for sni, targets in self.backends.items()]
        lines.append(f"  any other name or none -> default server, certificate {self.spec.default_certificate!r}")
        return lines


def _answers_tls(address: str, port: int) -> Callable[[], str | None]:
    """A readiness check: a TLS handshake through the proxy, without SNI, completes (at its default server).

    The ports accept connections before HAProxy runs (the lab bound them), so only an answer shows it is up.
    """
    def check() -> str | None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection((address, port), timeout=0.5) as raw, ctx.wrap_socket(raw):
                return None
        except (OSError, ssl.SSLError):
            return f"a TLS handshake at {address}:{port}"

    return check


def haproxy_config(name: str, front: str, default: str, default_server: str, routes: Mapping[str, tuple[str, ...]],
                   default_pem: Path) -> str:
    """HAProxy's configuration: SNI passthrough on `front`, and a default HTTPS server on `default`.

    `front` and `default` are HAProxy bind addresses (`fd@N` for sockets the lab hands over, or
    `host:port`); `default_server` is where the passthrough frontend reaches the default server.
    `tcp-request inspect-delay` holds each connection until its ClientHello has arrived (at most
    5 s), so `req.ssl_sni` can be read; a connection that sends no ClientHello in that time, or a
    name no route has, goes to the default server. `noreuseport`: a second HAProxy never shares
    a port with this one.
    """
    lines = [
        f"# kprobe lab: SNI proxy {name}, rendered for this run",
        "global",
        "    maxconn 512",
        "    nbthread 1",
        "    noreuseport",
        "defaults",
        "    timeout connect 5s",
        "    timeout client 1m",
        "    timeout server 1m",
        "",
        f"frontend {name}",
        "    mode tcp",
        f"    bind {front}",
        "    tcp-request inspect-delay 5s",
        "    tcp-request content accept if { req.ssl_hello_type 1 }",
    ]
    backends: list[str] = []
    for i, (sni, targets) in enumerate(routes.items()):
        if not sni or any(c.isspace() or c in "{}#" for c in sni):
            raise LabError(f"SNI proxy {name}: {sni!r} is not a host name a route can have")
        lines.append(f"    use_backend route_{i} if {{ req.ssl_sni -i {sni.lower()} }}")
        backends += ["", f"backend route_{i}", f"    # {sni}", "    mode tcp", "    balance first"]
        backends += [f"    server s{j} {target}" for j, target in enumerate(targets)]
    lines.append("    default_backend default_server")
    lines += backends
    lines += [
        "",
        "backend default_server",
        "    mode tcp",
        f"    server default {default_server}",
        "",
        "frontend default_server_tls",
        "    mode http",
        f"    bind {default} ssl crt {default_pem}",
        f'    http-request return status 404 content-type text/plain string "{DEFAULT_BODY}"',
    ]
    return "\n".join(lines) + "\n"
