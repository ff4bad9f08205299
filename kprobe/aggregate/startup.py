"""Whether a run's time went mostly to Spark's JVM rather than to the reports, and the note that says so.

Why: a run of a few reports as a process of its own spends most of its time starting a JVM and a Spark
session (and, the first time, writing the class archive later runs map as its JVM exits), which reads
as "the aggregation is slow" to someone who does not know. The run times those phases as it goes
(`kprobe.aggregate.entry.command`); when they are most of it, its output ends by saying so, with the
option that spares a schedule's runs that cost (`--keep-warm`). A run a warm driver served started no
JVM here, and a run where `--keep-warm` cannot help (a cluster's master, `-v`, inputs off this machine)
gets no note.
"""

from __future__ import annotations

from kprobe.records import record

# More than this share of the run in the JVM's start and stop is "mostly".
MOSTLY = 0.5


@record
class Phases:
    """What a run spent, in seconds: the whole of it, and the part in starting and stopping Spark's JVM."""

    total: float
    start: float = 0.0  # PySpark imported, the JVM and its session started; 0: this process started none
    stop: float = 0.0  # the session stopped and its JVM gone (writing the class archive, when `archive`)
    archive: bool = False  # this run's JVM wrote the class archive as it exited

    @property
    def jvm(self) -> float:
        """The seconds that went to the JVM's start and stop, not to the reports."""
        return self.start + self.stop


def mostly_jvm(phases: Phases) -> bool:
    """Whether more than half the run went to starting and stopping the JVM; never for a run that started none."""
    return phases.start > 0 and phases.total > 0 and phases.jvm > MOSTLY * phases.total


def note(phases: Phases, keep_warm_serves: bool) -> list[str]:
    """The run's last lines when it was mostly the JVM's start: how much, and `--keep-warm` for a schedule.

    `keep_warm_serves`: a warm driver could serve this run's options (kprobe.aggregate.warm.can_serve) and
    `--keep-warm` was not given; otherwise there is nothing to advise, and no note.
    """
    if not keep_warm_serves or not mostly_jvm(phases):
        return []
    archive = ", writing the class archive that later runs map" if phases.archive else ""
    return [f"start-up: {phases.jvm:.1f} s of this run's {phases.total:.1f} s went to Spark's JVM, not to the "
            f"reports ({phases.start:.1f} s to start it and its session, {phases.stop:.1f} s to stop it{archive})",
            "  on a schedule, add --keep-warm with its period and some (every 5 minutes: --keep-warm 10m): "
            "the next runs use the driver it keeps warm"]
