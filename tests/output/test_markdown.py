"""The command to run a probe again (kprobe.output.markdown.command_line), from a report's settings alone.

Each row is a recorded report with the settings a run of that command line saves (kprobe.options.report_settings
writes them; tests/output/test_markdown_lab.py runs the printed command again on a real broker).
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from kprobe.options import probe_options, report_settings
from kprobe.output.json_load import from_dict
from kprobe.output.markdown import command_line

RECORDED = json.loads((Path(__file__).parent.parent / "data" / "reports" / "2026-11-23-7c779c2-blackholed.json")
                      .read_text())
BOOT = "127.0.0.31:45985"  # the recorded run's bootstrap
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="Zx9-secret";'


def rerun(tmp_path: Path, *args: str, protocol: str = "PLAINTEXT", nameservers: tuple[str, ...] = ()) -> str:
    """The command the recorded report prints once its settings are those of `kprobe probe ARGS`."""
    data: dict[str, Any] = copy.deepcopy(RECORDED)
    options = probe_options(kcat_default=False, **_params(list(args)))
    data["settings"] = json.loads(json.dumps(report_settings(options, None)))
    data["bootstraps"][0].update(address=options.bootstraps[0].hostport, protocol=protocol)
    data["vantage"]["resolver"]["nameservers"] = list(nameservers)
    return command_line(from_dict(data))


def _params(args: list[str]) -> dict[str, Any]:
    """The few options these rows give, by parameter."""
    flags = {"-b": "bootstrap", "-X": "props", "-F": "prop_files", "--timeout": "timeout"}
    params: dict[str, Any] = {"bootstrap": [], "props": [], "prop_files": []}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if isinstance(params.get(flags[flag]), list):
            params[flags[flag]].append(value)
        else:
            params[flags[flag]] = value
    return params


def test_a_file_is_named_not_expanded_and_its_secret_stays_in_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("consumer.properties").write_text(f"bootstrap.servers={BOOT}\nsecurity.protocol=SASL_PLAINTEXT\n"
                                           f"sasl.mechanism=PLAIN\ngroup.id=billing\nsasl.jaas.config={JAAS}\n")
    line = rerun(tmp_path, "-F", "consumer.properties", "-X", "client.id=again", "--timeout", "1",
                 protocol="SASL_PLAINTEXT")
    # The file names the bootstrap and the group: neither -b nor --group, and none of its keys as -X.
    assert line == "kprobe probe -F consumer.properties -X client.id=again --timeout 1s --vantage recorded"
    # Given -b other than the file's, -b stays; the file, as given, with -F (--command-config is the same option).
    assert rerun(tmp_path, "-b", "127.0.0.32:9092", "-F", "consumer.properties", "--timeout", "1") == (
        "kprobe probe -b 127.0.0.32:9092 -F consumer.properties --timeout 1s --vantage recorded")


def test_a_secret_given_with_x_is_redacted(tmp_path):
    line = rerun(tmp_path, "-b", BOOT, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.username=app",
                 "-X", "sasl.password=Zx9-secret", "--timeout", "1", protocol="SASL_PLAINTEXT")
    assert "Zx9-secret" not in line
    assert shlex.split(line) == ["kprobe", "probe", "-b", BOOT, "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                                 "sasl.username=app", "-X", "sasl.password=[redacted]", "--timeout", "1s",
                                 "--vantage", "recorded"]


@pytest.mark.parametrize(("protocol", "nameservers", "words"), [
    # A PROTOCOL:// prefix gave the protocol (no security.protocol property): the command keeps it.
    ("SASL_SSL", (), ["-b", f"SASL_SSL://{BOOT}"]),
    # An IPv6 nameserver in brackets, the form --nameserver reads.
    ("PLAINTEXT", ("::1:5353", "127.0.0.1:53"), ["-b", BOOT, "--nameserver", "[::1]:5353", "--nameserver",
                                                  "127.0.0.1:53"]),
])
def test_what_the_addresses_took_is_kept(tmp_path, protocol, nameservers, words):
    line = rerun(tmp_path, "-b", BOOT, "--timeout", "1", protocol=protocol, nameservers=nameservers)
    assert shlex.split(line) == ["kprobe", "probe", *words, "--timeout", "1s", "--vantage", "recorded"]


def test_a_report_without_the_options_as_given_has_every_property_as_x():
    """An older kprobe's report keeps only `properties`, every key it read: the command gives each with -X."""
    data: dict[str, Any] = copy.deepcopy(RECORDED)
    data["settings"]["properties"] = {"bootstrap.servers": BOOT, "sasl.jaas.config": "[redacted]"}
    assert command_line(from_dict(data)) == (f"kprobe probe -b {BOOT} -X bootstrap.servers={BOOT} -X "
                                             "'sasl.jaas.config=[redacted]' --timeout 1s --deadline 5s --vantage recorded")
