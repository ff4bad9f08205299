"""`kprobe schema` and `kprobe demo`: the reports' JSON Schemas, and a tour on a lab."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kprobe.cli.typed import takes
from kprobe.option_table import NO_COLOR


def schema(
    check: Annotated[bool, typer.Option("--check", help="The schema of `kprobe check`'s report (kprobe.check/v1) "
                                        "instead.")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="The schema of `kprobe fix`'s document (kprobe.fix/v1) "
                                      "instead.")] = False,
) -> None:
    """Print the JSON Schema of the report (kprobe.report/v1), or with --check of kprobe check's (kprobe.check/v1),
    with --fix of kprobe fix's (kprobe.fix/v1).
    """
    if fix:
        from kprobe.output.fix import schema_text as fix_schema_text

        sys.stdout.write(fix_schema_text())
        return
    if check:
        from kprobe.output.check import schema_text as check_schema_text

        sys.stdout.write(check_schema_text())
        return
    from kprobe.output.json_report import schema_text

    sys.stdout.write(schema_text())



@takes(NO_COLOR)
def demo(no_color: bool = False) -> None:
    """Start the `listeners` lab (the LISTENER_BOB / FRED / ALICE broker), probe it through each
    listener as a client on the Docker host would, print the reports, stop the lab.
    """
    from kprobe.delivery.deliver import use_color
    from kprobe.lab.demo import run_demo

    run_demo(color=use_color(no_color))
