"""`kprobe check`: listener settings judged before anything is deployed (kprobe.runs.check), then printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kprobe.cli.typed import takes
from kprobe.exits import STATUS_EXIT
from kprobe.option_table import DEADLINE, NAMESERVERS, NO_COLOR, PROP_FILES, PROPS, TIMEOUT, VANTAGE

if TYPE_CHECKING:
    from kprobe.models import Report
    from kprobe.options import ProbeOptions


@takes("files", "probe", NAMESERVERS, TIMEOUT, DEADLINE, PROPS, PROP_FILES, "json_out", "fmt", "output", VANTAGE,
       NO_COLOR)
def check(
    files: Annotated[list[str], typer.Argument(help="server.properties files (several: one cluster), Compose files, a "
                                               "Strimzi Kafka resource with its KafkaNodePools, Bitnami chart "
                                               "values. The kind is read from each file's content.",
                                               show_default=False)],
    probe: Annotated[bool, typer.Option("--probe", help="Then probe the predicted bootstrap addresses from here "
                                        "(kprobe's probe run) and set prediction and observation side by side.")]
    = False,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Print the kprobe.check/v1 JSON report (same as "
                                           "--format json).")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="text, json or markdown (a summary for a ticket).")]
    = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the JSON report to this file, "
                                                "atomically.")] = None,
    nameservers: list[str] = [],  # noqa: B006 - never mutated
    timeout: str = TIMEOUT.default,
    deadline: str = DEADLINE.default,
    props: list[str] = [],  # noqa: B006
    prop_files: list[str] = [],  # noqa: B006
    vantage: str | None = None,
    no_color: bool = False,
) -> None:
    """Predict the gap from listener settings, before anything is deployed: per broker and listener, where it
    binds, what it advertises, its protocol, for whom it is meant and how clients on each network fare; then
    findings with fixes.

    Exit 0 no gap, 1 gap (or, with --probe, an observation contradicting the prediction), 2 bad input, 3 with
    --probe when no bootstrap answered.
    """
    from kprobe.output import check as check_output
    from kprobe.output.formats import CHECK, Style, choose
    from kprobe.sanitize import use_color

    chosen = choose(fmt, json_out, tuple(CHECK))
    if output is not None:
        from kprobe.output.files import check_file

        check_file(output, "--output")
    from kprobe.runs.check import check_run

    report = check_run(files, nameservers=nameservers, timeout=timeout, deadline=deadline, props=props,
                       prop_files=prop_files, vantage=vantage, probe=_probe if probe else None)
    if output is not None:
        from kprobe.output.files import write_atomic

        write_atomic(output, check_output.render_json(report, indent=True))
    sys.stdout.write(CHECK[chosen](report, Style(color=use_color(no_color), indent=sys.stdout.isatty())))
    raise typer.Exit(STATUS_EXIT[report.status])


def _probe(options: ProbeOptions) -> Report:
    """--probe's run, in the foreground as `kprobe probe` runs it: Ctrl-C reports what is known."""
    from kprobe.delivery.progress import run_in_foreground
    from kprobe.runs.probe import ProbeRun

    return run_in_foreground(ProbeRun(options))
