"""`kprobe fix`: the change to the brokers' files that closes the reports' gaps (kprobe.runs.fix), printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kprobe.cli.typed import takes
from kprobe.errors import EXIT_GAP, EXIT_OK
from kprobe.option_table import (
    DEADLINE,
    FIX_CONFIGS,
    FIX_PORT,
    FIX_VERIFY,
    NAMESERVERS,
    NO_COLOR,
    PROP_FILES,
    PROPS,
    TIMEOUT,
    VANTAGE,
)

if TYPE_CHECKING:
    from kprobe.models import Report
    from kprobe.options import ProbeOptions


@takes("reports", FIX_CONFIGS, FIX_VERIFY, PROP_FILES, PROPS, FIX_PORT, VANTAGE, NAMESERVERS, TIMEOUT, DEADLINE,
       "json_out", "fmt", "output", NO_COLOR)
def fix(
    reports: Annotated[list[str], typer.Argument(help="JSON probe reports (files, --out directories, `-` for stdin), "
                                                 "typically one per vantage.", show_default=False)],
    configs: list[str] = [],  # noqa: B006 - never mutated
    verify: bool = False,
    prop_files: list[str] = [],  # noqa: B006
    props: list[str] = [],  # noqa: B006
    port: int | None = None,
    vantage: str | None = None,
    nameservers: list[str] = [],  # noqa: B006
    timeout: str = TIMEOUT.default,
    deadline: str = DEADLINE.default,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Print the kprobe.fix/v1 JSON document (same as "
                                           "--format json).")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="text (the diff, then the steps and the proof), json "
                                            "or markdown (for a change ticket).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the JSON document to this file, "
                                                "atomically.")] = None,
    no_color: bool = False,
) -> None:
    """Write the change to the brokers' own configuration that closes the gaps the reports show, as a unified diff
    (`patch -p0` or `git apply -p0` applies it), with the steps outside the files and the proof: kprobe check's
    prediction on the patched files, and with --verify a what-if probe from here. -F and -X are the client
    settings of that probe, as `kprobe probe` takes them; without them it uses the settings the report
    recorded, unless one of them was a secret (a report never holds one).

    Exit 0 a change proven to close every reported gap (or no gap), 1 some gap stays open or unproven, 2 bad input.
    """
    del no_color  # the diff is a patch: no colours in it
    from kprobe.output.files import check_file
    from kprobe.output.fix import FIX, render_json
    from kprobe.output.formats import choose

    chosen = choose(fmt, json_out, tuple(FIX))
    if output is not None:
        check_file(output, "--output")
    port = FIX_PORT.field_value(port) if port is not None else None
    loaded = _load(reports)
    from kprobe.runs.fix import fix_run

    result = fix_run(loaded, configs, port=port, verify=verify, vantage=vantage, nameservers=nameservers,
                     timeout=timeout, deadline=deadline, props=props, prop_files=prop_files,
                     probe=_probe if verify else None)
    if output is not None:
        from kprobe.output.files import write_atomic

        write_atomic(output, render_json(result, indent=True))
    sys.stdout.write(FIX[chosen](result, sys.stdout.isatty()))
    raise typer.Exit(EXIT_OK if result.status == "ok" else EXIT_GAP)


def _load(paths: list[str]) -> list[tuple[str, Report]]:
    """Every report under the paths, as models (what `kprobe show` reads); none at all is bad input."""
    from kprobe.errors import UsageError
    from kprobe.output.json_load import from_dict
    from kprobe.saved.reading import Reader

    reader = Reader(paths)
    loaded = [(saved.source, from_dict(saved.data)) for saved in reader]
    if not loaded:
        raise UsageError(f"no kprobe report in {', '.join(paths)[:200]}")
    return loaded


def _probe(options: ProbeOptions) -> Report:
    """--verify's what-if, in the foreground as `kprobe probe` runs it."""
    from kprobe.delivery.progress import run_in_foreground
    from kprobe.runs.probe import ProbeRun

    return run_in_foreground(ProbeRun(options))
