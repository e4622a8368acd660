"""Where a new spool's inode is made: on an ext4 without a journal, in a directory of the process's own.

There the kernel's inode allocator skips, one by one, the inodes of a block group freed in the last seconds
to minutes, so spools made right after a fleet freed thousands beside them cost ~0.5 ms each; a directory
under a ``chattr +T`` one lands in a block group of the filesystem's choosing. Real processes; what is left
on disk is looked at after they exit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spoolparse import SpoolFullError
from spoolparse import spool as spool_mod

from .helpers import ROOT

UID = os.geteuid()

# open one spool in argv[1]; print where it is and what its placement's parent looks like; then (argv[2]) exit
# normally, or be killed before any exit handler runs
ONE_SPOOL = r"""
import fcntl, json, os, signal, sys
from spoolparse import spool
f = spool.open_spool(sys.argv[1])
f.write(b"x")
target = os.readlink(f"/proc/self/fd/{f.fileno()}")
top = os.path.join(sys.argv[1], f"spoolparse-{os.geteuid()}")
flags = -1
if os.path.isdir(top):
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    buf = bytearray(8)
    fcntl.ioctl(fd, spool._FS_IOC_GETFLAGS, buf)
    flags = int.from_bytes(buf[:4], sys.byteorder)
    os.close(fd)
