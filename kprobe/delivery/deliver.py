"""Where a finished report goes: stdout in the chosen format, files, metrics, a Kafka topic.

Kept apart from the CLI so `probe` and `watch` choose and deliver identically, and apart from
the formats (kprobe.output.*), which only turn a report into text. The choices are checked
whole before the run (`outputs_from`): a run of up to --deadline must not end in a report
that has nowhere to go.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kprobe.errors import KprobeError, UsageError
from kprobe.logs import logger
from kprobe.models import Report
from kprobe.option_table import declared
from kprobe.output import formats
from kprobe.output.formats import choose
from kprobe.records import field, record
from kprobe.sanitize import use_color

if TYPE_CHECKING:  # the publisher loads only for a run with --publish; pathlib only for a file written
    from pathlib import Path

    from kprobe.delivery.publish import Target

_LOG = logger("kprobe.delivery.deliver")
DEFAULT_SPOOL_MAX: int = declared("spool_max").default  # --spool-max: the most reports kept in the spool


@record
class Outputs:
    """Validated output choices of one command."""

    fmt: str = "text"
    color: bool = False
    output: Path | None = None
    out_dir: Path | None = None
    prom_file: Path | None = None
    publish: Target | None = None
    publish_props: dict[str, str] = field(default_factory=dict)
    # --publish-create: make the topic when the collector has none (kprobe.delivery.publish.reports_topic says how).
    publish_create: bool = False
    spool: Path | None = None
    spool_max: int = DEFAULT_SPOOL_MAX


def outputs_from(
    *, fmt: str | None = None, json_out: bool = False, no_color: bool = False, output: Path | None = None,
    out_dir: Path | None = None, prom_file: Path | None = None, publish: str | None = None,
    publish_props: Sequence[str] = (), spool: Path | None = None, spool_max: int = DEFAULT_SPOOL_MAX,
    names: Sequence[str] = formats.PROBE, publish_create: bool = False,
) -> Outputs:
    """The output options of `probe` and `watch`, checked together; UsageError for the first problem.

    The checks that need no disk come first, so a typo'd option never leaves a directory behind;
    then every path is tried for real (kprobe.output.files), output directories made on the way.
    """
    from kprobe.options import parse_properties

    chosen = choose(fmt, json_out, names)
    target = None
    if publish is not None:
        from kprobe.delivery.publish import parse_target

        target = parse_target(publish)
    elif publish_create:
        raise UsageError("--publish-create needs --publish BOOTSTRAP/TOPIC: it creates that topic when it is missing")
    if spool_max < 1:
        raise UsageError(f"bad --spool-max {spool_max}: keep at least 1 report")
    props = parse_properties(publish_props)
    if target is not None:  # a bad security.protocol is bad usage now, not a warning after the run
        from kprobe.kafka.security import security_from

        try:
            security_from(props)
        except UsageError as exc:
            raise UsageError(f"--publish-property: {exc}") from None
    if any(p is not None for p in (output, out_dir, prom_file)) or target is not None:
        # Only a run that writes somewhere imports tempfile and the file writer.
        from kprobe.output.files import check_file, prepare_dir

        for path, flag in ((output, "-o"), (prom_file, "--prom-file")):
            if path is not None:
                check_file(path, flag)
        if out_dir is not None:
            prepare_dir(out_dir, "--out")
        if target is not None:  # the spool is written only when publishing
            prepare_dir(spool or default_spool(), "--spool" if spool is not None else "the default --spool")
    return Outputs(fmt=chosen, color=use_color(no_color), output=output, out_dir=out_dir, prom_file=prom_file,
                   publish=target, publish_props=props, publish_create=publish_create, spool=spool,
                   spool_max=spool_max)


def render(report: Report, fmt: str, color: bool = False) -> str:
    """The report in one of formats.PROBE (JSON indented only for a person at a terminal)."""
    return formats.REPORT[fmt](report, formats.Style(color=color, indent=sys.stdout.isatty()))


def default_spool() -> Path:
    """~/.cache/kprobe/spool (XDG), beside the lab's jar cache (kprobe.paths: the core never imports the lab)."""
    from kprobe.paths import cache_root

    return cache_root() / "spool"


def deliver(report: Report, outputs: Outputs, *, timeout: float, stdout: bool = True) -> None:
    """Write the report everywhere asked; the files first, so stdout never claims what failed."""
    if any(x is not None for x in (outputs.output, outputs.out_dir, outputs.prom_file, outputs.publish)):
        _deliver_elsewhere(report, outputs, timeout)
    if stdout:
        sys.stdout.write(render(report, outputs.fmt, outputs.color))
        sys.stdout.flush()


def _deliver_elsewhere(report: Report, outputs: Outputs, timeout: float) -> None:
    """Files, metrics and the topic: apart, so a run that only prints imports none of their modules."""
    from kprobe.output import json_report
    from kprobe.output.files import report_path, write_atomic, write_new

    data = json_report.to_dict(report)
    if outputs.output is not None:
        write_atomic(outputs.output, json_report.render(report))
    if outputs.out_dir is not None:
        write_new(report_path(outputs.out_dir, report.vantage.name, report.started_at, report.id),
                  json.dumps(data, ensure_ascii=True, indent=1) + "\n")
    if outputs.prom_file is not None:
        from kprobe.output import prometheus

        write_atomic(outputs.prom_file, prometheus.render(report))
    if outputs.publish is not None:
        from kprobe.delivery.publish import Spool, forward, stay_spooled

        spool = Spool(outputs.spool or default_spool(), outputs.spool_max)
        spool.put(data)
        try:
            sent, pending = forward(spool, outputs.publish, outputs.publish_props, timeout=timeout,
                                    create=outputs.publish_create)
        except KprobeError:
            raise
        except Exception as exc:  # the collector's trouble must not lose the run: it stays spooled
            _LOG.warning("publishing failed (%s); %s", exc.__class__.__name__, stay_spooled(len(spool.pending())))
        else:
            _LOG.debug("published %d reports, %d pending", sent, pending)
