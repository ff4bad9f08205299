"""`kprobe probe` and `kprobe list`: their command lines read, and the commands run, without typer.

Why: these are the commands people type again and again while they fix a listener, and typer
(with the click it carries, and the command it builds from every signature) was about a quarter
of a healthy probe's time (issue 33). Typer still defines the CLI: `kprobe.cli` declares both
commands, renders every help and every error, and runs every other command. This module reads
the plain command lines, the ones a user types: long and short options with their values, flags,
the environment variables they name. Anything else (help, an unknown or misspelt option, a value
that looks like an option, `-bHOST`, `--` ...) is left to typer, which answers as it always has.
tests/test_commands.py holds the tables below equal to typer's options (names, flags, defaults,
environment variables) and both readers to the same values on a corpus of command lines.

The error handling every command shares (one line, an exit code, no secret) is here too
(`guard`), so that a run never needs typer to fail well.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from kprobe.errors import EXIT_ERROR, EXIT_FAILED, EXIT_GAP, EXIT_INTERRUPTED, EXIT_OK, KprobeError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

# A run's summary status (a report's or a listing's) -> the exit code scripts read.
STATUS_EXIT = {"ok": EXIT_OK, "gap": EXIT_GAP, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}

# How an option's value is read, as typer reads the annotation it has in kprobe.cli.
LIST, TEXT, FLAG, INT, FLOAT, PATH, SWITCH = "list", "text", "flag", "int", "float", "path", "switch"

# (parameter, kind, option names, environment variable). A SWITCH's names are its on and off forms.
Option = tuple[str, str, tuple[str, ...], str | None]
_SHARED: dict[str, Option] = {o[0]: o for o in (
    ("bootstrap", LIST, ("--bootstrap", "-b"), "KPROBE_BOOTSTRAP"),
    ("prop", LIST, ("-X",), None),
    ("prop_file", LIST, ("-F", "--command-config"), "KPROBE_CONFIG"),
    ("nameserver", LIST, ("--nameserver", "-n"), "KPROBE_NAMESERVER"),
    ("timeout", TEXT, ("--timeout", "-m"), "KPROBE_TIMEOUT"),
    ("deadline", TEXT, ("--deadline",), "KPROBE_DEADLINE"),
    ("no_color", FLAG, ("--no-color",), None),
    ("verbose", FLAG, ("--verbose", "-v"), None),
    ("resolve", LIST, ("--resolve",), None),
    ("connect_to", LIST, ("--connect-to",), None),
)}
PROBE: tuple[Option, ...] = (
    *(_SHARED[name] for name in ("bootstrap", "prop", "prop_file", "nameserver", "timeout", "deadline")),
    ("json_out", FLAG, ("--json", "-J"), None),
    ("fmt", TEXT, ("--format",), None),
    ("output", PATH, ("--output", "-o"), None),
    ("out_dir", PATH, ("--out",), "KPROBE_OUT"),
    ("prom_file", PATH, ("--prom-file",), None),
    ("publish", TEXT, ("--publish",), "KPROBE_PUBLISH"),
    ("publish_property", LIST, ("--publish-property",), None),
    ("publish_create", FLAG, ("--publish-create",), None),
    ("spool", PATH, ("--spool",), "KPROBE_SPOOL"),
    ("spool_max", INT, ("--spool-max",), None),
    ("vantage", TEXT, ("--vantage",), "KPROBE_VANTAGE"),
    _SHARED["no_color"], _SHARED["verbose"],
    ("no_identity", FLAG, ("--no-identity",), None),
    ("tls_expiry_days", FLOAT, ("--tls-expiry-days",), None),
    ("compare_nameserver", LIST, ("--compare-nameserver",), None),
    _SHARED["resolve"], _SHARED["connect_to"],
    ("controllers", LIST, ("--controllers",), None),
    ("roundtrip", TEXT, ("--roundtrip",), None),
    ("roundtrip_create", FLAG, ("--roundtrip-create",), None),
    ("group", TEXT, ("--group",), None),
    ("transactional_id", TEXT, ("--transactional-id",), None),
    ("share_group", TEXT, ("--share-group",), None),
    ("client_rack", TEXT, ("--client-rack",), None),
    ("topic", LIST, ("--topic", "-t"), None),
)
LIST_OPTIONS: tuple[Option, ...] = (
    _SHARED["bootstrap"],
    ("topic", LIST, ("--topic", "-t"), None),
    ("json_out", FLAG, ("--json", "-J"), None),
    *(_SHARED[name] for name in ("prop", "prop_file", "nameserver", "timeout", "deadline")),
    ("reachability", SWITCH, ("--reachability", "--no-reachability"), None),
    ("no_internal", FLAG, ("--no-internal",), None),
    *(_SHARED[name] for name in ("no_color", "verbose", "resolve", "connect_to")),
)
_NUMBER = {INT: re.compile(r"[0-9]{1,9}"), FLOAT: re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")}


def read(options: tuple[Option, ...], words: list[str],
         environ: os._Environ[str] | dict[str, str] = os.environ) -> dict[str, Any] | None:
    """The given options' values, as typer would pass them; None where typer must read the line.

    Only what a user types is read here; every other form returns None, and typer reads the line
    (and says what is wrong with it). Options not given keep the command's defaults, but for an
    environment variable set to a non-empty value: lists split on whitespace, as click does.
    """
    names: dict[str, tuple[Option, bool]] = {}
    for option in options:
        if option[1] == SWITCH:
            names[option[2][0]], names[option[2][1]] = (option, True), (option, False)
        else:
            names.update((name, (option, True)) for name in option[2])
    given: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        found = names.get(name)
        if found is None:
            return None  # --help, a typo, a positional word, `--`, `-bHOST`, `-Jv`: typer's to read
        (param, kind, _, _), on = found
        if kind in (FLAG, SWITCH):
            if eq:
                return None
            given[param] = on
            i += 1
            continue
        if eq:
            value = attached
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 1
        else:
            return None
        if not value or value.startswith("-"):
            return None  # click would take it as the value; typer's errors say it better
        if kind in _NUMBER and not _NUMBER[kind].fullmatch(value):
            return None
        if kind == LIST:
            given.setdefault(param, []).append(value)
        else:
            given[param] = int(value) if kind == INT else float(value) if kind == FLOAT else (
                _path(value) if kind == PATH else value)
        i += 1
    for param, kind, _, envvar in options:
        if param in given or envvar is None or not environ.get(envvar):
            continue
        value = environ[envvar]
        given[param] = value.split() if kind == LIST else _path(value) if kind == PATH else value
    return given


def _path(value: str) -> Path:
    """A file option's value as typer gives it; pathlib loads only when a run names a file (issue 33)."""
    from pathlib import Path

    return Path(value)