print(json.dumps({"pid": os.getpid(), "target": target, "flags": flags,
                  "top": sorted(os.listdir(top)) if os.path.isdir(top) else None}), flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _one_spool(directory: Path, how: str = "exit") -> dict[str, object]:
    p = subprocess.run([sys.executable, "-c", ONE_SPOOL, str(directory), how], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, check=False)
    assert p.returncode == (-signal.SIGKILL if how == "kill" else 0), p.stderr
    out: dict[str, object] = json.loads(p.stdout)
    return out


def _needs_ext4_without_journal(path: Path) -> None:
    if not spool_mod._ext4_without_journal(str(path)):
        pytest.skip(f"needs the temp dir on an ext4 without a journal (the only filesystem where spools get a "
                    f"placement; {path} is not): run with TMPDIR on one, e.g. a loop-mounted mkfs.ext4 -O ^has_journal")


@pytest.fixture
def small_ext4(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB ext4 without a journal and with few inodes, loop-mounted (root only)."""
    image, d = tmp_path / "ext4.img", tmp_path / "mnt"
    d.mkdir()
    with open(image, "wb") as f:
        f.truncate(4 << 20)
    made = shutil.which("mkfs.ext4") is not None and subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-N", "64", str(image)], capture_output=True, check=False
    ).returncode == 0
    if os.geteuid() != 0 or not made or subprocess.run(
        ["mount", "-o", "loop", str(image), str(d)], capture_output=True, check=False
    ).returncode != 0:
        pytest.skip("needs root, mkfs.ext4 (e2fsprogs) and a loop device to mount a small ext4 without a journal")
    try:
        d.chmod(0o1777)
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, check=False)


def test_a_full_filesystem_is_the_runs_failure_and_the_placement_stays(
    small_ext4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)  # no move to a new one while this runs
    assert spool_mod._ext4_without_journal(str(small_ext4))
    placement = spool_mod.placement(str(small_ext4))
    assert os.path.dirname(placement) == str(small_ext4 / f"spoolparse-{UID}")
    # a filesystem made with few inodes: once they are taken, no spool can be made
    fillers = []
    with pytest.raises(OSError, match="No space"):
        for i in range(10_000):
            fillers.append(small_ext4 / f"f{i}")
            fillers[-1].touch()
    with pytest.raises(SpoolFullError, match="cannot create a spool"):
        spool_mod.open_spool(str(small_ext4))
    for p in fillers[:-1]:
        p.unlink()
    f2 = spool_mod.open_spool(str(small_ext4))  # room again: still in the placement, not given up for the directory
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{f2.fileno()}")) == placement
    finally:
        f2.close()
    spool_mod._made_in.pop(str(small_ext4), None)
    os.rmdir(placement)
    os.rmdir(os.path.dirname(placement))


def test_spools_are_made_in_a_directory_of_the_process_own_removed_at_exit(tmp_path: Path) -> None:
    _needs_ext4_without_journal(tmp_path)
    seen = _one_spool(tmp_path)
    placement = os.path.dirname(str(seen["target"]))
    assert os.path.dirname(placement) == str(tmp_path / f"spoolparse-{UID}")
    assert os.path.basename(placement).startswith(f"{seen['pid']}-")
    assert os.path.basename(str(seen["target"])).startswith("#")  # O_TMPFILE: no name
    assert seen["top"] == [os.path.basename(placement)]
    assert isinstance(seen["flags"], int) and seen["flags"] & spool_mod._FS_TOPDIR_FL  # chattr +T
    assert os.listdir(tmp_path) == []  # gone with the process


def test_the_placement_of_a_killed_process_is_removed_by_the_next_process(tmp_path: Path) -> None:
    _needs_ext4_without_journal(tmp_path)
    killed = _one_spool(tmp_path, "kill")
    left = os.path.dirname(str(killed["target"]))
    assert os.path.isdir(left)  # no exit handler ran: an empty directory is left
    seen = _one_spool(tmp_path)
    assert seen["top"] == [os.path.basename(os.path.dirname(str(seen["target"])))]  # the dead one's is swept
    assert os.listdir(tmp_path) == []


def test_a_placement_removed_meanwhile_leaves_the_spools_in_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)
    first = spool_mod.open_spool(str(tmp_path))
    placement = spool_mod.placement(str(tmp_path))
    assert placement != str(tmp_path)
    os.rmdir(placement)  # by hand, or another process's sweep
    os.rmdir(os.path.dirname(placement))
    second = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{second.fileno()}")) == str(tmp_path)
        first.write(b"still here")  # the first one never needed its directory
    finally:
        first.close()
        second.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["symlink", "open to others"])
def test_a_spoolparse_directory_not_ours_is_not_used(tmp_path: Path, kind: str) -> None:
    _needs_ext4_without_journal(tmp_path)
    top = tmp_path / f"spoolparse-{UID}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "symlink":
        top.symlink_to(elsewhere)
    else:
        top.mkdir()
        top.chmod(0o777)
    seen = _one_spool(tmp_path)
    assert os.path.dirname(str(seen["target"])) == str(tmp_path)  # in the directory itself
    assert os.listdir(elsewhere) == []
    if kind != "symlink":
        assert os.listdir(top) == []


def test_other_filesystems_get_no_placement(tmp_path: Path) -> None:
    d = tmp_path / "mnt"
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
                                           capture_output=True, check=False).returncode != 0:
        pytest.skip("needs root to mount a tmpfs")
    try:
        assert not spool_mod._ext4_without_journal(str(d))
        seen = _one_spool(d)
        assert os.path.dirname(str(seen["target"])) == str(d)
        assert seen["top"] is None
        assert os.listdir(d) == []
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, check=False)


def test_a_process_moves_to_a_new_placement_after_many_spools_and_after_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the spools a fleet freed are recent in its placement's block group: the next fleet starts elsewhere
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_SPOOLS", 3)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)  # by count first, whatever the host's load
    top = tmp_path / f"spoolparse-{UID}"
    made = [spool_mod.open_spool(str(tmp_path)) for _ in range(7)]
    where = [os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) for f in made]
    assert [len(set(where[i:i + 3])) for i in (0, 3)] == [1, 1] and len(set(where)) == 3, where  # 3, 3, 1
    assert sorted(os.listdir(top)) == [os.path.basename(where[-1])]  # the ones left are gone at once
    for f in made:
        f.write(b"still usable")
        f.close()
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 0.2)
    time.sleep(0.3)
    after_pause = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{after_pause.fileno()}")) not in where
    finally:
        after_pause.close()
    assert len(os.listdir(top)) == 1


def test_threads_making_spools_while_placements_move_on_stay_in_placements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_SPOOLS", 2)
    targets: list[str] = []

    def make() -> None:
        for _ in range(200):
            f = spool_mod.open_spool(str(tmp_path))
            targets.append(os.readlink(f"/proc/self/fd/{f.fileno()}"))
            f.close()

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(targets) == 800
    # a thread that found its placement gone (another moved on and removed it) took the new one
    assert all(os.path.dirname(os.path.dirname(t)) == str(tmp_path / f"spoolparse-{UID}") for t in targets)
    assert spool_mod.placement(str(tmp_path)) != str(tmp_path)
    assert len(os.listdir(tmp_path / f"spoolparse-{UID}")) == 1


def test_a_forked_copy_makes_its_own_placement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)
    parent = spool_mod.placement(str(tmp_path))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: a spool of its own, in a placement of its own; the parent's is not its to remove
        try:
            f = spool_mod.open_spool(str(tmp_path))
            os.write(w, os.readlink(f"/proc/self/fd/{f.fileno()}").encode())
            f.close()
            spool_mod._remove_placements()
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        target = pipe.read().decode()
    os.waitpid(pid, 0)
    mine = os.path.dirname(target)
    assert os.path.basename(mine).startswith(f"{pid}-") and mine != parent
    assert not os.path.exists(mine)
    assert os.path.isdir(parent)  # the parent's own is still there, and still used
    f = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) == parent
    finally:
        f.close()


def test_fcntl_flags_constants_match_this_platform() -> None:
    # _IOR('f', 1, long) / _IOW('f', 2, long), as <linux/fs.h> spells FS_IOC_GETFLAGS / FS_IOC_SETFLAGS
    if sys.maxsize > 2**32:
        assert (spool_mod._FS_IOC_GETFLAGS, spool_mod._FS_IOC_SETFLAGS) == (0x80086601, 0x40086602)
    else:
        assert (spool_mod._FS_IOC_GETFLAGS, spool_mod._FS_IOC_SETFLAGS) == (0x80046601, 0x40046602)


# -- another local user cannot steer where root makes and removes directories ---------------------------------


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """A second user, made for the test and removed after it: (uid, gid)."""
    import pwd

    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("needs root and useradd/userdel (passwd) to make a second user")
    name = f"spx{os.getpid() % 100000}"
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", name], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip(f"needs useradd to make a second user here ({made.stderr.decode().strip()})")
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A directory under the system temp dir that another user can reach (a test's tmp_path is root's alone)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="spoolparse-attack-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_spool_directory_of_another_user_is_refused(other_user: tuple[int, int], shared_base: Path) -> None:
    """``PDD_AGENT_SPOOL_DIR`` naming a directory another user owns was used without a word: she could rename
    what spoolparse made in it at will."""
    theirs = shared_base / "theirs"
    theirs.mkdir()
    os.chown(theirs, *other_user)
    p = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--", "true"], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PDD_AGENT_SPOOL_DIR": str(theirs)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"is owned by another user (uid {other_user[0]})".encode() in p.stderr, p.stderr
    assert os.listdir(theirs) == []
    with pytest.raises(spool_mod.SpoolDirError, match="owned by another user"):
        spool_mod.resolve_spool_dir(theirs)


def _swap_as(user: tuple[int, int], a: Path, b: Path, stop: Path) -> tuple[int, int]:
    """A process of ``user``'s exchanging ``a`` and ``b`` (``renameat2`` with ``RENAME_EXCHANGE``: atomic) again
    and again until ``stop`` exists: (its pid, the read end of a pipe that gets how many swaps it made)."""
    import ctypes

    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    status = 1
    try:  # the child: her process from here on, with nothing of root's
        os.close(r)
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        libc = ctypes.CDLL(None, use_errno=True)
        exchange = getattr(libc, "renameat2", None)
        nr = {"x86_64": 316, "aarch64": 276}.get(os.uname().machine)  # an older C library: the system call
        at_fdcwd, rename_exchange = -100, 2
        pa, pb, ps = bytes(a), bytes(b), bytes(stop)
        swaps = 0
        while not os.path.exists(ps):
            for _ in range(200):
                if exchange is not None:
                    swaps += exchange(at_fdcwd, pa, at_fdcwd, pb, rename_exchange) == 0
                else:
                    swaps += libc.syscall(nr, at_fdcwd, pa, at_fdcwd, pb, rename_exchange) == 0
        os.write(w, str(swaps).encode())
        status = 0
    finally:
        os._exit(status)


# Makes a new placement in argv[1] argv[2] times (each: the shared directory made or checked, swept, and a
# directory of the process's own made in it), a spool in each.
PLACE = r"""
import os, sys
from spoolparse import spool
placed = 0
for _ in range(int(sys.argv[2])):
    spool._made_in.pop(sys.argv[1], None)  # forget the placement: the next spool makes a new one
    f = spool.open_spool(sys.argv[1])
    placed += os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) != sys.argv[1]
    f.close()
print(placed)
"""


def test_a_swap_loop_of_another_user_never_makes_root_touch_her_target(
    other_user: tuple[int, int], shared_base: Path
) -> None:
    """A world-writable spool directory without the sticky bit: its ``spoolparse-0`` was checked once with
    ``lstat``, then swept and ``mkdtemp``'d in by path. Swapping it for a symlink to a directory of her choosing
    in between (a ``renameat2(RENAME_EXCHANGE)`` loop) made root remove ``99999-important`` there and make its
    ``<pid>-...`` placements there."""
    shared, target = shared_base / "shared", shared_base / "target"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may rename entries in it: no sticky bit
    if not spool_mod._ext4_without_journal(str(shared)):
        pytest.skip("needs the temp dir on an ext4 without a journal (the only filesystem where spools get a "
                    "placement); run with TMPDIR on one")
    target.mkdir()
    (target / "99999-important").mkdir()  # what a sweep would take for a dead process's placement
    before = {p.name: p.stat().st_ino for p in target.iterdir()}
    (shared / "decoy").symlink_to(target)
    (shared / f"spoolparse-{UID}").mkdir(mode=0o700)  # root's own, as the first run leaves it
    stop = shared_base / "stop"
    pid, swaps = _swap_as(other_user, shared / f"spoolparse-{UID}", shared / "decoy", stop)
    placed = 0
    try:
        for _ in range(3):
            run = subprocess.run([sys.executable, "-c", PLACE, str(shared), "300"], capture_output=True, cwd=ROOT,
                                 timeout=300)
            assert run.returncode == 0, run.stderr
            placed += int(run.stdout)
    finally:
        stop.touch()
        _, status = os.waitpid(pid, 0)
        with os.fdopen(swaps, "rb") as f:
            made = f.read()
    assert status == 0 and int(made) > 0  # she did swap, all along
    assert placed > 0  # and placements were made all the same, whenever the name was root's own directory
    assert {p.name: p.stat().st_ino for p in target.iterdir()} == before  # nothing removed, nothing made
