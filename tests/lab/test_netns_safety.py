"""What the root namespace lab will and will not touch, with another local user (uid 65534) as the adversary.

The lab runs as root: a directory another user prepared, a link where the lab writes, or a namespace
that merely looks like the lab's must never become root's write, root's code or root's deletion.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kprobe.lab import netns
from kprobe.lab.netns_scenarios import get_netns_scenario

pytestmark = [
    pytest.mark.lab,  # makes and removes network namespaces
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
                       reason="the namespace lab needs root, ip and nft"),
    pytest.mark.serial("netns-lab"),  # one unit with tests/lab/test_netns.py: both make and remove kpl- namespaces
]
NOBODY = 65534


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=10)
    return proc.pid


@pytest.fixture
def victim() -> Iterator[Path]:
    """A root file (0600) that another user would like overwritten."""
    fd, name = tempfile.mkstemp(prefix="kprobe-victim-")
    os.write(fd, b"root's secret\n")
    os.close(fd)
    yield Path(name)
    Path(name).unlink(missing_ok=True)


def test_a_directory_planted_where_the_lab_once_worked_is_not_written_through(victim: Path) -> None:
    """`/tmp/kpl-<id>` made first by another user, its `scenario` and hosts files linked to a root file."""
    lab_id = str(_dead_pid())
    planted = Path(tempfile.gettempdir()) / f"{netns.PREFIX}{lab_id}"
    planted.mkdir(mode=0o777)
    for name in ("scenario", "hosts-laptop", "resolv-laptop", "lab.json"):
        (planted / name).symlink_to(victim)
    os.chown(planted, NOBODY, NOBODY)
    lab = netns.NetnsLab(get_netns_scenario("lb-private"), lab_id=lab_id)
    try:
        lab._build()  # the namespaces and the files `lab exec` reads; no broker is needed to show where it writes
        info = lab.workdir.lstat()
        assert lab.workdir.parent == netns.lab_base() and lab.workdir != planted
        assert info.st_uid == 0 and info.st_mode & 0o777 == 0o700
        assert (lab.workdir / "hosts-laptop").read_text().startswith("127.0.0.1 localhost")
    finally:
        lab.stop()
        shutil.rmtree(planted)
    assert victim.read_text() == "root's secret\n"
    assert not lab.workdir.exists()


def test_a_base_directory_another_user_made_first_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    planted = run_dir / "kprobe-netns"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(netns.NetnsUnavailable, match=f"belongs to uid {NOBODY}"):
        netns.lab_base(run_dir)
    planted.rmdir()
    planted.symlink_to(tmp_path)
    with pytest.raises(netns.NetnsUnavailable, match="a link or a file"):
        netns.lab_base(run_dir)
    planted.unlink()
    assert netns.lab_base(run_dir) == planted and planted.stat().st_mode & 0o777 == 0o700


@pytest.fixture
def lookalikes() -> Iterator[list[str]]:
    """Namespaces the lab never made: someone's own, one named as a dead lab's, one a damaged record names."""
    names = ["kpl-vpn", "kpl-backup-site", f"{netns.PREFIX}{_dead_pid()}-cluster"]
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
    yield names
    for name in names:
        subprocess.run(["ip", "netns", "delete", name], check=False, timeout=10)


def test_namespaces_the_lab_did_not_record_are_never_removed(lookalikes: list[str]) -> None:
    dead = _dead_pid()
    stale = netns.lab_base() / f"{netns.PREFIX}{dead}"
    stale.mkdir(mode=0o700)
    # A record of a dead lab that names others' namespaces beside its own prefix: only its own may go.
    (stale / netns.RECORD).write_text(json.dumps({"pid": dead, "start": 1, "lab_id": str(dead),
                                                  "namespaces": [*lookalikes, f"{netns.PREFIX}{dead}-router"]}))
    assert netns.remove_stale() == []  # its own router namespace never existed: nothing of its to remove
    assert not stale.exists()
    down = subprocess.run([*netns.python_argv("kprobe", "lab", "down")], capture_output=True, text=True, timeout=60,
                          check=False)
    assert down.returncode == 0, down.stderr
    assert set(lookalikes) <= set(netns.lab_namespaces())
