"""The catalogue, the rules, the documentation and the rule tests name the same codes.

Finding codes are a public contract (add, never rename). Four places spell them: the catalogue
(kprobe/findings/catalogue.py: each code's stage and allowed severities), the rule modules that
emit them, docs/findings.md that users read, and the table-driven rule tests beside this file.
A code in one and not another is a finding users cannot look up, a catalogue entry nothing
emits, or a rule nothing proves; each test below names the codes that drift.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from observations import covered

from kprobe.findings.catalogue import CATALOGUE, finding

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "kprobe" / "findings"
HERE = Path(__file__).resolve().parent
SEVERITY_WORDS = ("error", "warning", "info")
# The rule modules of each stage (run-level findings are diagnose.py's own; kprobe check's internal topics
# are judged apart from its listeners, by the cluster's size rather than a client's network).
STAGE_MODULE = {"bootstrap": ("bootstrap.py",), "advertised": ("advertised.py",), "identity": ("identity.py",),
                "consistency": ("consistency.py",), "tls": ("tls.py",), "dns": ("dns.py",), "run": ("diagnose.py",),
                "controllers": ("controllers.py",), "shapes": ("shapes.py",), "roundtrip": ("roundtrip.py",),
                "config": ("check.py", "check_topics.py"), "application": ("application.py",)}
CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def severity_columns(markdown: str) -> dict[str, tuple[str, ...]]:
    """Each code in a table of findings documentation, with the severities its severity column names.

    The column leads with the usual severity, then others after a slash ("info / warning") or at the
    start of a parenthesis ("error (warning when ...)", "warning (error once expired)").
    """
    rows: dict[str, tuple[str, ...]] = {}
    for line in markdown.splitlines():
        match = re.match(r"\| `([A-Z0-9_]+)` \| ([^|]+) \|", line)
        if not match:
            continue
        code, cell = match.groups()
        assert code not in rows, f"{code} has two rows"
        head, _, aside = cell.partition("(")
        words = [w.strip() for w in head.split("/")]
        if aside.split()[:1] and aside.split()[0] in SEVERITY_WORDS:
            words.append(aside.split()[0])
        assert all(w in SEVERITY_WORDS for w in words), f"{code}: unreadable severity column {cell.strip()!r}"
        rows[code] = tuple(words)
    return rows


def documented() -> dict[str, tuple[str, ...]]:
    return severity_columns((ROOT / "docs" / "findings.md").read_text())


def test_the_docs_document_exactly_the_catalogue():
    docs = documented()
    assert sorted(set(CATALOGUE) - set(docs)) == [], "in the catalogue, missing from docs/findings.md"
    assert sorted(set(docs) - set(CATALOGUE)) == [], "in docs/findings.md, not in the catalogue"


def test_the_docs_give_each_code_the_catalogues_severities():
    """Same severities, the usual one first: a user reading "info / warning" must meet nothing else."""
    docs = documented()
    wrong = {code: (docs[code], kind.severities) for code, kind in CATALOGUE.items()
             if code in docs and docs[code] != kind.severities}
    assert wrong == {}, "docs/findings.md severity column vs the catalogue (docs, catalogue)"


def test_the_docs_parser_reads_each_phrasing():
    """The phrasings docs/findings.md uses, read as a reader would: a parser that misread them would pass anything."""
    sample = "\n".join([
        "| `A_B` | error | x | y |", "| `C_D` | info / warning | x | y |",
        "| `E_F` | error (warning when your settings skip the name check) | x | y |",
        "| `G_H` | warning (error once expired) | x | y |", "| `I_J` | error (a note, no severity) | x | y |",
    ])
    assert severity_columns(sample) == {"A_B": ("error",), "C_D": ("info", "warning"), "E_F": ("error", "warning"),
                    "G_H": ("warning", "error"), "I_J": ("error",)}


def code_literals(path: Path) -> set[str]:
    """Every string constant in a module that is a whole finding-code-shaped word.

    Not only the first argument of `finding(...)`: advertised.py passes its codes through a local
    `add(...)` and bootstrap.py picks one of two into a variable first, so literals anywhere count.
    """
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value)}


def rule_modules() -> list[Path]:
    return sorted(p for p in RULES.glob("*.py") if p.name not in ("catalogue.py", "__init__.py"))


def test_rule_modules_name_only_catalogued_codes():
    stray = {p.name: sorted(code_literals(p) - set(CATALOGUE)) for p in rule_modules()}
    assert {name: codes for name, codes in stray.items() if codes} == {}, "codes the catalogue does not know"


def test_every_catalogued_code_is_emitted_by_the_module_of_its_stage():
    """A catalogue entry no rule emits is a promise nothing keeps; one emitted elsewhere has the wrong stage."""
    by_module = {p.name: code_literals(p) for p in rule_modules()}
    assert {m for modules in STAGE_MODULE.values() for m in modules} <= set(by_module), \
        "a stage's module is missing from kprobe/findings/"
    homeless = {code: kind.stage for code, kind in CATALOGUE.items()
                if not any(code in by_module[m] for m in STAGE_MODULE[kind.stage])}
    assert homeless == {}, "catalogued codes no module of their stage names"


def rule_tables() -> list:
    """The CASES of every table-driven rule test in this directory, whatever its stage."""
    cases = []
    for path in sorted(HERE.glob("test_rules_*.py")):
        cases.extend(importlib.import_module(path.stem).CASES)
    return cases


def test_every_code_and_severity_has_a_rule_row():
    """Each code, in each severity it allows, proven by at least one pure row.

    The covered pairs come from the rows' own expectations (rows that are known to fail do not count).
    """
    rows = rule_tables()
    assert len(rows) > 40, "the rule tables were not found"
    wanted = {(code, severity) for code, kind in CATALOGUE.items() for severity in kind.severities}
    assert sorted(wanted - covered(rows)) == [], "codes or severities no row expects"


@pytest.mark.parametrize(("code", "severity", "error"), [
    ("ADVERTISED_UNKNOWN", "error", "finding code ADVERTISED_UNKNOWN is not in the catalogue"),
    ("ADVERTISED_PARTIAL", "error", "ADVERTISED_PARTIAL is never error (the catalogue allows warning)"),
    ("PORT_DIFFERS_FROM_BOOTSTRAP", "error", "PORT_DIFFERS_FROM_BOOTSTRAP is never error (the catalogue allows info, "
                                             "warning)"),
])
def test_finding_refuses_what_the_catalogue_does_not_allow(code, severity, error):
    """The catalogue is enforced when a rule runs, not only here: a rule that drifts fails at once."""
    with pytest.raises(ValueError, match=re.escape(error)):
        finding(code, severity, "message", "fix")


def test_finding_builds_what_the_catalogue_allows():
    built = finding("TLS_EXPIRING", "error", "expired", "renew", node_id=0, endpoint="broker.tls.kprobe.test:9093",
                    bootstrap="broker.tls.kprobe.test:9093")
    assert (built.code, built.severity, built.node_id, built.endpoint, built.bootstrap) == (
        "TLS_EXPIRING", "error", 0, "broker.tls.kprobe.test:9093", "broker.tls.kprobe.test:9093")
