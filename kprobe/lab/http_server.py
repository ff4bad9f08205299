"""A small HTTP(S) server on loopback for the lab's services that are not Kafka.

Why a real server rather than a stub in tests: the services it stands for (an OAuth token
endpoint, a JWKS endpoint) are reached by kprobe and by the brokers' own JVMs over real
sockets, TLS included, exactly as in production. Like the lab's DNS server, it binds one loopback
address on a free port, answers from a route table in a daemon thread, and sends nothing anywhere.

A route is `(method, path)` to a handler that takes the request and returns the response; what
the handlers mean (tokens, keys) is their module's business, not this one's.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kprobe.records import field, record

MAX_BODY = 64 * 1024  # a lab request is a form of a few fields; anything longer is refused


@record
class HttpRequest:
    """What a handler sees: method, path (query string kept apart), headers, body."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


@record
class HttpResponse:
    """What a handler returns; `Content-Length` is added."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], HttpResponse]


class LabHttpServer:
    """An HTTP server (HTTPS with `tls`) on `host`, a free port, answering `routes`.

    An unknown path is 404, a known path with another method 405, as real servers answer.
    `requests` counts what was answered per route, so a test can prove a client cached a token.
    """

    def __init__(self, host: str, routes: Mapping[tuple[str, str], Handler],
                 tls: ssl.SSLContext | None = None) -> None:
        self.routes = dict(routes)
        self.tls = tls
        self.requests: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "kprobe-lab"
            timeout = 10  # a client that stops mid-request must not hold a thread for ever

            def _answer(self) -> None:
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(HttpResponse(413, b"request too large"))
                    return
                body = self.rfile.read(length) if length > 0 else b""
                route = (self.command, path)
                handler = server.routes.get(route)
                if handler is None:
                    methods = sorted(m for m, p in server.routes if p == path)
                    self._send(HttpResponse(405, b"", {"Allow": ", ".join(methods)}) if methods
                               else HttpResponse(404, b"not found"))
                    return
                with server._lock:
                    server.requests[route] = server.requests.get(route, 0) + 1
                request = HttpRequest(self.command, path, query, {k.lower(): v for k, v in self.headers.items()},
                                      body)
                self._send(handler(request))

            def _send(self, response: HttpResponse) -> None:
                self.send_response(response.status)
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: a lab's stderr belongs to the test or `kprobe lab up` that runs it."""

        class _Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[socket.socket, object]:
                sock, addr = super().get_request()
                if server.tls is None:
                    return sock, addr
                sock.settimeout(10)  # a client that never finishes its handshake
                return server.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

            def handle_error(self, request: object, client_address: object) -> None:
                """A client that hangs up or fails the TLS handshake is the client's story, not a lab error."""

        self._server = _Server((host, 0), _Handler)
        self.host, self.port = str(self._server.server_address[0]), int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"lab-http-{self.port}", daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        """The URL of `path` on this server, by IP address (the lab's names resolve only in views)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}{path}"

    def close(self) -> None:
        """Stop answering and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)


def tls_context(certfile: str) -> ssl.SSLContext:
    """A server-side TLS context from one PEM holding the key, the certificate and its chain.

    That is the lab's `CertFiles.keystore`, the same file a broker's PEM keystore reads.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile)
    return ctx
