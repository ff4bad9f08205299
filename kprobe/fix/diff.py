"""The unified diff of one file, as `patch -p0` and `git apply -p0` take it, with no secret in its context.

A hunk's context is copied from the file, so a password on a line next to the edited one would be
printed; scrubbing it afterwards breaks the patch (its context no longer matches the file). So the
context stops short of any line that holds a secret, or a piece of one (a JAAS value continued over
lines). Both sides of a hunk keep the same number of context lines: GNU patch applies a hunk whose
leading and trailing context differ only at the file's start or end (else with fuzz), and git apply
not at all; and both need at least one line (git refuses a zero-context hunk without --unidiff-zero).
A secret line right next to an edited one leaves no such context: refused in one line naming its key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from kprobe.errors import UsageError

CONTEXT = 3
_PIECE = 8
# The key of a `key=value` / `key: value` / `- KEY=value` line, for naming a secret without printing it.
_KEY = re.compile(r"^\s*(?:-\s*)?[\"']?(?P<key>[A-Za-z0-9_.\-]+)[\"']?\s*[=:]")


def unified(path: str, old: str, new: str, secrets: Sequence[str] = ()) -> str:
    """A unified diff of one file, `--- path` and `+++ path` as given (no a/ b/), a missing last newline marked."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    hidden = [_holds_secret(line, secrets) for line in a]
    changes = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False)
               .get_opcodes() if tag != "equal"]
    if not changes:
        return ""
    for i1, i2, j1, j2 in changes:
        mine = [i for i in range(i1, i2) if hidden[i]]
        theirs = [j for j in range(j1, j2) if _holds_secret(b[j], secrets)]
        if mine or theirs:
            where = _key(a, mine[0]) if mine else _key(b, theirs[0])
            raise UsageError(f"{path}: a line the change edits holds a secret ({where}): edit the file by hand")
    room = [_room(hidden, i1, i2) for i1, i2, _, _ in changes]
    for (i1, i2, _, _), k in zip(changes, room, strict=True):
        if k == 0:
            i = i1 - 1 if i1 > 0 and hidden[i1 - 1] else i2
            raise UsageError(
                f"{path}: line {i + 1} ({_key(a, i)}) holds a secret right next to a line the change edits, and a "
                "patch's context would print it: put one other line between them (a comment will do) and run "
                "kprobe fix again")
    out = [f"--- {path}\n", f"+++ {path}\n"]
    group = [0]
    for n in range(1, len(changes) + 1):
        if n < len(changes) and changes[n][0] - changes[n - 1][1] <= room[n - 1] + room[n]:
            group.append(n)
            continue
        out += _hunk(a, b, [changes[g] for g in group], min(room[group[0]], room[group[-1]]))
        group = [n]
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _holds_secret(line: str, secrets: Sequence[str]) -> bool:
    """The line holds a secret, or a piece of one: the line or its value (after `key=`), without a continuation's
    backslash, inside a secret. Pieces are judged from 8 characters, so a short common value is not one.
    """
    text = line.strip().rstrip("\\").strip()
    match = _KEY.match(text)
    pieces = [p for p in (text, text[match.end():].strip() if match else "") if len(p) >= _PIECE]
    return any(s in line or any(p in s for p in pieces) for s in secrets if len(s) >= 3)


def _key(lines: Sequence[str], i: int) -> str:
    """The key whose value line i holds (a properties value continued with backslashes: the key on its first line)."""
    while i > 0 and lines[i - 1].rstrip("\r\n").endswith("\\"):
        i -= 1
    match = _KEY.match(lines[i])
    return match.group("key") if match else "a value written over several lines"


def _room(hidden: Sequence[bool], i1: int, i2: int) -> int:
    """The context one change may have: the same on both sides, short of any secret line (the file's ends aside)."""
    before = next((d for d in range(1, CONTEXT + 1) if i1 - d >= 0 and hidden[i1 - d]), CONTEXT + 1) - 1
    after = next((d for d in range(CONTEXT) if i2 + d < len(hidden) and hidden[i2 + d]), CONTEXT)
    return min(before, after)


def _hunk(a: Sequence[str], b: Sequence[str], changes: Sequence[tuple[int, int, int, int]], k: int) -> list[str]:
    """One hunk over changes close enough to share context, `k` lines of it on each side (fewer at a file's end)."""
    first, last = changes[0], changes[-1]
    lead, trail = min(k, first[0]), min(k, len(a) - last[1])
    start, stop = first[0] - lead, last[1] + trail
    new_start, new_stop = first[2] - lead, last[3] + trail
    lines = [f"@@ -{_range(start, stop)} +{_range(new_start, new_stop)} @@\n"]
    at = start
    for i1, i2, j1, j2 in changes:
        lines += [" " + line for line in a[at:i1]]
        lines += ["-" + line for line in a[i1:i2]]
        lines += ["+" + line for line in b[j1:j2]]
        at = i2
    lines += [" " + line for line in a[at:stop]]
    return lines


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it: `N` for one line, `N,0` after line N for none."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"