def kcat_alias(argv: list[str]) -> list[str]:
    """For muscle memory from kcat: `kprobe -L -b host` and `kprobe -b host -L -J` mean `kprobe list`.

    Only where no command is named (the first word is an option), so `-L` never changes what
    an explicit command means.
    """
    if "-L" in argv and argv[0].startswith("-"):
        return ["list", *(a for a in argv if a != "-L")]
    return argv


def setup_logging(verbose: bool, *, lazy: bool = False) -> None:
    """--verbose: kprobe's progress and captured client log lines on stderr, never on stdout.

    Warnings (a full spool, a late run) always reach stderr. `lazy` (a plain probe or listing, not
    verbose) installs the handler before the first warning rather than now: most such runs never
    log, and `logging` is a few milliseconds of their start (kprobe.logs).
    """
    from kprobe.logs import configure_on_first_use

    if verbose or not lazy:
        configure_on_first_use(None)
        _stderr_handler(verbose=verbose)
    else:
        configure_on_first_use(lambda: _stderr_handler(verbose=False))


def _stderr_handler(*, verbose: bool) -> None:
    import logging

    from kprobe.output.sanitize import safe

    class _SafeFormatter(logging.Formatter):
        """Log lines quote advertised names and broker errors: escape them like the report does."""

        def format(self, record: logging.LogRecord) -> str:
            return safe(super().format(record), limit=4000)

    logger = logging.getLogger("kprobe")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_SafeFormatter("kprobe: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)


def probe_command(*, bootstrap: list[str] = [], prop: list[str] = [],  # noqa: B006 - never mutated
                  prop_file: list[str] = [], nameserver: list[str] = [],  # noqa: B006
                  timeout: str = "5s", deadline: str = "30s", json_out: bool = False, fmt: str | None = None,
                  output: Path | None = None, out_dir: Path | None = None, prom_file: Path | None = None,
                  publish: str | None = None, publish_property: list[str] = [],  # noqa: B006
                  publish_create: bool = False, spool: Path | None = None, spool_max: int = 10_000,
                  vantage: str | None = None, no_color: bool = False, verbose: bool = False,
                  no_identity: bool = False, tls_expiry_days: float = 30.0,
                  compare_nameserver: list[str] = [], resolve: list[str] = [],  # noqa: B006
                  connect_to: list[str] = [], controllers: list[str] = [],  # noqa: B006
                  roundtrip: str | None = None, roundtrip_create: bool = False, group: str | None = None,
                  transactional_id: str | None = None, share_group: str | None = None,
                  client_rack: str | None = None, topic: list[str] = []) -> int:  # noqa: B006
    """`kprobe probe` (kprobe.cli has its help): the run, its outputs, and the exit code."""
    from kprobe.options import probe_options
    from kprobe.delivery.deliver import deliver, outputs_from
    from kprobe.delivery.progress import run_in_foreground
    from kprobe.runs.probe import ProbeRun

    setup_logging(verbose, lazy=True)
    options = probe_options(
        bootstrap=bootstrap, props=prop, prop_files=prop_file, nameservers=nameserver, timeout=timeout,
        deadline=deadline, vantage=vantage, identity=not no_identity, tls_expiry_days=tls_expiry_days,
        compare_nameservers=compare_nameserver, resolve=resolve, connect_to=connect_to,
        controllers=controllers, roundtrip=roundtrip, roundtrip_create=roundtrip_create, group=group,
        transactional_id=transactional_id, share_group=share_group, client_rack=client_rack, topics=topic)
    outputs = outputs_from(
        fmt=fmt, json_out=json_out, no_color=no_color, output=output, out_dir=out_dir, prom_file=prom_file,
        publish=publish, publish_props=publish_property, spool=spool, spool_max=spool_max,
        publish_create=publish_create)
    report = run_in_foreground(ProbeRun(options))
    if report.roundtrip is not None and report.roundtrip.topic_missing:
        # Bad input like a mistyped option: one line, no report of a run that could not do what was asked.
        raise UsageError(f"--roundtrip: {report.roundtrip.error}")
    deliver(report, outputs, timeout=options.timeout)
    return STATUS_EXIT[report.status]


def list_command(*, bootstrap: list[str] = [], topic: list[str] = [],  # noqa: B006
                 json_out: bool = False, prop: list[str] = [], prop_file: list[str] = [],  # noqa: B006
                 nameserver: list[str] = [], timeout: str = "5s", deadline: str = "30s",  # noqa: B006
                 reachability: bool | None = None, no_internal: bool = False, no_color: bool = False,
                 verbose: bool = False, resolve: list[str] = [], connect_to: list[str] = []) -> int:  # noqa: B006
    """`kprobe list` (kprobe.cli has its help): kcat's listing, what it cannot say on stderr, the exit code."""
    from kprobe.options import list_options
    from kprobe.output.formats import LISTING
    from kprobe.runs.listing import run_list

    del no_color  # kcat's listing has no colours to turn off; taken so that probe's command lines work
    setup_logging(verbose, lazy=True)
    options = list_options(
        bootstrap=bootstrap, topics=topic, props=prop, prop_files=prop_file, nameservers=nameserver,
        timeout=timeout, deadline=deadline, reachability=reachability, internal=not no_internal, resolve=resolve,
        connect_to=connect_to)
    listing = run_list(options)
    if json_out:
        LISTING["json"](listing, sys.stdout)
    elif listing.answered:
        LISTING["text"](listing, sys.stdout)
        from kprobe.output.sanitize import safe
        from kprobe.runs.listing import unchecked_gap

        gap = unchecked_gap(listing, resolve=options.resolve, connect_to=options.connect_to)
        if gap is not None:  # after kcat's lines, on stderr: a script reading stdout gets kcat's bytes
            sys.stdout.flush()
            sys.stderr.write(f"kprobe: {safe(gap, limit=2000)}\n")
    elif listing.status != "interrupted":
        from kprobe.output.sanitize import safe

        errors = "; ".join(f"{a.address}: {a.error}" for a in listing.attempts)
        sys.stderr.write(f"kprobe: no bootstrap answered ({safe(errors, limit=2000)}); are the brokers reachable? "
                         "try a longer --timeout\n")
    if listing.status == "interrupted":
        sys.stderr.write("kprobe: interrupted\n")
    return STATUS_EXIT[listing.status]


COMMANDS: dict[str, tuple[tuple[Option, ...], Callable[..., int]]] = {
    "probe": (PROBE, probe_command), "list": (LIST_OPTIONS, list_command)}


def secrets_in(args: list[str]) -> list[str]:
    """Values on the command line that belong to secret properties, to scrub from any message.

    `-X sasl.password=...` is the usual form; `-X sasl.password secret` (a typo) makes click
    quote the secret as an unexpected argument, so the word after a bare secret key counts too.
    """
    from kprobe.redaction import is_secret

    found = []
    for i, arg in enumerate(args):
        key, sep, value = arg.partition("=")
        if sep and is_secret(key) and value:
            found.append(value)
        elif not sep and is_secret(arg):
            # `-X 'sasl.password:hunter2'` or `-X 'sasl.password hunter2'`: what follows the key.
            rest = re.split(r"[:\s]", arg, maxsplit=1)[1:]
            found += [r.strip() for r in rest if r.strip()]
            if i + 1 < len(args):
                found.append(args[i + 1])
    return found


def _scrub(message: str, secrets: list[str]) -> str:
    from kprobe.redaction import REDACTED

    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, REDACTED)
    return message


