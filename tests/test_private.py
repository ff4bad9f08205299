"""Private directories and files, and child interpreters that import nothing from the working directory.

Another local user is played by uid 65534: the test, as root, makes what that user could have made first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kprobe import private

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plays another user with chown: needs root")
NOBODY = 65534


def test_a_new_private_dir_is_made_for_this_user_alone(tmp_path: Path) -> None:
    made = private.private_dir(tmp_path / "mine")
    info = made.stat()
    assert info.st_uid == os.geteuid() and info.st_mode & 0o777 == 0o700
    assert private.private_dir(made) == made  # found again, as it was left


@as_root
def test_a_directory_another_user_made_first_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "base"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(private.UnsafePath, match=f"belongs to uid {NOBODY}.*remove it"):
        private.private_dir(planted)


def test_a_link_or_an_open_directory_is_refused(tmp_path: Path) -> None:
    real = private.private_dir(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(private.UnsafePath, match="a link or a file"):
        private.private_dir(tmp_path / "link")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o1777)
    with pytest.raises(private.UnsafePath, match="open to other users"):
        private.private_dir(open_dir)


PLANT = "import pathlib; pathlib.Path({marker!r}).write_text('planted code ran')\nraise SystemExit(0)\n"


@pytest.mark.parametrize("version", [(3, 11), (3, 10)], ids=["-P", "-c without sys.path[0]"])
def test_a_kprobe_planted_in_the_working_directory_is_not_what_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: tuple[int, int]) -> None:
    """`python -m kprobe` from a directory another user can write runs their `kprobe/`; the lab's children don't."""
    marker = tmp_path / "ran"
    (tmp_path / "kprobe").mkdir()
    (tmp_path / "kprobe" / "__init__.py").write_text(PLANT.format(marker=str(marker)))
    (tmp_path / "kprobe" / "__main__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    naive = subprocess.run([sys.executable, "-m", "kprobe", "--version"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert marker.exists(), "the plant was not picked up by a plain `python -m`: the test proves nothing"
    marker.unlink()
    if version < (3, 11):
        monkeypatch.setattr(private.sys, "version_info", version)
    argv = private.python_argv("kprobe", "--version")
    monkeypatch.undo()
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert not marker.exists()
    assert done.returncode == 0 and done.stdout.startswith("kprobe "), (done.stdout, done.stderr, naive.stderr)
