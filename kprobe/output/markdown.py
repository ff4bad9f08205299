"""A report as Markdown for a ticket: GitHub, GitLab and Jira's editor render it; nothing hides in it.

What a ticket needs is what a colleague needs to act: the verdict in one line, the command and
vantage to reproduce it, the endpoint table, and each finding with its fix. Everything that came
off the network or out of a saved file is untrusted text: it goes through `safe()` (no control
character reaches the ticket), names and addresses sit in code spans (no link, image, mention or
HTML from a hostile host name), and prose is escaped where Markdown would read it as markup. No
secret is in it: the report keeps property values redacted, and the command line is rebuilt
from the report's settings, never from argv.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kprobe import __version__
from kprobe.models import USABLE_VERDICTS, Finding, Report
from kprobe.option_table import DEADLINE, PROPS, TIMEOUT, given_client_settings, parse_duration
from kprobe.output.text import ApplicationRow, application_rows, endpoint_rows, summary_line
from kprobe.sanitize import safe

# Characters Markdown may read as markup in running text (emphasis, code, links, HTML, tables, headings,
# strikethrough, entities); a backslash makes each literal. `>` and `!` need none once `<` and `[` have one.
_PROSE = re.compile(r"([\\`*_\[\]<|#~&])")


def prose(value: object, limit: int = 4000, *, is_safe: bool = False) -> str:
    """Untrusted text as literal Markdown prose (one line); `is_safe`: already through `safe()`."""
    return _PROSE.sub(r"\\\1", str(value) if is_safe else safe(value, limit=limit))


def message(value: object, limit: int = 4000) -> str:
    """A finding's message or fix: its own `code spans` kept as code, everything else literal prose.

    kprobe's messages quote settings in backticks (`EXTERNAL://host:port`); a host name in them is the
    network's. Each part between backticks becomes a code span whatever it holds, each part outside
    escaped prose: a backtick a hostile name brings can shift which parts are code, never make markup.
    """
    parts = safe(value, limit=limit).split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(prose(part, is_safe=True))
        elif i == len(parts) - 1:  # an opening backtick without its closing one: a literal backtick
            out.append("\\`" + prose(part, is_safe=True))
        else:
            out.append(code(part, is_safe=True))
    return "".join(out)


def code(value: object, limit: int = 256, *, is_safe: bool = False) -> str:
    """Untrusted text as a code span: literal in every renderer, whatever backticks it holds.

    `|` is escaped too, since GitHub and GitLab end a table cell at it even inside a span.
    """
    text = (str(value) if is_safe else safe(value, limit=limit)).replace("|", "\\|")
    if not text:
        return "` `"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub-flavoured table of cells already made safe."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def command_line(report: Report) -> str:
    """The `kprobe probe` command to run the probe again, from the report's own settings (never argv).

    The one place a report's command line is rebuilt: `probe --format markdown`, `show` and `diff` print it.
    The client properties as the user gave them: each -F file by its name (what it holds stays in the file,
    its secrets with it) and the -X pairs, whose secrets are `[redacted]`; a report that does not keep them
    apart (an older kprobe's) gives every property as -X. -b is left out where the properties'
    bootstrap.servers names the same addresses, as when the user gave the file alone.
    """
    settings = report.settings
    parts = ["kprobe", "probe"]
    props = settings.get("properties")
    named = props if isinstance(props, dict) else {}
    files, pairs = given_client_settings(settings)
    if not _bootstraps_named(report, named if PROPS.report in settings else {}):
        for b in report.bootstraps:
            # The address's PROTOCOL:// prefix, where no security.protocol property gave the protocol it took.
            prefixed = b.protocol not in (None, "PLAINTEXT") and "security.protocol" not in named
            parts += ["-b", f"{b.protocol}://{b.address}" if prefixed else b.address]
    for ns in report.vantage.nameservers:
        host, _, port = ns.rpartition(":")  # the report's `ip:port`; an IPv6 address in brackets, as -n reads it
        parts += ["--nameserver", f"[{host}]:{port}" if ":" in host and not host.startswith("[") else ns]
    parts += [x for f in files for x in ("-F", f)]
    parts += [x for k, v in pairs.items() for x in ("-X", f"{k}={v}")]
    for option in (TIMEOUT, DEADLINE):
        value, flag = settings.get(option.report or ""), option.flag
        if isinstance(value, (int, float)) and value != parse_duration(option.default, flag):
            parts += [flag, f"{value:g}s"]
    if settings.get("identity") is False:
        parts.append("--no-identity")
    for key, flag in (("compare_nameservers", "--compare-nameserver"), ("controllers", "--controllers")):
        values = settings.get(key)
        if isinstance(values, list):
            for value in values:
                parts += [flag, str(value)]
    for key, flag in (("resolve", "--resolve"), ("connect_to", "--connect-to")):
        mapping = settings.get(key)
        if isinstance(mapping, dict):
            for source, target in mapping.items():
                parts += [flag, f"{source}={target}"]
    if isinstance(settings.get("roundtrip"), str):
        parts += ["--roundtrip", str(settings["roundtrip"])]
        if settings.get("roundtrip_create"):
            parts.append("--roundtrip-create")
    # The application named: an option only where the properties above do not already name it (-F's group.id).
    for key, flag, prop in (("group", "--group", "group.id"), ("transactional_id", "--transactional-id",
                                                               "transactional.id"),
                            ("share_group", "--share-group", None), ("client_rack", "--client-rack", "client.rack")):
        if isinstance(settings.get(key), str) and named.get(prop) != settings[key]:
            parts += [flag, str(settings[key])]
    topics = settings.get("topics")
    if isinstance(topics, list):
        parts += [x for t in topics if isinstance(t, str) for x in ("--topic", t)]
    if report.vantage.name != report.vantage.hostname:
        parts += ["--vantage", report.vantage.name]
    return " ".join(_shell_word(safe(p)) for p in parts)


def _bootstraps_named(report: Report, props: Mapping[str, object]) -> bool:
    """Whether the properties' bootstrap list (bootstrap.servers, else metadata.broker.list, as the run reads
    it) is the report's bootstrap addresses, so a run without -b starts from the same ones.
    """
    listed = props.get("bootstrap.servers") or props.get("metadata.broker.list")
    if not isinstance(listed, str) or not report.bootstraps:
        return False
    from kprobe.errors import UsageError
    from kprobe.options import parse_addresses

    try:
        addresses = [a.hostport for a in parse_addresses([listed])]
    except UsageError:
        return False
    return addresses == [b.address for b in report.bootstraps]


def _shell_word(word: str) -> str:
    """Quoted for a POSIX shell when it needs to be, so the line can be pasted back."""
    if word and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _fence(text: str) -> list[str]:
    """A fenced block that no backtick run in the text can close early."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return [f"{fence}console", f"$ {text}", fence]


