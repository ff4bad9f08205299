"""A whole run as the entry points make it (kprobe.aggregate.entry.command), with Spark's session and job stood in
for: the start-up note ends a run in this process that went mostly to the JVM's start, and no run a warm
driver served. (The note's decision and words: tests/aggregate/test_startup.py; the real job: test_job.py.)"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark")

from kprobe.aggregate import entry, jvm, warm
from kprobe.aggregate import job as spark_job
from kprobe.aggregate.plan import JobOptions

RESULT = {"counts": {"input_records": 1, "reports": 1, "reports_in_window": 1, "observations": 3, "duplicates": 0,
                     "quarantined": 0}, "worst": []}


class _Session:
    def stop(self) -> None:
        pass


@pytest.fixture
def stood_in(monkeypatch, tmp_path):
    """A run with one new report whose session takes `starts` seconds to come up and whose job takes `works`."""
    times = {"starts": 0.0, "works": 0.0}

    def session(*args, **kwargs):
        time.sleep(times["starts"])
        return _Session()

    def run(spark, options):
        time.sleep(times["works"])
        return RESULT

    monkeypatch.setattr(entry, "survey", lambda options: (None, None))
    monkeypatch.setattr(entry, "new_input_bytes", lambda options, found: 4096)
    monkeypatch.setattr(spark_job, "session", session)
    monkeypatch.setattr(spark_job, "run", run)
    monkeypatch.setattr(jvm, "keep_archive", lambda: False)
    return times, JobOptions((str(tmp_path / "in"),), str(tmp_path / "out"))


def test_a_run_mostly_in_the_jvm_s_start_ends_with_the_note(stood_in):
    times, options = stood_in
    times.update(starts=0.4, works=0.0)
    lines = entry.command(options, where=True)
    assert lines[-3] == f"outputs in {options.out}"
    assert lines[-2].startswith("start-up: ") and "went to Spark's JVM, not to the reports" in lines[-2]
    assert "--keep-warm 10m" in lines[-1]
    # The reports' work took most of it: no note.
    times.update(starts=0.0, works=0.4)
    assert entry.command(options, where=True)[-1] == f"outputs in {options.out}"


def test_no_note_on_a_run_a_warm_driver_served_or_one_keep_warm_cannot_help(stood_in, monkeypatch):
    times, options = stood_in
    times.update(starts=0.4, works=0.0)
    monkeypatch.setattr(warm, "run", lambda *args, **kwargs: (["served by the warm driver"], False))
    assert entry.command(options, where=True, keep_warm=600) == ["served by the warm driver", f"outputs in {options.out}"]
    # --keep-warm given but no driver could be had: the run falls back to its own JVM, and says nothing more.
    monkeypatch.setattr(warm, "run", lambda *args, **kwargs: None)
    assert entry.command(options, where=True, keep_warm=600)[-1] == f"outputs in {options.out}"
    # -v (which a warm driver cannot serve): --keep-warm would not help, so no advice.
    assert entry.command(options, where=True, verbose=True)[-1] == f"outputs in {options.out}"
