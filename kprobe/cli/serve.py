"""`kprobe serve`: its options, the logging it asks for, and the exporter started (kprobe.serve.start)."""

from __future__ import annotations

from typing import Annotated

import typer

from kprobe.cli.probe import setup_logging
from kprobe.cli.typed import takes
from kprobe.option_table import VANTAGE, VERBOSE


@takes("listen", "config", "allow_target", "max_concurrent", "max_connections", VANTAGE, VERBOSE)
def serve(
    listen: Annotated[str, typer.Option("--listen", envvar="KPROBE_LISTEN",
                                        help="Address to serve HTTP on (HOST:PORT). Loopback by default: anyone "
                                        "who reaches it can have kprobe probe.")] = "127.0.0.1:9464",
    config: Annotated[str | None, typer.Option("--config", envvar="KPROBE_SERVE_CONFIG",
                                               help="YAML file of modules (how to probe) and targets (what may be "
                                               "probed), as blackbox_exporter's.")] = None,
    allow_target: Annotated[list[str], typer.Option("--allow-target", help="A host:port pattern a scrape may name as "
                                                    "its target (repeatable): a name glob, an IP, a CIDR such as "
                                                    "10.0.0.0/8:9092 or [fd00::/8]:*; none: only the config's "
                                                    "targets, and without those nothing.")] = [],  # noqa: B006
    max_concurrent: Annotated[int, typer.Option("--max-concurrent", help="Probes at once; one more is answered 503.")]
    = 16,
    max_connections: Annotated[int, typer.Option("--max-connections", help="HTTP connections open at once; past it "
                                                 "the oldest still sending its request is closed, or the new one is "
                                                 "answered 503.")] = 256,
    vantage: str | None = None,
    verbose: bool = False,
) -> None:
    """A Prometheus exporter in blackbox_exporter's style: GET /probe?target=HOST:PORT&module=NAME runs one
    probe within the scrape's timeout and answers its metrics; /metrics has the exporter's own.

    Runs until SIGTERM or Ctrl-C (exit 0); 2 on bad options or config.
    """
    setup_logging(verbose)
    if verbose:
        import logging

        logging.getLogger("kprobe.serve").setLevel(logging.DEBUG)
    from kprobe.serve.start import start

    start(listen=listen, config=config, allow_target=allow_target, max_concurrent=max_concurrent,
          max_connections=max_connections, vantage=vantage)
