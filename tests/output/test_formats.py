"""The output contract: one registry of formats, one rule for --json against --format,
one summary line. Pure and in-process: no broker, no subprocess."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kprobe.errors import UsageError
from kprobe.output import formats, text
from kprobe.output.json_load import from_dict

REPORTS = sorted((Path(__file__).resolve().parents[1] / "data" / "reports").glob("*.json"))


@pytest.mark.parametrize(("names", "message"), [
    (formats.PROBE, "bad --format 'xml': use text, json, prometheus or markdown"),
    (formats.WATCH, "bad --format 'xml': use text, json or prometheus"),
    (formats.SHOW, "bad --format 'xml': use text, json, markdown or prometheus"),
    (tuple(formats.DIFF), "bad --format 'xml': use text, json or markdown"),
    (tuple(formats.CHECK), "bad --format 'xml': use text, json or markdown"),
])
def test_each_command_refuses_a_name_in_the_words_it_always_used(names, message):
    with pytest.raises(UsageError) as caught:
        formats.choose("xml", False, names)
    assert str(caught.value) == message


@pytest.mark.parametrize("names", [formats.PROBE, formats.WATCH, formats.SHOW, tuple(formats.DIFF),
                                   tuple(formats.CHECK)])
def test_json_and_format_are_settled_in_one_place(names):
    assert formats.choose(None, False, names) == "text"
    assert formats.choose(None, True, names) == "json"
    assert formats.choose("JSON", True, names) == "json"  # names are case-blind, as they always were
    with pytest.raises(UsageError) as caught:
        formats.choose(names[-1], True, names)
    assert str(caught.value) == "--json and --format disagree: give one of them"


def test_every_name_a_command_takes_has_a_renderer():
    assert tuple(formats.REPORT) == formats.PROBE
    assert set(formats.WATCH) <= set(formats.REPORT) and set(formats.SHOW) == set(formats.REPORT)
    assert set(formats.LISTING) == {"text", "json"}


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_one_summary_line_from_the_models_and_from_the_saved_summary(path):
    """show --summary reads the counts from the saved summary; they must be the models' to the character."""
    data = json.loads(path.read_text())
    report = from_dict(data)
    line = text.summary_line(report)
    assert text.render(report).rstrip("\n").endswith(line)  # the text report's last line
    saved = text.verdict_of_saved(data)
    if saved is not None:
        assert text.verdict_line(saved) == line
    older = copy.deepcopy(data)
    older["summary"].pop("usable", None)
    assert text.verdict_of_saved(older) is None  # before `usable`: the caller builds the models instead


def test_a_report_format_renders_what_its_module_renders():
    report = from_dict(json.loads(REPORTS[0].read_text()))
    style = formats.Style()
    from kprobe.output import json_report, markdown, prometheus

    assert formats.REPORT["text"](report, style) == text.render(report)
    assert formats.REPORT["json"](report, style) == json_report.render(report, indent=None)
    assert formats.REPORT["json"](report, formats.Style(indent=True)) == json_report.render(report, indent=2)
    assert formats.REPORT["markdown"](report, style) == markdown.render(report)
    assert formats.REPORT["prometheus"](report, style) == prometheus.render(report)
