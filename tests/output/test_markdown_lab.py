"""The Markdown report's command to run the probe again, run again: on a real SCRAM broker, a probe given a
Java client's file prints `-F FILE` as the user gave it (the file's keys stay in the file, its secret with
them), and that command, pasted into a shell, reaches the same verdict.

The pure cases (older reports, redacted -X secrets, the bootstrap list) are tests/output/test_markdown.py's.
"""

from __future__ import annotations

import os
import re
import shlex

import pytest
from cli_runner import run_cli

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
# The summary's timing differs from run to run; the verdict and its counts do not.
TIMING = re.compile(r" \([0-9.]+m?s\)$")


@pytest.mark.labs("scram")
def test_the_printed_command_runs_again_to_the_same_verdict(scram_lab, tmp_path):
    password = scram_lab.passwords["alice"]
    (tmp_path / "consumer.properties").write_text(
        f"bootstrap.servers={scram_lab.bootstrap('SCRAM_GOOD')}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=SCRAM-SHA-512\ngroup.id=billing\n"
        f'sasl.jaas.config={SCRAM} required username="alice" password="{password}";\n')
    env = {k: v for k, v in os.environ.items() if k not in ("KCAT_CONFIG", "KPROBE_CONFIG")}
    ns = scram_lab.nameserver("clients")
    first = run_cli(["probe", "-F", "consumer.properties", "--nameserver", ns, "-X", "client.id=kprobe-again",
                     "--timeout", "2", "--format", "markdown"], cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    [command] = re.findall(r"^```console\n\$ (.*)\n```$", first.stdout, re.M)
    # As given: the file by its name, the -X pair; no -b (the file names the bootstrap), none of the file's keys.
    assert command == f"kprobe probe --nameserver {ns} -F consumer.properties -X client.id=kprobe-again --timeout 2s"
    assert password not in first.stdout + first.stderr

    args = shlex.split(command)
    assert args[:2] == ["kprobe", "probe"]
    again = run_cli(args[1:], cwd=tmp_path, env=env)
    assert again.returncode == first.returncode, again.stdout + again.stderr
    verdict = TIMING.sub("", first.stdout.splitlines()[0].removeprefix("#### kprobe: "))
    assert TIMING.sub("", again.stdout.rstrip("\n").splitlines()[-1]) == verdict.replace("\\", "")
