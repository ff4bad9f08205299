"""Where a finished report goes: stdout in the chosen format, files, metrics, a Kafka topic.

Kept apart from the CLI so `probe` and `watch` deliver identically, and apart from the
formats (kprobe.report.*), which only turn a report into text.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kprobe.errors import KprobeError
from kprobe.models import Report
from kprobe.publish import DEFAULT_SPOOL_MAX, Target

FORMATS = ("text", "json", "prometheus")
_LOG = logging.getLogger("kprobe.deliver")


@dataclass(frozen=True)
class Outputs:
    """Validated output choices of one command."""

    fmt: str = "text"
    color: bool = False
    output: Path | None = None
    out_dir: Path | None = None
    prom_file: Path | None = None
    publish: Target | None = None
    publish_props: dict[str, str] = field(default_factory=dict)
    spool: Path | None = None
    spool_max: int = DEFAULT_SPOOL_MAX


def render(report: Report, fmt: str, color: bool = False) -> str:
    """The report as text in one of FORMATS."""
    if fmt == "json":
        from kprobe.output import json_report

        # Indented for a person at a terminal, one line for a pipe or a file (as gh does; kcat -J
        # is always one line): jq reads either, and a script does not wait for indentation.
        return json_report.render(report, indent=2 if sys.stdout.isatty() else None)
    if fmt == "prometheus":
        from kprobe.output import prometheus

        return prometheus.render(report)
    from kprobe.output import text

    return text.render(report, color=color)


def default_spool() -> Path:
    """~/.cache/kprobe/spool (XDG), beside the lab's jar cache."""
    from kprobe.lab.jars import cache_root

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
        from kprobe.publish import Spool, forward

        spool = Spool(outputs.spool or default_spool(), outputs.spool_max)
        spool.put(data)
        try:
            sent, pending = forward(spool, outputs.publish, outputs.publish_props, timeout=timeout)
        except KprobeError:
            raise
        except Exception as exc:  # the collector's trouble must not lose the run: it stays spooled
            _LOG.warning("publishing failed (%s); %d reports stay spooled", exc.__class__.__name__,
                         len(spool.pending()))
        else:
            _LOG.debug("published %d reports, %d pending", sent, pending)
