"""`kprobe serve` started: its options checked, its config loaded, SIGTERM and Ctrl-C wired to a clean stop,
and the lines that say where it listens and what it will refuse.

Kept beside the exporter rather than in the CLI, which only parses and calls this: another front end
(a test, a service wrapper) starts the same exporter with the same checks and the same warnings.
"""

from __future__ import annotations

import sys
from typing import Any

from kprobe.errors import UsageError


def start(*, listen: str, config: str | None, allow_target: list[str], max_concurrent: int, max_connections: int,
          vantage: str | None) -> None:
    """Serve until SIGTERM or SIGINT; UsageError for a bad option or config, before anything listens."""
    import importlib.util
    import signal
    import threading

    if importlib.util.find_spec("prometheus_client") is None:
        raise UsageError("kprobe serve needs prometheus-client: pip install 'kprobe[serve]'")
    from kprobe.serve.allow import parse_patterns
    from kprobe.serve.exporter import ServeOptions, is_loopback, parse_listen
    from kprobe.serve.exporter import serve as run_server
    from kprobe.serve.modules import default_config, load_config

    host, port = parse_listen(listen)
    if max_concurrent < 1:
        raise UsageError(f"bad --max-concurrent {max_concurrent}: give at least 1")
    if max_connections < 1:
        raise UsageError(f"bad --max-connections {max_connections}: give at least 1")
    allow = parse_patterns(allow_target, "bad --allow-target")
    settings = load_config(config) if config else default_config()
    options = ServeOptions(host=host, port=port, config=settings, allow=allow, max_concurrent=max_concurrent,
                           vantage=vantage, max_connections=max_connections)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def ready(address: tuple[Any, ...]) -> None:
        shown = f"[{address[0]}]" if ":" in str(address[0]) else str(address[0])
        sys.stderr.write(f"kprobe serve: listening on http://{shown}:{address[1]} "
                         f"(modules: {', '.join(sorted(settings.modules))})\n")
        if not is_loopback(host):
            sys.stderr.write("kprobe serve: warning: listening beyond loopback: anyone who reaches this address can "
                             "make kprobe probe the allowed targets\n")
        if not allow_target and not settings.targets:
            sys.stderr.write("kprobe serve: warning: no target is allowed: every /probe will be refused until "
                             "--allow-target or the config's targets: name some\n")
        sys.stderr.flush()

    run_server(options, on_ready=ready, stop=stop)
