"""The note that ends a run whose time went mostly to Spark's JVM (kprobe.aggregate.startup): when, and its words."""

from __future__ import annotations

from kprobe.aggregate.startup import Phases, mostly_jvm, note


def test_a_run_mostly_in_the_jvm_s_start_says_so_with_keep_warm():
    # A first run on a machine: the session up after 9.3 s, the reports' job 4.6 s, 36.9 s to stop the JVM
    # while it writes the class archive.
    first = Phases(total=50.9, start=9.3, stop=36.9, archive=True)
    assert mostly_jvm(first)
    assert note(first, keep_warm_serves=True) == [
        "start-up: 46.2 s of this run's 50.9 s went to Spark's JVM, not to the reports (9.3 s to start it and its "
        "session, 36.9 s to stop it, writing the class archive that later runs map)",
        "  on a schedule, add --keep-warm with its period and some (every 5 minutes: --keep-warm 10m): "
        "the next runs use the driver it keeps warm"]
    # No archive written: the same words without it.
    small = Phases(total=9.0, start=5.2, stop=0.4)
    assert note(small, keep_warm_serves=True)[0] == ("start-up: 5.6 s of this run's 9.0 s went to Spark's JVM, not to "
                                                     "the reports (5.2 s to start it and its session, 0.4 s to stop it)")


def test_no_note_when_the_work_dominates_or_keep_warm_cannot_help():
    # The reports took most of the run: the JVM's start is not what made it long.
    busy = Phases(total=17.4, start=5.1, stop=0.4)
    assert not mostly_jvm(busy) and note(busy, keep_warm_serves=True) == []
    # Exactly half is not "mostly".
    assert not mostly_jvm(Phases(total=10.0, start=4.0, stop=1.0))
    # --keep-warm given already, or a run a warm driver cannot serve (a cluster's master, -v, s3a inputs).
    first = Phases(total=50.9, start=9.3, stop=36.9, archive=True)
    assert note(first, keep_warm_serves=False) == []


def test_no_note_when_a_warm_driver_served_the_run():
    # The run's job went to the driver --keep-warm keeps: this process started no JVM, whatever the times.
    served = Phases(total=3.1)
    assert not mostly_jvm(served) and note(served, keep_warm_serves=True) == []
    assert note(Phases(total=0.0), keep_warm_serves=True) == []