def finding_lines(f: Finding) -> list[str]:
    """One finding as a list item: severity, code, where, the message and the fix."""
    where = []
    if f.node_ids:
        where.append(("broker " if len(f.node_ids) == 1 else "brokers ") + ", ".join(str(n) for n in f.node_ids[:10])
                     + (f" and {len(f.node_ids) - 10} more" if len(f.node_ids) > 10 else ""))
    if f.endpoints:
        where.append(", ".join(code(e) for e in f.endpoints[:10])
                     + (f" and {len(f.endpoints) - 10} more" if len(f.endpoints) > 10 else ""))
    if f.bootstrap and not f.endpoints:
        where.append(f"bootstrap {code(f.bootstrap)}")
    place = f" ({', '.join(where)})" if where else ""
    return [f"- **{f.severity.upper()}** {code(f.code, limit=64)}{place}  ",
            f"  {message(f.message)}  ",
            f"  **Fix:** {message(f.fix)}"]


def _application_cells(row: ApplicationRow) -> list[str]:
    """One application row: its subject (a user's or broker's name, in a code span) and its state.

    What is wrong is bold, as an endpoint's verdict is when it is not usable: red and yellow in the
    terminal, where a ticket has no colour.
    """
    subject = f"{row.what} {code(row.name)}" if row.what else code(row.name)
    state = ": ".join(f"**{prose(text, is_safe=True)}**" if color in ("red", "yellow") else prose(text, is_safe=True)
                      for text, color in row.parts)
    return [subject, state]


def render(report: Report) -> str:
    """The report as a Markdown summary for a ticket."""
    v = report.vantage
    resolver = "system resolver" if v.resolver_kind == "system" else "nameserver " + ", ".join(
        code(n) for n in v.nameservers)
    lines = [f"#### kprobe: {prose(summary_line(report))}", "",
             f"From {code(v.name)} ({resolver}) at {code(report.started_at, limit=40)}, kprobe {__version__}:", ""]
    lines += _fence(command_line(report))
    lines.append("")
    failed = [b for b in report.bootstraps if b.status != "ok"]
    for b in failed:
        lines.append(f"- Bootstrap {code(b.address)}: **{prose(b.status)}**: {prose(b.error or '')}")
    answered = [b for b in report.bootstraps if b.status == "ok" and b.metadata is not None]
    clusters = sorted({b.metadata.cluster_id for b in answered if b.metadata and b.metadata.cluster_id})
    if answered:
        count = len({br.node_id for b in answered for br in b.brokers})
        lines.append(f"- Cluster {', '.join(code(c) for c in clusters) or 'unknown'}: {count} "
                     f"broker{'' if count == 1 else 's'} advertised through {len(answered)}/{len(report.bootstraps)} "
                     "bootstraps")
    if failed or answered:
        lines.append("")
    for title, results in (("Advertised endpoints", report.endpoints),
                           ("Advertised controller endpoints", report.controller_endpoints)):
        if not results:
            continue
        header, rows = endpoint_rows(results, report.findings)
        # The text table's cells, already safe: the endpoint as code, the rest escaped as prose.
        cells = [[code(c, is_safe=True) if i == 1 else prose(c, is_safe=True) for i, c in enumerate(row)]
                 for row in rows]
        for row in cells:
            if row[-1] not in USABLE_VERDICTS:
                row[-1] = f"**{row[-1]}**"
        titles = [h if h in ("DNS", "TCP", "TLS") else h.title() for h in header]
        lines += [f"**{title}**", "", *table(titles, cells), ""]
    app_rows = application_rows(report)
    if app_rows:
        lines += ["**Application**", "", *table(["Part", "State"],
                                                 [_application_cells(r) for r in app_rows]), ""]
    rt = report.roundtrip
    if rt is not None:
        lines.append(f"**Round trip** on topic {code(rt.topic)} through {prose(rt.client)}: {rt.partitions_ok}/"
                     f"{len(rt.partitions)} partitions produced and read back"
                     + (f" ({prose(rt.status)}: {prose(rt.error)})" if rt.error else ""))
        for step in (rt.group, rt.transaction):
            if step is not None:
                what = "group" if step.kind == "group" else "transactional id"
                lines.append(f"- {what} {code(step.key)} (as {code(step.twin)}, partition {step.partition}): "
                             f"{'**' + step.status + '**' if step.status != 'ok' else 'ok'}"
                             + (f": {prose(step.error)}" if step.error else ""))
        lines.append("")
    if report.findings:
        lines += ["**Findings**", ""]
        for f in report.findings:
            lines += finding_lines(f)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