def fail(message: str, code: int, secrets: list[str]) -> NoReturn:
    """One line on stderr, scrubbed of the command line's secrets and of a hostile broker's bytes."""
    from kprobe.output.sanitize import safe  # a message may quote a hostile broker's words

    sys.stderr.write(safe(_scrub(message, secrets), limit=2000) + "\n")
    sys.exit(code)


def guard(run: Callable[[], int], secrets: list[str]) -> NoReturn:
    """Run a command: one line per error, never a traceback, never a secret; exit with its code."""
    # SIGPIPE stays ignored (Python's default): a broker closing a socket mid-write must raise
    # EPIPE, not kill the run. A closed stdout (`kprobe ... | head`) is handled below.
    try:
        code = run()
    except KprobeError as exc:
        fail(f"kprobe: error: {exc}", exc.exit_code, secrets)
    except KeyboardInterrupt:
        sys.stderr.write("\n")  # as click does before its Abort: the line starts below the terminal's ^C
        fail("kprobe: interrupted", EXIT_INTERRUPTED, secrets)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the reader left: stop quietly
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        fail(f"kprobe: error: {exc.strerror or exc} ({exc.filename or 'I/O'})", EXIT_ERROR, secrets)
    except Exception as exc:
        # A bug. Exit 3, "the run failed": 1 would tell a script the brokers have a gap.
        if os.environ.get("KPROBE_DEBUG"):
            raise
        fail(f"kprobe: internal error: {exc.__class__.__name__}: {str(exc)[:200]} "
             "(please report it; KPROBE_DEBUG=1 shows the traceback)", EXIT_FAILED, secrets)
    sys.exit(code)


def run_plain(argv: list[str]) -> None:
    """Run `probe` or `list` when its command line is a plain one (`read`); return to let typer read it."""
    args = kcat_alias(argv) if argv else argv
    if not args or args[0] not in COMMANDS:
        return
    options, command = COMMANDS[args[0]]
    given = read(options, args[1:])
    if given is None:
        return
    guard(lambda: command(**given), secrets_in(argv))
