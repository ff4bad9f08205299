"""The package's import graph: one-way layers that follow the data flow, and no cycle.

Lazy imports (inside functions) count: they hide a cycle from Python's import machinery but not
from a reader, and a "core" module that lazily imports the lab still needs the lab installed.
The layers, lowest first; a module may import its own layer and the ones below, never above:
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "kprobe"

LAYERS: list[tuple[str, ...]] = [
    # plain facts every layer shares, on the standard library alone (test_the_base_is_plain)
    ("kprobe", "kprobe.errors", "kprobe.redaction", "kprobe.paths", "kprobe.private", "kprobe.maven",
     "kprobe.hostport", "kprobe.records", "kprobe.logs"),
    ("kprobe.models",),  # the data every stage hands on; what differs between two reports (models.compare)
    # the network and the wire; the client configuration files users have (Java, librdkafka)
    ("kprobe.net", "kprobe.kafka", "kprobe.clientprops"),
    # user input: the options' declarations, then validated options; configuration files -> listener settings
    ("kprobe.option_table", "kprobe.options", "kprobe.check"),
    ("kprobe.probe",),  # the steps: bootstrap, endpoints, resolve, connect, identity, tls
    ("kprobe.findings",),  # pure rules over the steps' results
    ("kprobe.fix",),  # the change to the brokers' files that closes a report's gaps, pure
    ("kprobe.runs",),  # the runs (probe, listing, check)
    ("kprobe.output",),  # formatters
    ("kprobe.delivery.publish",),
    ("kprobe.delivery", "kprobe.saved"),  # written, printed, published; saved reports read back and shown
    ("kprobe.delivery.watch", "kprobe.serve"),  # the two long-running commands
    ("kprobe.aggregate", "kprobe.lab"),  # on top of the core, never beneath it
    # the entry points: the CLI, and `python -m kprobe.aggregate`, which fails as the CLI does (kprobe.cli.errors)
    ("kprobe.cli", "kprobe.__main__", "kprobe.aggregate.__main__"),
]
# Side by side in one layer but independent of each other.
APART = [("kprobe.aggregate", "kprobe.lab")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every kprobe module this file imports, at the top or inside a function."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "kprobe")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "kprobe":
                continue
            for alias in node.names:  # `from kprobe.output import text` imports a module
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {name for name in found if name in MODULES}


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}
GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def layer_of(name: str) -> int:
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    assert best is not None, f"{name} is in no layer: add it to LAYERS in tests/test_layers.py"
    return best[0]


BASE = 1  # layers 0 and 1: what everything else stands on


def test_the_base_is_plain():
    """The facts and the data every stage shares import the standard library and each other only: a
    third-party import (or a kprobe module above them) there would load for every command, `--version`
    included, and tie the shared data to one stage's choices.
    """
    import sys

    for name, path in MODULES.items():
        if layer_of(name) > BASE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # What only a type checker reads (`if TYPE_CHECKING:`) never loads.
        checking = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                    and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                    for stmt in node.body for inner in ast.walk(stmt)}
        nodes = [node for node in ast.walk(tree) if id(node) not in checking]
        roots = {alias.name.split(".")[0] for node in nodes if isinstance(node, ast.Import) for alias in node.names}
        roots |= {node.module.split(".")[0] for node in nodes
                  if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        foreign = sorted(r for r in roots if r != "kprobe" and r not in sys.stdlib_module_names)
        assert not foreign, f"{name} is in the base layer but imports {foreign}"


def test_no_top_level_module_outside_the_entry_and_the_base():
    """The tree shows the flow: beside the cli package sit only the entry points, the base and the user's input;
    every stage lives in a package named for it (runs, saved, delivery, net, ...).
    """
    top = sorted(p.stem for p in ROOT.glob("*.py"))
    assert top == ["__init__", "__main__", "errors", "hostport", "logs", "maven", "option_table", "options", "paths", "private",
                   "records", "redaction"], top


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_the_layers(name):
    upward = sorted(dep for dep in GRAPH[name] if layer_of(dep) > layer_of(name))
    assert not upward, f"{name} (layer {layer_of(name)}) imports higher layers: {upward}"


def test_apart():
    for a, b in APART:
        for name, deps in GRAPH.items():
            for x, y in ((a, b), (b, a)):
                if name == x or name.startswith(x + "."):
                    crossing = sorted(d for d in deps if d == y or d.startswith(y + "."))
                    assert not crossing, f"{name} imports {crossing}: {x} and {y} stay independent"


def test_no_cycle():
    """Depth-first search for a back edge; the cycle is printed whole."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(GRAPH[name]):
            if dep == name:
                continue
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep):], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)


def test_the_graph_is_read():
    """The reader must see lazy imports, or every test above passes on nothing."""
    assert "kprobe.probe.identity" in GRAPH["kprobe.runs.probe"]  # imported inside ProbeRun.run
    assert "kprobe.kafka.certs" in GRAPH["kprobe.kafka.connection"]  # imported inside _wrap_tls
    assert "kprobe.output.text" in GRAPH["kprobe.lab.demo"]  # `from kprobe.output import text`


def test_no_module_shares_a_standard_library_name():
    """`spark-submit kprobe/aggregate/__main__.py` (and any run of a file) puts that file's folder first on
    sys.path, where a `kprobe/aggregate/html.py` hid the standard library's `html` and the job died at its
    last step. No module of kprobe may be named like a standard-library module, wherever it sits.
    """
    import sys

    clashes = sorted(name for name in MODULES if name.rsplit(".", 1)[-1] in sys.stdlib_module_names
                     and not name.endswith("__main__"))
    assert not clashes, clashes


# lab/scenarios.py is a declarative table.
LONG_ALLOWED = {"kprobe.lab.scenarios"}
MAX_LINES = 650


def test_no_module_does_several_jobs_by_length():
    """A module past 650 lines has, every time so far, been several jobs in one file (oauth.py was
    settings, a signer, JWS, a cache and an HTTP client): split it along its jobs instead."""
    long = sorted(f"{name} ({n} lines)" for name, path in MODULES.items()
                  if name not in LONG_ALLOWED and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert not long, long
