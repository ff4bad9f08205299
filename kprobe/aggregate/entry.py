"""One whole run of `kprobe aggregate`, as both entry points (the CLI, `python -m kprobe.aggregate`)
make it: the plan's answer when nothing is new, else Spark's job and its summary.

Apart from the plan so that the plan never imports the job (which imports it): the dependency
goes one way, entry -> plan, entry -> job -> plan, and Spark is imported only past `current`.
"""

from __future__ import annotations

from kprobe.aggregate.plan import JobOptions, current, summary_lines


def command(options: JobOptions, verbose: bool = False, where: bool = False) -> list[str]:
    """A whole run as the entry points make it: the line of `current`, else Spark's job and its summary.

    `where`: the summary ends with the line naming the output (the line of `current` names it already).
    """
    line = current(options)
    if line is not None:
        return [line]
    from kprobe.aggregate.job import run, session

    spark = session(options.master, kafka=bool(options.kafka), verbose=verbose)
    try:
        result = run(spark, options)
    finally:
        spark.stop()
    return summary_lines(result) + ([f"outputs in {options.out}"] if where else [])
