"""Code and user docs speak of the present: no project issue, session or work-log numbers in them.

Why: a reader of a comment, a docstring or a user page cannot look "issue 31" or "session 40" up, and
what it stood for (a reason, a measurement, a change) belongs in the comment itself, in bench/NOTES.md
(the benches' notebook) or in CHANGELOG.md, the two files this test leaves alone. Upstream references
are facts a reader can look up and stay: KAFKA-1234, KIP-919, a URL, `owner/repo#123`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Where the rule holds: the package, the tests and benches as code, the user docs and the README.
SOURCES = ("kprobe/**/*.py", "tests/**/*.py", "bench/*.py", "docs/*.md", "docs/*.py", "README.md")
EXEMPT = {"bench/NOTES.md", "CHANGELOG.md"}

# A project's own tracker or notebook, by number: "issue 31", "issues 21, 33", "session 40", "task 7",
# "work-log 12", "worklog", "(#42)". Built from parts so that this file does not match itself.
_WORD = "|".join(("iss" + "ue", "sess" + "ion", "ta" + "sk"))
PROJECT_REFERENCE = re.compile(
    rf"\b(?:{_WORD})s?\s+#?\d+|\bwork-?log\b|\(#\d+\)", re.IGNORECASE)
# What may carry a number and is no project reference: a URL, and GitHub's `owner/repo#123`.
UPSTREAM = re.compile(r"https?://\S+|\b[\w.-]+/[\w.-]+#\d+")


def project_references(text: str) -> list[tuple[int, str]]:
    """Each line of TEXT that names a project issue, session or work-log entry, with its number."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if PROJECT_REFERENCE.search(UPSTREAM.sub("", line)):
            found.append((number, line.strip()))
    return found


def test_the_pattern_tells_project_references_from_upstream_ones() -> None:
    project = ["# see " + "iss" + "ue 31", "(" + "sess" + "ion 40, docs)", "Issues 21, 33", "fixed (#42)", "the work-log"]
    upstream = ["KAFKA-15355", "KIP-919", "https://github.com/confluentinc/librdkafka/issues/4212",
                "confluentinc/librdkafka#4212", "a Spark session of its own", "the task runs"]
    assert [bool(project_references(line)) for line in project] == [True] * len(project)
    assert [bool(project_references(line)) for line in upstream] == [False] * len(upstream)


def test_no_project_issue_session_or_work_log_numbers() -> None:
    here = Path(__file__).resolve()
    paths = sorted({p for pattern in SOURCES for p in ROOT.glob(pattern) if p.is_file()})
    assert len(paths) > 100, len(paths)  # the patterns still find the tree
    found = [f"{path.relative_to(ROOT)}:{number}: {line}"
             for path in paths if path.resolve() != here and str(path.relative_to(ROOT)) not in EXEMPT
             for number, line in project_references(path.read_text(encoding="utf-8"))]
    assert not found, "project numbers in code or docs (give the reason instead):\n" + "\n".join(found)
