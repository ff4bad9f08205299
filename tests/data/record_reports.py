"""Record real reports written by earlier kprobe versions, for `kprobe show`'s compatibility tests.

    python tests/data/record_reports.py [COMMIT ...]

Each commit named (by default, those where the v1 report gained fields) is checked out into a
temporary git worktree and its own `kprobe probe` runs, with this checkout's virtualenv, against
today's three-brokers lab: the healthy CLIENT listener and the BLACKHOLED one (a gap, with a
finding). The JSON each version wrote goes to tests/data/reports/<date>-<commit>-<listener>.json,
with the text it printed beside it (.txt), as that version printed it. The reports are real
reports of real runs, as a user with that version would have saved them; rerun only to add a
version (the point of the fixtures is that they do not change).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from kprobe.lab import start_lab  # noqa: E402

# The first commit that wrote v1 reports, then each that added fields to them (git log -- */schema.json).
COMMITS = ["702d0cc", "34d3bcd", "163f1b9", "d8b7ecf", "ee005cd", "7c779c2"]


def main() -> None:
    commits = sys.argv[1:] or COMMITS
    out = HERE / "reports"
    out.mkdir(exist_ok=True)
    lab = start_lab("three-brokers", backend="native")
    try:
        targets = {"client": lab.bootstrap("CLIENT"), "blackholed": lab.real_endpoint("BLACKHOLED", 0)}
        for commit in commits:
            date = subprocess.run(["git", "-C", str(ROOT), "show", "-s", "--format=%cs", commit], check=True,
                                  capture_output=True, text=True).stdout.strip()
            with tempfile.TemporaryDirectory() as tmp:
                tree = Path(tmp) / "tree"
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True,
                               capture_output=True)
                try:
                    for name, bootstrap in targets.items():
                        json_path = out / f"{date}-{commit}-{name}.json"
                        done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", bootstrap, "--timeout",
                                               "1", "--deadline", "5", "-o", str(json_path), "--vantage",
                                               "recorded"], cwd=tree, capture_output=True, text=True, timeout=60,
                                              check=False, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree),
                                                                "NO_COLOR": "1"})
                        if done.returncode not in (0, 1) or not json_path.exists():
                            raise SystemExit(f"{commit} {name}: exit {done.returncode}: {done.stderr[-500:]}")
                        json_path.with_suffix(".txt").write_text(done.stdout)
                        print(f"{json_path.name}: exit {done.returncode}")
                finally:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                                   check=False, capture_output=True)
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
