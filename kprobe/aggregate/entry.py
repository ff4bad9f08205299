"""One whole run of `kprobe aggregate`, as both entry points (the CLI, `python -m kprobe.aggregate`)
make it: the plan's answer when nothing is new, else Spark's job and its summary.

Apart from the plan so that the plan never imports the job (which imports it): the dependency
goes one way, entry -> plan, entry -> job -> plan, and Spark is imported only past `current`.
"""

from __future__ import annotations

import time

from kprobe.aggregate.plan import JobOptions, new_input_bytes, summary_lines, survey
from kprobe.aggregate.startup import Phases, note
from kprobe.aggregate.state import StateBusy

# New input up to this size starts a light JVM (jvm.LIGHT_JVM: C1 alone, the serial collector): up to here a
# run takes no longer with it and spends less CPU, its compiler and collector threads being mostly start-up
# cost; far bigger inputs are where C2's code and a parallel collector may pay for themselves, so they keep
# them (jvm.HEAVY_JVM: C2 for the methods that stay hot), and so does new input of a size not known.
LIGHT_BELOW = 256 * 1024 * 1024


def run_command(inputs: list[str], *, out: str, kafka: list[str], master: str | None, since: str | None,
                until: str | None, no_html: bool, full: bool, state: str | None, verbose: bool,
                keep_warm: str | None, where: bool = False) -> list[str]:
    """A run from the options as both entry points read them (kprobe.option_table.AGGREGATE), checked first:
    pyspark and Java present, the times, the Kafka targets, the inputs, and an --out whose replacement cannot
    delete inputs or others' files.
    """
    from kprobe.aggregate.checks import keep_warm_seconds, validate

    topics = validate(inputs, out, kafka, since, until, state, full)
    warm = keep_warm_seconds(keep_warm)
    options = JobOptions(tuple(inputs), out, master, since, until, not no_html, topics, full=full, state=state)
    return command(options, verbose=verbose, where=where, keep_warm=warm)


def command(options: JobOptions, verbose: bool = False, where: bool = False, keep_warm: float = 0) -> list[str]:
    """A whole run as the entry points make it: the line of `current`, else Spark's job and its summary.

    `where`: the summary ends with the line naming the output (the line of `current` names it already).
    `keep_warm`: seconds a warm driver (kprobe.aggregate.warm) waits for the next run; it runs the job.
    A run in this process that went mostly to starting Spark's JVM ends with a note saying so, and how a
    schedule keeps one warm (kprobe.aggregate.startup), unless a warm driver was asked for already.
    """
    began = time.monotonic()
    warm_driver = False
    if keep_warm > 0:
        from kprobe.aggregate import warm

        warm_driver = warm.can_serve(options, verbose)
    busy = False
    try:
        line, found = survey(options)
    except StateBusy:
        if not warm_driver:
            raise
        # The state's run is most likely the warm driver's own job: this run waits its turn there, and the
        # driver looks again (`busy`) once it is this run's turn.
        line, found, busy = None, None, True
    if line is not None:
        return [line]
    size = new_input_bytes(options, found)  # what `survey` found, not listed and asked again
    light = size is not None and size < LIGHT_BELOW
    where_lines = [f"outputs in {options.out}"] if where else []
    if warm_driver:
        answer = warm.run(options, light, keep_warm, busy=busy)
        if answer is not None:
            lines, current = answer  # current: the driver found nothing new (`busy`), its line names the output
            return lines if current else lines + where_lines
    starting = time.monotonic()
    from kprobe.aggregate.job import run, session
    from kprobe.aggregate.jvm import keep_archive

    # Authenticated as the warm driver is: for the minutes a cold run lasts its ports are as open to local users.
    spark = session(options.master, kafka=bool(options.kafka), verbose=verbose, light=light, authenticate=True)
    up = time.monotonic()
    try:
        result = run(spark, options)
    finally:
        done = time.monotonic()
        spark.stop()
        archive = keep_archive()
    ended = time.monotonic()
    phases = Phases(total=ended - began, start=up - starting, stop=ended - done, archive=archive)
    from kprobe.aggregate.warm import can_serve

    return summary_lines(result) + where_lines + note(phases, keep_warm <= 0 and can_serve(options, verbose))
